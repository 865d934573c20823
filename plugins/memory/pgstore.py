"""PgMemoryStore: the memory store in the database several servers share
(``[storage] backend = "postgres"``), behind :class:`~plugins.memory.store.MemoryStore`'s methods.

Every project's rows live in ``all_*`` tables keyed by ``project_id``. Over each table a view
under the SQLite table's name (``memories``, ``memory_events`` …) shows the rows of the project
that the session setting ``neuralmind.project`` names, and fills it in on insert; the store's
database is scoped to its project (:meth:`kernel.pg.PgDatabase.scoped`), so
:class:`MemoryStore`'s SQL runs here unchanged. What the engines do differently is overridden
below: keyword search, the vectors' pgvector column, the record count.

Keyword search is PostgreSQL full-text search: a stored ``tsvector`` (title weighted A, the
rest B; a GIN index over it serves phrase queries), matched with the query rules of the SQLite
store (an OR of the words, prefix match, the title alone for duplicate hints) and ranked by
FTS5's own bm25 formula over each record's term frequencies — so the second stage, trained on
bm25 scores, reads the same kind of number on both engines. Text is split as FTS5's
``unicode61`` splits it (every ASCII character but letters and digits separates words) and
stemmed by Snowball English without a stopword list (FTS5's ``porter`` keeps stopwords too).
Record and word totals, which bm25 needs, are kept by triggers in ``memory_meta``; each
project's distinct words (what a prefix term expands to) and how many records hold each, in
``all_memory_lexemes``; each record's postings (per lexeme: its positions, the title's, the
record's words), in ``all_memory_postings``, so a search reads bm25's inputs from one index,
not from each hit's row. bm25's per-term record counts are counted in the search's own
statement, so every process scores a query alike; the keyword budget's counts
(:meth:`PgMemoryStore.doc_counts`) are read from the lexicon — index lookups, where counting a
common word's records read its whole posting list.

Vectors keep SQLite's blob (the record's vector, then its passages': what the in-process
vector index loads) beside a pgvector ``vector(384)`` of the record's own. The version stamp in
``memory_meta`` moves on every write of any server, so each process's vector index of a small
project reloads when another server wrote; a large one (``ann_min_records``) is searched in
the database instead, through an HNSW index of its own (:meth:`PgMemoryStore.nearest`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from typing import Any

import psycopg

from plugins.memory.models import MemorySettings
from plugins.memory.store import (COLUMNS, INSERT, KEYWORD_COLUMNS, MemoryStore, Writer,
                                  record_of, rewrite_text)

SETTING = "neuralmind.project"
CONFIG = "memory_text"  # the text search configuration of the tsvector and the queries
DIM = 384  # the pgvector column's dimension (MiniLM's); other models keep the blob alone
K1, B = 1.2, 0.75  # FTS5's bm25 constants
HNSW_EF_MAX = 1_000  # pgvector's bound on ef_search (a scan yields no more) and ef_construction
HNSW_M_MAX = 100  # pgvector's bound on m (and ef_construction is at least 2 m)
# above every character a lexeme holds: a prefix's lexemes are those in [prefix, prefix + it]
MAX_CHAR = 0x10FFFF

# ASCII that is not a letter or a digit separates words, as in FTS5's unicode61
SEPARATORS = r"[\x01-\x2F\x3A-\x40\x5B-\x60\x7B-\x7F]+"
SPLIT = re.compile(SEPARATORS)
COLUMN = re.compile(r"^\{(\w+)\} : ")
PART = re.compile(r'"([^"]*)"(\*?)')  # a word of an FTS5 expression, and its prefix star

_PROJECT = f"project_id TEXT NOT NULL DEFAULT current_setting('{SETTING}')"

# Each table: SQLite's columns at its schema step 3 (:func:`sqlite_columns`), then what only
# PostgreSQL keeps, then its keys — every key begins with the project's id.
TABLES = {
    "memories": ("""
    words INTEGER GENERATED ALWAYS AS (cardinality(regexp_split_to_array(btrim(regexp_replace(
        title || ' ' || rationale || ' ' || evidence || ' ' || tags, '{sep}', ' ', 'g')),
        ' '))) STORED,
    fts tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('{config}', regexp_replace(title, '{sep}', ' ', 'g')), 'A') ||
        setweight(to_tsvector('{config}', regexp_replace(
            rationale || ' ' || evidence || ' ' || tags, '{sep}', ' ', 'g')), 'B')) STORED,""",
                 "PRIMARY KEY (project_id, id)"),
    "memory_files": ("", """PRIMARY KEY (project_id, path, memory_id),
    FOREIGN KEY (project_id, memory_id) REFERENCES all_memories ON DELETE CASCADE"""),
    "memory_events": ("", "UNIQUE (project_id, id)"),
    "memory_vectors": ("\n    embedding vector({dim}),", """PRIMARY KEY (project_id, memory_id),
    FOREIGN KEY (project_id, memory_id) REFERENCES all_memories ON DELETE CASCADE"""),
    "memory_meta": ("", "PRIMARY KEY (project_id, key)"),
    "memory_links": ("", """PRIMARY KEY (project_id, source, type, target),
    FOREIGN KEY (project_id, source) REFERENCES all_memories ON DELETE CASCADE,
    FOREIGN KEY (project_id, target) REFERENCES all_memories ON DELETE CASCADE"""),
    "memory_contradictions": ("", """PRIMARY KEY (project_id, id),
    UNIQUE (project_id, a, b),
    FOREIGN KEY (project_id, a) REFERENCES all_memories ON DELETE CASCADE,
    FOREIGN KEY (project_id, b) REFERENCES all_memories ON DELETE CASCADE"""),
    "memory_config": ("", "PRIMARY KEY (project_id, name)"),
    "memory_collections": ("", "PRIMARY KEY (project_id, name)"),
}
# SQLite's types in PostgreSQL: 8-byte floats (its REAL has 4), bytes; memory_meta's values
# are lease times too (a SQLite type is an affinity: that INTEGER column holds floats)
TYPES = {"TEXT": "TEXT", "INTEGER": "INTEGER", "REAL": "DOUBLE PRECISION", "BLOB": "BYTEA"}
FLOATS = {("memory_meta", "value")}


@functools.cache
def sqlite_columns() -> dict[str, tuple[str, ...]]:
    """Each table's column definitions in the SQLite store at schema step 3 (fixed: a later
    SQLite step gets its own PostgreSQL step), in PostgreSQL's words; a rowid key
    (``memory_events.seq``) becomes a BIGSERIAL, numbered across projects. Read once per
    process: every new database's schema is made from the same steps."""
    import sqlite3

    from neuralmind import migrate
    from plugins.memory.store import MIGRATIONS
    conn = sqlite3.connect(":memory:")
    try:
        migrate(conn, MIGRATIONS[:3])
        return {table: tuple(_postgres_column(table, *row[1:])
                             for row in conn.execute(f"PRAGMA table_info({table})"))
                for table in TABLES}
    finally:
        conn.close()


def _postgres_column(table: str, name: str, kind: str, notnull: int, default, pk: int) -> str:
    if pk and kind == "INTEGER":
        return f"{name} BIGSERIAL PRIMARY KEY"
    kind = "REAL" if (table, name) in FLOATS else kind
    return (f"{name} {TYPES[kind]}" + (" NOT NULL" if notnull else "")
            + (f" DEFAULT {default}" if default is not None else ""))


INDEXES = """
CREATE INDEX all_memories_by_created ON all_memories (project_id, created_at, id);
CREATE INDEX all_memories_fts ON all_memories USING gin (fts);
CREATE INDEX all_memory_files_by_memory ON all_memory_files (project_id, memory_id);
CREATE INDEX all_memory_events_by_memory ON all_memory_events (project_id, memory_id, seq);
CREATE INDEX all_memory_vectors_hnsw ON all_memory_vectors USING hnsw (embedding vector_cosine_ops);
CREATE INDEX all_memory_links_by_target ON all_memory_links (project_id, target);
CREATE INDEX all_memory_contradictions_by_b ON all_memory_contradictions (project_id, b);
CREATE INDEX all_memory_contradictions_by_time ON all_memory_contradictions
    (project_id, detected_at, id);
"""

TEXT_SEARCH = f"""
CREATE TEXT SEARCH DICTIONARY memory_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = english);
ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING FOR asciiword, asciihword,
    hword_asciipart, word, hword, hword_part WITH memory_stem;
"""

# bm25's totals per project (records and their words), kept as rows change
TOTALS = """
CREATE FUNCTION memory_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    p TEXT := COALESCE(NEW.project_id, OLD.project_id);
    records INTEGER := CASE TG_OP WHEN 'INSERT' THEN 1 WHEN 'DELETE' THEN -1 ELSE 0 END;
    words INTEGER := COALESCE(NEW.words, 0) - COALESCE(OLD.words, 0);
BEGIN
    INSERT INTO all_memory_meta (project_id, key, value) VALUES (p, 'records', records),
        (p, 'words', words)
    ON CONFLICT (project_id, key) DO UPDATE SET value = all_memory_meta.value + excluded.value;
    RETURN NULL;
END $$;
CREATE TRIGGER all_memories_totals AFTER INSERT OR DELETE OR UPDATE OF words ON all_memories
    FOR EACH ROW EXECUTE FUNCTION memory_totals();
"""


def _schema(conn) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    for statement in TEXT_SEARCH.split(";")[:-1]:
        conn.execute(statement)
    for name, (extra, keys) in TABLES.items():
        columns = sqlite_columns()[name]
        extra = extra.format(sep=SEPARATORS, config=CONFIG, dim=DIM)
        conn.execute(f"CREATE TABLE all_{name} (\n    {_PROJECT},\n    "
                     + ",\n    ".join(columns) + f",{extra}\n    {keys})")
        shown = [c.split()[0] for c in columns] + re.findall(r"^    (\w+) ", extra, re.MULTILINE)
        conn.execute(f"CREATE VIEW {name} AS SELECT {', '.join(shown)} FROM all_{name} "
                     f"WHERE project_id = current_setting('{SETTING}')")
    for statement in INDEXES.split(";")[:-1]:
        conn.execute(statement)
    conn.execute(TOTALS)


# Every step from here on runs again on a database that has it already — an older release,
# started on a database this one migrated, wrote back the version it knew — and leaves the same
# schema and rows: what it makes is made if missing or replaced, what it fills is recomputed.
# (What it looks up or drops is this install's, in ``current_schema()``, where it creates: not
# another install's of the same name further along the search path.)

# Step 2: the project's lexicon (what a prefix term expands to: :func:`_span`),
# kept as rows change (a lexeme no longer held stays: it matches nothing); the vectors' HNSW
# index per large project instead of one over all (:meth:`PgMemoryStore.nearest`); records
# by session, for a semantic hit's neighbours. (Run again, its view is left as the later step
# made it: a view replaced cannot lose a column.)
LEXICON = f"""
CREATE TABLE IF NOT EXISTS all_memory_lexemes (
    project_id TEXT NOT NULL DEFAULT current_setting('{SETTING}'),
    lexeme TEXT COLLATE "C" NOT NULL, PRIMARY KEY (project_id, lexeme));
DO $do$ BEGIN
    IF to_regclass(format('%I.memory_lexemes', current_schema())) IS NULL THEN
        CREATE VIEW memory_lexemes AS SELECT lexeme FROM all_memory_lexemes
            WHERE project_id = current_setting('{SETTING}');
    END IF;
END $do$;
CREATE OR REPLACE FUNCTION memory_lexemes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO all_memory_lexemes SELECT NEW.project_id, unnest(tsvector_to_array(NEW.fts))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS all_memories_lexemes ON all_memories;
CREATE TRIGGER all_memories_lexemes AFTER INSERT OR UPDATE OF title, rationale, evidence, tags
    ON all_memories FOR EACH ROW EXECUTE FUNCTION memory_lexemes();
INSERT INTO all_memory_lexemes (project_id, lexeme)
    SELECT DISTINCT project_id, unnest(tsvector_to_array(fts)) FROM all_memories
    ON CONFLICT DO NOTHING;
DO $do$ BEGIN
    EXECUTE format('DROP INDEX IF EXISTS %I.all_memory_vectors_hnsw', current_schema());
END $do$;
CREATE INDEX IF NOT EXISTS all_memories_by_session
    ON all_memories (project_id, session_id, created_at, id) WHERE session_id IS NOT NULL;
"""

# Step 3: each lexeme's record count, for the keyword budget (:meth:`PgMemoryStore.doc_counts`):
# the trigger adds a record's lexemes and takes away those it held before, one upsert in the
# lexemes' order (the index's: rows are locked in one order whatever the record). The counts
# are set to what the records hold (0 for a lexeme none holds), so a run again changes nothing
# the triggers kept right.
COUNTS = f"""
ALTER TABLE all_memory_lexemes ADD COLUMN IF NOT EXISTS records INTEGER NOT NULL DEFAULT 0;
CREATE OR REPLACE VIEW memory_lexemes AS SELECT lexeme, records FROM all_memory_lexemes
    WHERE project_id = current_setting('{SETTING}');
UPDATE all_memory_lexemes l SET records = COALESCE(c.records, 0)
    FROM all_memory_lexemes k LEFT JOIN (
        SELECT project_id, lexeme, COUNT(*) AS records
        FROM all_memories, unnest(tsvector_to_array(fts)) lexeme GROUP BY project_id, lexeme) c
    ON k.project_id = c.project_id AND k.lexeme = c.lexeme
    WHERE l.project_id = k.project_id AND l.lexeme = k.lexeme
        AND l.records <> COALESCE(c.records, 0);
CREATE OR REPLACE FUNCTION memory_lexemes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO all_memory_lexemes (project_id, lexeme, records)
    SELECT COALESCE(NEW.project_id, OLD.project_id), lexeme, SUM(d) FROM (
        SELECT unnest(tsvector_to_array(NEW.fts)) AS lexeme, 1 AS d
        UNION ALL SELECT unnest(tsvector_to_array(OLD.fts)), -1) c
    GROUP BY lexeme HAVING SUM(d) <> 0 ORDER BY lexeme COLLATE "C"
    ON CONFLICT (project_id, lexeme)
    DO UPDATE SET records = all_memory_lexemes.records + excluded.records;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS all_memories_lexemes ON all_memories;
CREATE TRIGGER all_memories_lexemes AFTER INSERT OR DELETE
    OR UPDATE OF title, rationale, evidence, tags ON all_memories
    FOR EACH ROW EXECUTE FUNCTION memory_lexemes();
"""

# Step 4: each record's postings — per lexeme it holds, its positions (all, and the title's)
# and the record's words — in the order of the keyword search's reads, so bm25's inputs for a
# term are an index-only range scan (FTS5's doclists), not the hits' tsvectors read from the
# heap (a heap block per hit: most of the search at 100k records). Kept by a trigger as the
# record's text changes; its old postings are found by their keys (the old tsvector's lexemes).
# The postings are filled from the records' tsvectors: a run again drops those no record holds,
# adds those missing and sets the others to what the records hold.
POSTINGS = f"""
CREATE TABLE IF NOT EXISTS all_memory_postings (
    project_id TEXT NOT NULL DEFAULT current_setting('{SETTING}'),
    lexeme TEXT COLLATE "C" NOT NULL, memory_id TEXT NOT NULL, tf INTEGER NOT NULL,
    title_tf INTEGER NOT NULL, words INTEGER NOT NULL,
    PRIMARY KEY (project_id, lexeme, memory_id) INCLUDE (tf, title_tf, words));
CREATE OR REPLACE VIEW memory_postings AS SELECT lexeme, memory_id, tf, title_tf, words
    FROM all_memory_postings WHERE project_id = current_setting('{SETTING}');
CREATE OR REPLACE FUNCTION memory_postings_of(fts tsvector) RETURNS TABLE (lexeme TEXT, tf INTEGER,
    title_tf INTEGER) LANGUAGE sql IMMUTABLE AS $$
    SELECT d.lexeme, cardinality(d.positions),
        (SELECT COUNT(*) FROM unnest(d.weights) w WHERE w = 'A')::INTEGER
    FROM unnest(fts) d $$;
CREATE OR REPLACE FUNCTION memory_postings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM all_memory_postings WHERE project_id = OLD.project_id
            AND lexeme = ANY(tsvector_to_array(OLD.fts)) AND memory_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO all_memory_postings SELECT NEW.project_id, p.lexeme, NEW.id, p.tf,
            p.title_tf, NEW.words FROM memory_postings_of(NEW.fts) p;
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS all_memories_postings ON all_memories;
CREATE TRIGGER all_memories_postings AFTER INSERT OR DELETE
    OR UPDATE OF title, rationale, evidence, tags ON all_memories
    FOR EACH ROW EXECUTE FUNCTION memory_postings();
DELETE FROM all_memory_postings p WHERE NOT EXISTS (SELECT FROM all_memories m
    WHERE m.project_id = p.project_id AND m.id = p.memory_id
        AND p.lexeme = ANY(tsvector_to_array(m.fts)));
INSERT INTO all_memory_postings SELECT m.project_id, p.lexeme, m.id, p.tf, p.title_tf, m.words
    FROM all_memories m, memory_postings_of(m.fts) p
    ON CONFLICT (project_id, lexeme, memory_id) DO UPDATE SET tf = excluded.tf,
        title_tf = excluded.title_tf, words = excluded.words
    WHERE (all_memory_postings.tf, all_memory_postings.title_tf, all_memory_postings.words)
        IS DISTINCT FROM (excluded.tf, excluded.title_tf, excluded.words);
"""

# Step 5: a statement's inserted (or deleted) records update the totals, the lexicon and the
# postings once, from its transition table — a batch's common word is one upsert of its
# lexicon row, not one per record (:meth:`PgWriter.insert_rows` inserts a batch in one
# statement). A text edit keeps the row triggers (a transition table takes no column list).
STATEMENTS = """
CREATE OR REPLACE FUNCTION memory_rows() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d INTEGER := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
BEGIN
    INSERT INTO all_memory_meta (project_id, key, value)
    SELECT c.project_id, t.key, t.value FROM (SELECT project_id, d * COUNT(*) AS records,
        d * SUM(words) AS words FROM changed GROUP BY project_id) c
    CROSS JOIN LATERAL (VALUES ('records', c.records), ('words', c.words)) t(key, value)
    ORDER BY 1, 2
    ON CONFLICT (project_id, key) DO UPDATE SET value = all_memory_meta.value + excluded.value;
    INSERT INTO all_memory_lexemes (project_id, lexeme, records)
    SELECT project_id, lexeme, d * COUNT(*) FROM changed, unnest(tsvector_to_array(fts)) lexeme
    GROUP BY project_id, lexeme ORDER BY project_id, lexeme COLLATE "C"
    ON CONFLICT (project_id, lexeme)
    DO UPDATE SET records = all_memory_lexemes.records + excluded.records;
    IF d = 1 THEN
        INSERT INTO all_memory_postings SELECT c.project_id, p.lexeme, c.id, p.tf, p.title_tf,
            c.words FROM changed c, memory_postings_of(c.fts) p;
    ELSE
        DELETE FROM all_memory_postings p USING (SELECT project_id, id,
            unnest(tsvector_to_array(fts)) AS lexeme FROM changed) o
        WHERE p.project_id = o.project_id AND p.lexeme = o.lexeme AND p.memory_id = o.id;
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS all_memories_added ON all_memories;
CREATE TRIGGER all_memories_added AFTER INSERT ON all_memories REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION memory_rows();
DROP TRIGGER IF EXISTS all_memories_removed ON all_memories;
CREATE TRIGGER all_memories_removed AFTER DELETE ON all_memories
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION memory_rows();
DROP TRIGGER IF EXISTS all_memories_totals ON all_memories;
CREATE TRIGGER all_memories_totals AFTER UPDATE OF words ON all_memories
    FOR EACH ROW EXECUTE FUNCTION memory_totals();
DROP TRIGGER IF EXISTS all_memories_lexemes ON all_memories;
CREATE TRIGGER all_memories_lexemes AFTER UPDATE OF title, rationale, evidence, tags
    ON all_memories FOR EACH ROW EXECUTE FUNCTION memory_lexemes();
DROP TRIGGER IF EXISTS all_memories_postings ON all_memories;
CREATE TRIGGER all_memories_postings AFTER UPDATE OF title, rationale, evidence, tags
    ON all_memories FOR EACH ROW EXECUTE FUNCTION memory_postings();
"""


# Step 6 (SQLite's step 4): the tsvector and the word count read the keyword columns — text
# folded in Python (plugins.memory.text), since PostgreSQL strips no accents without the
# ``unaccent`` extension and lower-cases ``İ`` into two characters — and list fields hold real
# text. The generated columns are made anew over them (PostgreSQL 16 cannot change a
# generation expression), with their view, index and triggers — once: run again, the columns
# stay, keeping their place — and the records are rewritten; then steps 2–5 run again,
# recounting the lexicon, the postings and their triggers from the new tsvectors, and the
# word totals are recounted.
KEYWORD_TSVECTOR = f"""
DROP VIEW IF EXISTS memories;
DROP TRIGGER IF EXISTS all_memories_lexemes ON all_memories;
DROP TRIGGER IF EXISTS all_memories_postings ON all_memories;
DROP TRIGGER IF EXISTS all_memories_added ON all_memories;
DROP TRIGGER IF EXISTS all_memories_removed ON all_memories;
ALTER TABLE all_memories DROP COLUMN IF EXISTS fts CASCADE, DROP COLUMN IF EXISTS words CASCADE,
    ADD COLUMN IF NOT EXISTS keyword_title TEXT NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS keyword_body TEXT NOT NULL DEFAULT '';
ALTER TABLE all_memories
    ADD COLUMN words INTEGER GENERATED ALWAYS AS (cardinality(regexp_split_to_array(btrim(
        regexp_replace(keyword_title || ' ' || keyword_body, '{SEPARATORS}', ' ', 'g')),
        ' '))) STORED,
    ADD COLUMN fts tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('{CONFIG}', regexp_replace(keyword_title, '{SEPARATORS}', ' ', 'g')),
                  'A') ||
        setweight(to_tsvector('{CONFIG}', regexp_replace(keyword_body, '{SEPARATORS}', ' ', 'g')),
                  'B')) STORED;
CREATE INDEX all_memories_fts ON all_memories USING gin (fts);
"""
WORD_TOTALS = """
UPDATE all_memory_meta t SET value = s.words
    FROM (SELECT project_id, SUM(words) AS words FROM all_memories GROUP BY project_id) s
    WHERE t.project_id = s.project_id AND t.key = 'words' AND t.value <> s.words;
"""


def _keyword_text(conn) -> None:
    if "keyword_title" not in (conn.execute(
            "SELECT generation_expression FROM information_schema.columns WHERE table_schema "
            "= current_schema() AND table_name = 'all_memories' AND column_name = 'fts'"
            ).fetchone()[0] or ""):
        conn.raw.execute(KEYWORD_TSVECTOR)
        shown = [c.split()[0] for c in sqlite_columns()["memories"]]
        conn.raw.execute(f"CREATE VIEW memories AS SELECT {', '.join(shown)}, words, fts, "
                         f"{', '.join(KEYWORD_COLUMNS)} FROM all_memories "
                         f"WHERE project_id = current_setting('{SETTING}')")
    rewrite_text(conn, "all_", ("project_id",))
    for step in (LEXICON, COUNTS, POSTINGS, STATEMENTS):
        conn.raw.execute(step)
    conn.raw.execute(WORD_TOTALS)


PG_MIGRATIONS = [_schema, LEXICON, COUNTS, POSTINGS, STATEMENTS, _keyword_text]
MAX_PARAMETERS = 65_535  # in one PostgreSQL statement

# bm25's term frequencies of the keyword search's matches (``tf``: record, its words, term,
# frequency) over its terms' lexemes (``q``): read from their postings — or, for a query with
# a phrase (``user_id``, which the postings cannot match: they hold no positions), from the
# tsvectors of the records the phrase query matches, cut to those lexemes (``setweight``
# marks them, ``ts_filter`` keeps them).
# (``OFFSET 0`` keeps each lexeme's postings, and each term's lexemes, a range scan of their
# own: joined as a whole instead, the planner read every posting, or lexeme, of the project)
_POSTINGS_TF = """tf AS (SELECT p.memory_id AS id, p.words, q.term, SUM(p.{tf}) AS f
       FROM q CROSS JOIN LATERAL (SELECT * FROM memory_postings p
                                  WHERE p.lexeme = q.lexeme{where} OFFSET 0) p
       GROUP BY p.memory_id, p.words, q.term)"""
_PHRASE_TF = f"""hit AS (SELECT m.id, m.words, ts_filter(setweight(CASE WHEN :title
               THEN ts_filter(m.fts, '{{a}}') ELSE m.fts END, 'd',
               ARRAY(SELECT DISTINCT lexeme FROM q)), '{{d}}') AS fts
        FROM memories m WHERE m.fts @@ to_tsquery('{CONFIG}', :query)),
tf AS (SELECT hit.id, hit.words, q.term, SUM(cardinality(d.positions)) AS f
       FROM hit, unnest(hit.fts) d JOIN q ON q.lexeme = d.lexeme
       GROUP BY hit.id, hit.words, q.term)"""
META_KEYS = ("version", "backfill_until", "decay_until", "decay_last", "records", "words")


class PgWriter(Writer):
    TAKEN = psycopg.errors.UniqueViolation

    def insert_rows(self, rows: list[tuple]) -> None:
        """The rows in as few statements as PostgreSQL's parameter bound allows, so the
        statement triggers (schema step 5) run once per batch."""
        width = len(rows[0]) if rows else 1
        group, step = f", ({', '.join('?' * width)})", MAX_PARAMETERS // width
        for at in range(0, len(rows), step):
            chunk = rows[at:at + step]
            self.conn.execute(INSERT + group * (len(chunk) - 1), [v for r in chunk for v in r])


class PgMemoryStore(MemoryStore):
    """One project's memories in the shared database (``shared`` is the memory component's
    :class:`~kernel.pg.PgDatabase`)."""

    writer = PgWriter
    TAGS = "json_array_elements_text(CAST(m.tags AS json))"
    # no ANN files on one machine: they would miss the other servers' writes, and the
    # vectors' row numbers they follow are SQLite's; semantic search stays exact here
    LOCAL_ANN = False
    PUT_VECTOR = (
        "INSERT INTO all_memory_vectors (project_id, memory_id, model_id, dim, vector, "
        "content_sha, embedding) SELECT :project, id, :model, :dim, :blob, content_sha, "
        "CAST(CAST(:own AS real[]) AS vector) FROM memories WHERE id = :id AND content_sha = :sha "
        "ON CONFLICT (project_id, memory_id) DO UPDATE SET model_id = excluded.model_id, "
        "dim = excluded.dim, vector = excluded.vector, content_sha = excluded.content_sha, "
        "embedding = excluded.embedding WHERE (all_memory_vectors.model_id, "
        "all_memory_vectors.content_sha, length(all_memory_vectors.vector)) IS DISTINCT FROM "
        "(excluded.model_id, excluded.content_sha, length(excluded.vector))")

    def __init__(self, shared, project_id: str):
        self.project = project_id
        self._stems: dict[str, list[str]] = {}  # a token's lexemes (the text search's stems)
        self._indexed = False  # whether the project's HNSW index was seen built
        super().__init__(shared.scoped({SETTING: project_id}))
        with self.db.transaction() as conn:
            conn.executemany("INSERT INTO memory_meta (key, value) VALUES (?, 0) "
                             "ON CONFLICT DO NOTHING", [(k,) for k in META_KEYS])

    def has_fts(self) -> bool:
        return True  # full-text search is built into PostgreSQL

    def vector_params(self, model_id: str, dim: int, blob: bytes, memory_id: str, sha: str
                      ) -> dict[str, Any]:
        import numpy as np
        own = np.frombuffer(blob, np.float32, count=dim).tolist() if dim == DIM else None
        return {**super().vector_params(model_id, dim, blob, memory_id, sha),
                "project": self.project, "own": own}

    def size_estimate(self) -> int:
        return int(self.db.conn.execute("SELECT value FROM memory_meta WHERE key = 'records'"
                                        ).fetchone()[0])

    def doc_counts(self, words: list[str], total: int) -> dict[str, int]:
        """``{word: records holding it}`` from the lexicon's counts, read each time (an index
        lookup per stem: nothing to keep per process). A word of several tokens
        (``user_id``) counts its rarest token's records: at least the records holding the
        phrase."""
        return self._lexicon_counts(words, prefix=False)

    def prefix_counts(self, words: list[str], total: int) -> dict[str, int]:
        """``{word: its prefix's postings}``: the sum of the counts of the lexemes the word's
        stem begins — at least the records holding one of them (a record holding two counts
        twice), so an upper bound of what ``"word"*`` matches, and exactly the postings the
        keyword budget (``keyword_postings``) bounds."""
        return self._lexicon_counts(words, prefix=True)

    def _lexicon_counts(self, words: list[str], prefix: bool) -> dict[str, int]:
        """Each word's count: over its terms, the least sum of the counts in a term's span."""
        spans = {w: self.terms([(w, prefix)]) for w in words}
        keys = list(dict.fromkeys(t for terms in spans.values() for t in terms))
        if not keys:
            return {w: 0 for w in words}
        sums = dict(zip(keys, (r[0] for r in self.db.conn.execute(
            "SELECT (SELECT COALESCE(SUM(x.records), 0) FROM memory_lexemes x "
            "WHERE x.lexeme >= t.lo AND x.lexeme <= t.hi) "
            "FROM unnest(CAST(? AS text[]), CAST(? AS text[])) WITH ORDINALITY t(lo, hi, i) "
            "ORDER BY t.i", [list(c) for c in zip(*(_span(*k) for k in keys))]))))
        return {w: min((int(sums[t]) for t in spans[w]), default=0) for w in words}

    # -- nearest neighbours (the semantic leg of a large project) ---------------------------

    def _hnsw(self) -> str:
        return "all_memory_vectors_hnsw_" + hashlib.sha1(self.project.encode()).hexdigest()[:16]

    def nearest(self, vector, k: int, ef: int) -> list[str] | None:
        """The ``k`` records whose own vectors are nearest ``vector`` (cosine), nearest first,
        through the project's HNSW index searched with ``ef`` candidates (pgvector reads at
        most 1,000); None while the project has no index (:meth:`build_nearest`)."""
        if not self._indexed:
            row = self.db.conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = "
                                       "to_regclass(?)", (self._hnsw(),)).fetchone()
            if not (row and row[0]):
                return None
            self._indexed = True
        # the partial index serves a query naming its project as a literal
        sql = ("SELECT memory_id FROM all_memory_vectors WHERE project_id = "
               f"{_literal(self.project)} ORDER BY embedding <=> CAST(CAST(? AS real[]) AS "
               "vector) LIMIT ?")
        with self.db.transaction() as conn:
            conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(int(ef), k), HNSW_EF_MAX)}")
            return [r[0] for r in conn.execute(sql, (vector.tolist(), k))]

    def nearest_exact(self, vector, k: int, filters: dict[str, Any], today: str
                      ) -> list[str]:
        """The ``k`` records ``filters`` allow whose own vectors are nearest ``vector``, every
        one scored in the database: before the index is built, and when filters pass too
        few of the index's candidates."""
        where, args = self._where(filters, today)
        args.update(q=vector.tolist(), k=k)
        return [r[0] for r in self.db.conn.execute(
            "SELECT m.id FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.embedding IS NOT NULL" + "".join(f" AND {w}" for w in where)
            + " ORDER BY v.embedding <=> CAST(CAST(:q AS real[]) AS vector) LIMIT :k", args)]

    def build_nearest(self, settings: MemorySettings) -> bool:
        """Build the project's HNSW index (concurrently: writes go on) with the settings'
        ``ann_connectivity`` links per node and ``ann_expansion_add`` candidates per insertion
        (pgvector's ``m`` and ``ef_construction``, within its bounds) and
        ``ann_build_memory_mb`` of ``maintenance_work_mem`` (a graph that fits builds several
        times faster); False when another process is building it. An index a failed build
        left invalid is dropped first."""
        m = min(max(int(settings.ann_connectivity), 2), HNSW_M_MAX)
        ef = min(max(int(settings.ann_expansion_add), 2 * m), HNSW_EF_MAX)
        name, key = self._hnsw(), zlib.crc32(b"hnsw:" + self.project.encode())
        with self.db.pool.connection() as conn:
            if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                return False
            try:
                row = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = "
                                   "to_regclass(%s)", (name,)).fetchone()
                if row and row[0]:
                    return True
                if row:
                    conn.execute(f"DROP INDEX CONCURRENTLY {name}")
                conn.execute("SELECT set_config('maintenance_work_mem', %s, false)",
                             (f"{settings.ann_build_memory_mb}MB",))
                conn.execute(f"CREATE INDEX CONCURRENTLY {name} ON all_memory_vectors USING "
                             f"hnsw (embedding vector_cosine_ops) WITH (m = {m}, "
                             f"ef_construction = {ef}) WHERE project_id = "
                             f"{_literal(self.project)}")
            finally:
                conn.execute("RESET maintenance_work_mem")
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return True

    def session_neighbours(self, ids: list[str]) -> list[str]:
        """The records just before and after each of ``ids`` in its session (``created_at``,
        then id), as :func:`plugins.memory.legs.session_neighbours` orders them."""
        return [r[0] for r in self.db.conn.execute(
            "SELECT n.id FROM memories c CROSS JOIN LATERAL ("
            "(SELECT p.id FROM memories p WHERE p.session_id = c.session_id AND "
            "(p.created_at, p.id) < (c.created_at, c.id) ORDER BY p.created_at DESC, p.id DESC "
            "LIMIT 1) UNION ALL (SELECT p.id FROM memories p WHERE p.session_id = c.session_id "
            "AND (p.created_at, p.id) > (c.created_at, c.id) ORDER BY p.created_at, p.id "
            "LIMIT 1)) n WHERE c.id = ANY(CAST(? AS text[])) AND c.session_id IS NOT NULL",
            (ids,))]

    def keyword(self, match: str, words: list[str], filters: dict[str, Any], today: str,
                limit: int, full: bool = True, pool: int | None = None
                ) -> list[tuple[dict[str, Any], float]]:
        """The SQLite store's keyword search, ``match`` (its FTS5 expression) read back for
        its words, their prefix flags and its column, scored by FTS5's bm25 over the
        tsvector — in one statement, so over one snapshot of the records, the lexicon and
        the totals.

        bm25's terms are the distinct stems of the words' tokens, each exact or a prefix
        (:meth:`terms`); a term matches the lexicon's lexemes in its :func:`_span` (an index
        range scan). A term's ``n`` (records holding one of its lexemes; in the title, for title
        queries) is counted among the records the query matches — every record holding a
        term matches the OR of them — so idf is exact, and the same in every process, with
        no count kept anywhere. The filters therefore apply after the counting:
        after ranking when ``pool`` is given, else before the limit. The matches and their
        term frequencies are the terms' lexemes' postings (:data:`POSTINGS`: index-only
        range scans, as FTS5 reads doclists); for a query holding a phrase, the records the
        phrase query matches, each tsvector cut to the terms' lexemes. A word FTS5 reads as
        a phrase (``user_id``) counts as its tokens' terms here."""
        column = COLUMN.match(match)
        title = column is not None
        parts = [(w, star == "*") for w, star in PART.findall(match)]
        query = _tsquery(parts, title)
        if not query:
            return []
        where, args = self._where(filters, today)
        terms = self.terms(parts)
        phrase = any(len(_tokens(w)) > 1 for w, _ in parts)
        lo, hi = zip(*(_span(*t) for t in terms)) if terms else ((), ())
        args.update(query=query, lo=list(lo), hi=list(hi), title=title, limit=limit, pool=pool)
        columns = COLUMNS if full else "m.id, m.confidence"
        sql = f"""
WITH n AS MATERIALIZED (SELECT GREATEST(MAX(CASE key WHEN 'records' THEN value END), 1) AS docs,
                  GREATEST(MAX(CASE key WHEN 'words' THEN value END), 1) AS words
           FROM memory_meta),
q AS MATERIALIZED (SELECT t.term, x.lexeme
       FROM unnest(CAST(:lo AS text[]), CAST(:hi AS text[])) WITH ORDINALITY t(lo, hi, term)
       CROSS JOIN LATERAL (SELECT lexeme FROM memory_lexemes x
                           WHERE x.lexeme >= t.lo AND x.lexeme <= t.hi OFFSET 0) x),
{_PHRASE_TF if phrase else _POSTINGS_TF.format(tf="title_tf" if title else "tf",
                                                 where=" AND p.title_tf > 0" if title else "")},
df AS (SELECT tf.term, LEAST(COUNT(*), MAX(n.docs)) AS k FROM tf, n GROUP BY tf.term),
idf AS (SELECT df.term, GREATEST(ln((n.docs - df.k + 0.5) / (df.k + 0.5)), 1e-6) AS w
        FROM df, n),
scored AS (SELECT tf.id, SUM(idf.w * tf.f * {K1 + 1} / (tf.f + {K1} * ({1 - B}
                      + {B} * CAST(tf.words AS DOUBLE PRECISION) / (n.words / n.docs)))) AS score
           FROM tf JOIN idf ON idf.term = tf.term, n GROUP BY tf.id
           ORDER BY score DESC, tf.id LIMIT :pool)
SELECT {columns}, scored.score FROM scored
JOIN memories m ON m.id = scored.id WHERE TRUE{"".join(f" AND {w}" for w in where)}
ORDER BY scored.score DESC, m.id LIMIT :limit"""
        rows = self.db.conn.execute(sql, args).fetchall()
        if not full:
            return [({"id": r["id"], "confidence": r["confidence"]}, float(r["score"]))
                    for r in rows]
        return [(record_of(r), float(r["score"])) for r in rows]

    def terms(self, parts: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
        """bm25's terms of a query's ``(word, prefix)`` parts: the distinct stems of their
        tokens, each ``(stem, prefix)``. A token's stems depend on the text search
        configuration alone, so each process keeps them."""
        stems = self._stems
        tokens = list(dict.fromkeys(t for w, _ in parts for t in _tokens(w)))
        unknown = [t for t in tokens if t not in stems]
        if unknown:
            stems.update(self.db.conn.execute(
                f"SELECT u, ARRAY(SELECT lexeme FROM unnest(to_tsvector('{CONFIG}', u))) "
                "FROM unnest(CAST(? AS text[])) u", (unknown,)).fetchall())
        return list(dict.fromkeys((lexeme, prefix) for w, prefix in parts
                                  for t in _tokens(w) for lexeme in stems[t]))


def _tokens(word: str) -> list[str]:
    return [t for t in SPLIT.split(word.lower()) if t]


def _span(lexeme: str, prefix: bool) -> tuple[str, str]:
    """The lexicon's range a term matches: ``lexeme`` itself, or every lexeme it begins."""
    return lexeme, lexeme + chr(MAX_CHAR) if prefix else lexeme


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (quotes doubled; the server's strings are standard)."""
    return "'" + text.replace("'", "''") + "'"


def _operand(lexeme: str, prefix: bool, title: bool) -> str:
    """A ``tsquery`` operand; ``lexeme`` holds letters and digits (a token) or is a stem of
    one, so quoting it is safe."""
    flags = ("*" if prefix else "") + ("A" if title else "")
    return f"'{lexeme}'" + (":" + flags if flags else "")


def _tsquery(parts: list[tuple[str, bool]], title: bool) -> str:
    """The query's ``(word, prefix)`` parts as a ``to_tsquery`` text: an OR of words, each a
    phrase of its tokens (a word FTS5 splits, ``user_id``, is a phrase there too), the last
    token a prefix when the word's is, all of them in the title when ``title``."""
    phrases = []
    for w, prefix in parts:
        tokens = _tokens(w)
        if tokens:
            phrases.append("(" + " <-> ".join(_operand(t, prefix and i == len(tokens) - 1, title)
                                              for i, t in enumerate(tokens)) + ")")
    return " | ".join(phrases)


# -- neuralmind storage --------------------------------------------------------------------

# (table, its key), in an order that copies a row's references before it
COPIED = (("memories", ("id",)), ("memory_files", ("path", "memory_id")),
          ("memory_events", ("id",)), ("memory_vectors", ("memory_id",)),
          ("memory_links", ("source", "type", "target")), ("memory_contradictions", ("id",)),
          ("memory_config", ("name",)), ("memory_collections", ("name",)))


def _vector_row(row: dict[str, Any]) -> dict[str, Any]:
    """A copied vector with its pgvector column (the blob's first vector, the record's own)."""
    import numpy as np
    own = (np.frombuffer(row["vector"], np.float32, count=DIM).tolist()
           if row["dim"] == DIM else None)
    return {**row, "embedding": own}


def storage_component():
    """For ``neuralmind storage``: each project's memory.db into the shared tables, keyed by
    the project's id — records, history (in its order; ``seq`` is the database's), vectors,
    links, contradictions, settings and collections. Leases and the version stamp are not
    copied: the servers that start on the database take them afresh."""
    from neuralmind import StorageComponent, StoredFile, copy_table, missing_vector
    from plugins.memory.store import MIGRATIONS

    def files(home) -> list:
        return [StoredFile(p.state_dir / "memory.db", MIGRATIONS, label=p.id)
                for p in home.projects()]

    def copy(home, target) -> list:
        checks = []
        for file in files(home):
            source = home.open(file)
            if source is None:
                continue
            try:
                project = file.label
                PgMemoryStore(target, project)  # its meta rows: bm25's totals count from here
                for table, key in COPIED:
                    checks.append(copy_table(
                        source, target, table, ("project_id", *key), into=f"all_{table}",
                        extra={"project_id": project},
                        convert=(_vector_row if table == "memory_vectors" else
                                 _without_seq if table == "memory_events" else None),
                        where=("project_id = ?", (project,))))
            finally:
                source.close()
        return checks

    return StorageComponent("memory", PG_MIGRATIONS,
                            (*(f"all_{t}" for t in TABLES), "all_memory_lexemes",
                             "all_memory_postings"),
                            files, copy, prerequisite=missing_vector)


def _without_seq(row: dict[str, Any]) -> dict[str, Any]:
    """A copied history event: its order is its place in the copy (``seq`` is per file)."""
    return {k: v for k, v in row.items() if k != "seq"}
