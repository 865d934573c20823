"""What bm25 and the keyword budget count on PostgreSQL is the database's, read in the
statement that needs it: a process that wrote and searched while the store grew scores a query
as a process that just started does, and as SQLite's FTS5 does on the same records."""

from __future__ import annotations

import pytest

from kernel.pg import PgBackend
from kernel.storage import Database
from plugins.memory import records
from plugins.memory.models import MemoryIn, MemorySettings
from plugins.memory.pgstore import PG_MIGRATIONS, PgMemoryStore, PgWriter
from plugins.memory.search import Searcher
from plugins.memory.store import FIELDS, KEYWORD_COLUMNS, MIGRATIONS, MemoryStore
from tests.plugins.memory.conftest import Api, start
from tests.plugins.memory.test_ann import QUERIES, batch
from tests.plugins.memory.test_ann import records as synthetic
from tests.plugins.memory.test_ann_postgres import same_hits
from tests.plugins.memory.test_keyword_postgres import ASKED
from tests.support import fresh_pg_dsn

pytestmark = pytest.mark.postgres_only("counts of the PostgreSQL store")

NOW = "2026-01-01T00:00:00.000Z"


def creates(fields: list[dict]) -> list[tuple]:
    out = []
    for f in fields:
        rec = records.build(MemoryIn(**f).model_dump(), root=None, now=NOW, head="", errors=[])
        out.append(("create", rec, records.content_sha(rec), {}, "test"))
    return out


@pytest.fixture(scope="module")
def grown(tmp_path_factory, backend):
    """A SQLite store, and a PostgreSQL project written by one store that searched every
    query at 240 records, before 60 more (the store grew by a quarter: no cache started over)."""
    ops = creates(synthetic(300, seed=7))
    lite = MemoryStore(Database(tmp_path_factory.mktemp("counts") / "memory.db", MIGRATIONS))
    pg = PgBackend(fresh_pg_dsn(), 2)
    shared = pg.database("memory", PG_MIGRATIONS)
    writer = PgMemoryStore(shared, "counts")
    searcher = Searcher(MemorySettings(), kernel=None)
    for store in (lite, writer):
        store.apply_batch(ops[:240], NOW)
    for query in ASKED:
        searcher.keyword(writer, query, {"status": "ALL"}, "2026-01-01", 20, full=False)
        writer.doc_counts(query.split(), writer.size_estimate())
    for store in (lite, writer):
        store.apply_batch(ops[240:], NOW)
    yield lite, writer, PgMemoryStore(shared, "counts")
    lite.db.close()
    pg.close()


@pytest.mark.parametrize("query", ASKED)
def test_a_writer_scores_as_a_new_process_and_as_fts5(grown, query):
    searcher = Searcher(MemorySettings(), kernel=None)
    want, got, fresh = (searcher.keyword(store, query, {"status": "ACTIVE"}, "2026-01-01", 20,
                                         full=False) for store in grown)
    assert want, query
    assert [s for _, s in got] == [s for _, s in fresh]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6)


@pytest.fixture()
def pg(backend):
    pg = PgBackend(fresh_pg_dsn(), 2)
    yield pg
    pg.close()


def test_the_lexicons_counts_follow_creates_edits_and_deletes(pg):
    store = PgMemoryStore(pg.database("memory", PG_MIGRATIONS), "edits")
    ops = creates(synthetic(20, seed=8))
    store.apply_batch(ops, NOW)
    for _, rec, _, _, _ in ops[:5]:
        edited = {**rec, "title": "Vacuum the quantum annealer", "rationale": "Annealing."}
        assert store.update(edited, records.content_sha(edited), kind="updated", actor="test",
                            changes={"title": [rec["title"], edited["title"]]})
    store.apply_batch([("delete", rec, None, {}, "test") for _, rec, _, _, _ in ops[5:10]], NOW)
    assert lexicon(store) == truth(store)
    assert lexicon(store)["anneal"] == 5
    assert postings(store) == postings_truth(store)
    assert sum(1 for lexeme, _ in postings(store) if lexeme == "anneal") == 5
    # a statement deleting several records (the triggers read its transition table)
    store.db.conn.execute("DELETE FROM memories WHERE id = ANY(?)",
                          ([rec["id"] for _, rec, _, _, _ in ops[10:14]],))
    assert lexicon(store) == truth(store) and postings(store) == postings_truth(store)
    count, words = store.db.conn.execute("SELECT COUNT(*), SUM(words) FROM memories").fetchone()
    assert count == 11 and totals(store) == (count, words)


def test_the_migration_counts_the_records_already_stored(pg):
    old = older(PgMemoryStore(pg.database("memory", PG_MIGRATIONS[:2]), "before"))
    old.apply_batch(creates(synthetic(50, seed=9)), NOW)
    store = PgMemoryStore(pg.database("memory", PG_MIGRATIONS), "before")
    assert lexicon(store) == truth(store) and len(truth(store)) > 50
    assert postings(store) == postings_truth(store)


@pytest.mark.parametrize("words", [["vacuum", "proxies", "tree", "user_id", "zzz"]])
def test_the_budgets_counts_read_the_lexicon(grown, words):
    lite, writer, _ = grown
    total = writer.size_estimate()
    assert writer.doc_counts(words, total) == lite.doc_counts(words, total)
    # a prefix's count sums its words' counts: at least the records holding one of them
    prefix = writer.prefix_counts(["vacu", "prox", "zz"], total)
    assert prefix == lite.prefix_counts(["vacu", "prox", "zz"], total)


class OlderWriter(PgWriter):
    """Writes records as a release before schema step 6 did: without the keyword columns."""

    def insert_rows(self, rows: list[tuple]) -> None:
        for row in rows:
            self.conn.execute(f"INSERT INTO memories ({', '.join(FIELDS)}, content_sha) VALUES "
                              f"({', '.join('?' * (len(FIELDS) + 1))})",
                              row[:-len(KEYWORD_COLUMNS)])


def older(store: PgMemoryStore) -> PgMemoryStore:
    """``store`` writing as an older release (:class:`OlderWriter`)."""
    store.writer = OlderWriter
    return store


def lexicon(store) -> dict[str, int]:
    """Each lexeme's count, as the trigger keeps it (a lexeme no record holds stays, at 0)."""
    return {r[0]: r[1] for r in store.db.conn.execute(
        "SELECT lexeme, records FROM memory_lexemes WHERE records > 0")}


def truth(store) -> dict[str, int]:
    return {r[0]: r[1] for r in store.db.conn.execute(
        "SELECT lexeme, COUNT(*) FROM memories, unnest(tsvector_to_array(fts)) lexeme "
        "GROUP BY lexeme")}


def totals(store) -> tuple[int, int]:
    """bm25's totals as the triggers keep them: records, and their words."""
    row = store.db.conn.execute("SELECT MAX(CASE key WHEN 'records' THEN value END), "
                                "MAX(CASE key WHEN 'words' THEN value END) FROM memory_meta"
                                ).fetchone()
    return int(row[0]), int(row[1])


def postings(store) -> dict[tuple[str, str], tuple[int, int, int]]:
    """Each record's postings as the trigger keeps them: ``(lexeme, record)`` → positions,
    positions in the title, the record's words."""
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in store.db.conn.execute(
        "SELECT lexeme, memory_id, tf, title_tf, words FROM memory_postings")}


def postings_truth(store) -> dict[tuple[str, str], tuple[int, int, int]]:
    """The same from the records' tsvectors (title positions: the title's own tsvector)."""
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in store.db.conn.execute(
        "SELECT d.lexeme, m.id, cardinality(d.positions), COALESCE(cardinality(t.positions), 0), "
        "m.words FROM memories m CROSS JOIN unnest(m.fts) d LEFT JOIN LATERAL "
        "unnest(to_tsvector('memory_text', regexp_replace(m.title, '[^[:alnum:]]+', ' ', 'g'))) "
        "t ON t.lexeme = d.lexeme")}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory, backend):
    """Two kernels on one project: one wrote its records (and searched between its batches,
    as a server does), the other only reads. Decay is off: each kernel's searches count
    recalls, written in the background, which move the other's strengths."""
    home, project = tmp_path_factory.mktemp("counts-home"), tmp_path_factory.mktemp("counts")
    first, second = (start(home, memory={"decay_sweep_hours": 0, "decay_weight": 0.0})
                     for _ in range(2))
    writer = Api(first, project)
    batch(writer, synthetic(240, seed=11))
    for query in QUERIES:
        writer.search(query, mode="hybrid")
    batch(writer, synthetic(60, seed=12))
    yield writer, Api(second, project)
    for s in (first, second):
        s.stop()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("query", QUERIES)
def test_two_kernels_score_a_query_alike(kernels, query, mode):
    writer, reader = kernels
    same_hits(writer.search(query, mode=mode), reader.search(query, mode=mode))
