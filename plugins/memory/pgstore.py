"""PgMemoryStore: the memory store in the database several servers share
(``[storage] backend = "postgres"``), behind :class:`~plugins.memory.store.MemoryStore`'s methods.

Every project's rows live in ``all_*`` tables keyed by ``project_id``. Over each table a view
under the SQLite table's name (``memories``, ``memory_events`` …) shows the rows of the project
that the session setting ``neuralmind.project`` names, and fills it in on insert; the store's
database is scoped to its project (:meth:`kernel.pg.PgDatabase.scoped`), so
:class:`MemoryStore`'s SQL runs here unchanged. What the engines do differently is overridden
below: keyword search, the vectors' pgvector column, the record count.

Keyword search is PostgreSQL full-text search: a stored ``tsvector`` (title weighted A, the
rest B) with a GIN index, matched with the query rules of the SQLite store (an OR of the words,
prefix match, the title alone for duplicate hints) and ranked by FTS5's own bm25 formula over
the tsvector's term frequencies — so the second stage, trained on bm25 scores, reads the
same kind of number on both engines. Text is split as FTS5's ``unicode61`` splits it (every
ASCII character but letters and digits separates words) and stemmed by Snowball English
without a stopword list (FTS5's ``porter`` keeps stopwords too). Record and word totals,
which bm25 needs, are kept by triggers in ``memory_meta``.

Vectors keep SQLite's blob (the record's vector, then its passages': what the in-process
vector index loads) beside a pgvector ``vector(384)`` of the record's own, under an HNSW
cosine index. The version stamp in ``memory_meta`` moves on every write of any server, so each
process's vector index reloads when another server wrote.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from plugins.memory.store import COLUMNS, MemoryStore, Writer, record_of

SETTING = "neuralmind.project"
CONFIG = "memory_text"  # the text search configuration of the tsvector and the queries
DIM = 384  # the pgvector column's dimension (MiniLM's); other models keep the blob alone
K1, B = 1.2, 0.75  # FTS5's bm25 constants

# ASCII that is not a letter or a digit separates words, as in FTS5's unicode61
SEPARATORS = r"[\x01-\x2F\x3A-\x40\x5B-\x60\x7B-\x7F]+"
SPLIT = re.compile(SEPARATORS)
COLUMN = re.compile(r"^\{(\w+)\} : ")

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


def sqlite_columns(table: str) -> list[str]:
    """``table``'s column definitions in the SQLite store at schema step 3 (fixed: a later
    SQLite step gets its own PostgreSQL step), in PostgreSQL's words; a rowid key
    (``memory_events.seq``) becomes a BIGSERIAL, numbered across projects."""
    import sqlite3

    from neuralmind import migrate
    from plugins.memory.store import MIGRATIONS
    conn = sqlite3.connect(":memory:")
    try:
        migrate(conn, MIGRATIONS[:3])
        rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    finally:
        conn.close()
    out = []
    for _, name, kind, notnull, default, pk in rows:
        if pk and kind == "INTEGER":
            out.append(f"{name} BIGSERIAL PRIMARY KEY")
            continue
        kind = "REAL" if (table, name) in FLOATS else kind
        out.append(f"{name} {TYPES[kind]}" + (" NOT NULL" if notnull else "")
                   + (f" DEFAULT {default}" if default is not None else ""))
    return out


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
        columns = sqlite_columns(name)
        extra = extra.format(sep=SEPARATORS, config=CONFIG, dim=DIM)
        conn.execute(f"CREATE TABLE all_{name} (\n    {_PROJECT},\n    "
                     + ",\n    ".join(columns) + f",{extra}\n    {keys})")
        shown = [c.split()[0] for c in columns] + re.findall(r"^    (\w+) ", extra, re.MULTILINE)
        conn.execute(f"CREATE VIEW {name} AS SELECT {', '.join(shown)} FROM all_{name} "
                     f"WHERE project_id = current_setting('{SETTING}')")
    for statement in INDEXES.split(";")[:-1]:
        conn.execute(statement)
    conn.execute(TOTALS)


PG_MIGRATIONS = [_schema]
META_KEYS = ("version", "backfill_until", "decay_until", "decay_last", "records", "words")


class PgWriter(Writer):
    TAKEN = psycopg.errors.UniqueViolation


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
        "embedding = excluded.embedding")

    def __init__(self, shared, project_id: str):
        self.project = project_id
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

    def doc_count(self, word: str, prefix: bool = False) -> int:
        query = _tsquery([word], prefix=prefix, title=False)
        if not query:
            return 0
        return self.db.conn.execute(f"SELECT COUNT(*) FROM memories WHERE fts @@ "
                                    f"to_tsquery('{CONFIG}', ?)", (query,)).fetchone()[0]

    def keyword(self, match: str, words: list[str], filters: dict[str, Any], today: str,
                limit: int, exclude: str | None = None, full: bool = True,
                pool: int | None = None) -> list[tuple[dict[str, Any], float]]:
        """The SQLite store's keyword search (``match`` is its FTS5 expression: read back for
        its column and prefix flag), scored by FTS5's bm25 over the tsvector."""
        column = COLUMN.match(match)
        title, prefix = column is not None, match.endswith("*") or '"*' in match
        query = _tsquery(words, prefix, title)
        if not query:
            return []
        where, args = self._where(filters, today)
        if exclude:
            where.append("m.id != :exclude")
            args["exclude"] = exclude
        extra = "".join(f" AND {w}" for w in where)
        flags = ("*" if prefix else "") + ("A" if title else "")
        args.update(query=query, units=" ".join(t for w in words for t in _tokens(w)),
                    suffix=":" + flags if flags else "", title=title,
                    prefix=prefix, limit=limit, pool=pool or limit)
        columns = COLUMNS if full else "m.id, m.confidence"
        sql = f"""
WITH n AS MATERIALIZED (SELECT GREATEST(MAX(CASE key WHEN 'records' THEN value END), 1) AS docs,
                  GREATEST(MAX(CASE key WHEN 'words' THEN value END), 1) AS words
           FROM memory_meta),
unit AS MATERIALIZED (SELECT u.lexeme, (SELECT COUNT(*) FROM memories x WHERE x.fts @@
                           CAST(quote_literal(u.lexeme) || :suffix AS tsquery)) AS df
         FROM unnest(to_tsvector('{CONFIG}', :units)) u),
idf AS MATERIALIZED (SELECT unit.lexeme, GREATEST(ln((n.docs - unit.df + 0.5) / (unit.df + 0.5)), 1e-6) AS w
        FROM unit, n),
hit AS (SELECT m.id, m.words, CASE WHEN :title THEN ts_filter(m.fts, '{{a}}') ELSE m.fts END
               AS fts FROM memories m
        WHERE m.fts @@ to_tsquery('{CONFIG}', :query){'' if pool else extra}),
scored AS (
    SELECT hit.id, (SELECT COALESCE(SUM(idf.w * t.f * {K1 + 1} / (t.f + {K1} * ({1 - B}
                        + {B} * hit.words / (n.words / n.docs)))), 0)
                    FROM idf, LATERAL (SELECT SUM(cardinality(d.positions)) AS f
                                       FROM unnest(hit.fts) d WHERE d.lexeme = idf.lexeme
                                       OR (:prefix AND starts_with(d.lexeme, idf.lexeme))) t
                    WHERE t.f > 0) AS score
    FROM hit, n ORDER BY score DESC, hit.id LIMIT :pool)
SELECT {columns}, scored.score FROM scored
JOIN memories m ON m.id = scored.id WHERE TRUE{extra if pool else ''}
ORDER BY scored.score DESC, m.id LIMIT :limit"""
        rows = self.db.conn.execute(sql, args).fetchall()
        if not full:
            return [({"id": r["id"], "confidence": r["confidence"]}, float(r["score"]))
                    for r in rows]
        return [(record_of(r), float(r["score"])) for r in rows]


def _tokens(word: str) -> list[str]:
    return [t for t in SPLIT.split(word.lower()) if t]


def _tsquery(words: list[str], prefix: bool, title: bool) -> str:
    """The words as a ``to_tsquery`` text: an OR of words, each a phrase of its tokens (a
    word FTS5 splits, ``user_id``, is a phrase there too), the last token a prefix when
    ``prefix``, all of them in the title when ``title``. Tokens hold letters and digits only,
    so quoting them is safe."""
    def operand(token: str, last: bool) -> str:
        flags = ("*" if prefix and last else "") + ("A" if title else "")
        return f"'{token}'" + (":" + flags if flags else "")

    phrases = []
    for w in words:
        tokens = _tokens(w)
        if tokens:
            phrases.append("(" + " <-> ".join(operand(t, i == len(tokens) - 1)
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
    from neuralmind import StorageComponent, StoredFile, copy_table
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

    return StorageComponent("memory", PG_MIGRATIONS, tuple(f"all_{t}" for t in TABLES),
                            files, copy)


def _without_seq(row: dict[str, Any]) -> dict[str, Any]:
    """A copied history event: its order is its place in the copy (``seq`` is per file)."""
    return {k: v for k, v in row.items() if k != "seq"}
