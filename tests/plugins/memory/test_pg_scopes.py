"""Each project's store reads its own rows on PostgreSQL although the projects' stores share
one pool: a pooled connection keeps the project its last reader set (so a search sends no
settings again), and a statement of another project sets its own first — reads, writes and
searches interleaved on one connection."""

from __future__ import annotations

import pytest

from kernel.pg import PgBackend
from plugins.memory.models import MemorySettings
from plugins.memory.pgstore import PG_MIGRATIONS, PgMemoryStore
from plugins.memory.search import Searcher
from tests.plugins.memory.test_pg_counts import NOW, creates
from tests.support import fresh_pg_dsn

pytestmark = pytest.mark.postgres_only("PostgreSQL's session settings")


@pytest.fixture
def stores():
    pg = PgBackend(fresh_pg_dsn(), 1)  # one connection: every statement on the same session
    shared = pg.database("memory", PG_MIGRATIONS)
    yield PgMemoryStore(shared, "alpha"), PgMemoryStore(shared, "beta")
    pg.close()


def test_interleaved_projects_read_their_own_rows(stores):
    alpha, beta = stores
    alpha.apply_batch(creates([{"title": "alpha cache policy", "rationale": "lru eviction"}]),
                      NOW)
    assert alpha.size_estimate() == 1  # the connection now holds alpha's scope
    beta.apply_batch(creates([{"title": "beta retry policy", "rationale": "exponential backoff"},
                              {"title": "beta queue", "rationale": "bounded"}]), NOW)
    searcher = Searcher(MemorySettings(), kernel=None)
    for _ in range(2):  # each reader after the other's, then after its own
        assert alpha.size_estimate() == 1 and beta.size_estimate() == 2
        assert [r["title"] for r, _ in searcher.keyword(alpha, "policy", {"status": "ALL"},
                                                         "2026-01-01", 10)] \
            == ["alpha cache policy"]
        assert [r["title"] for r, _ in searcher.keyword(beta, "policy", {"status": "ALL"},
                                                         "2026-01-01", 10)] \
            == ["beta retry policy"]
    # a write transaction of one project between two reads of the other
    assert beta.size_estimate() == 2
    alpha.apply_batch(creates([{"title": "alpha second", "rationale": "more"}]), NOW)
    assert beta.size_estimate() == 2 and alpha.size_estimate() == 2
    assert {r["title"] for r in beta.list({"status": "ALL"}, "2026-01-01", 10, None)} \
        == {"beta retry policy", "beta queue"}
