"""What bm25 and the keyword budget count on PostgreSQL is the database's, read in the
statement that needs it: a process that wrote and searched while the store grew scores a query
as a process that just started does, and as SQLite's FTS5 does on the same records."""

from __future__ import annotations

import pytest

from kernel.pg import PgBackend
from kernel.storage import Database
from plugins.memory import records
from plugins.memory.models import MemoryIn, MemorySettings
from plugins.memory.pgstore import PG_MIGRATIONS, PgMemoryStore
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore
from tests.plugins.memory.test_ann import records as synthetic
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
