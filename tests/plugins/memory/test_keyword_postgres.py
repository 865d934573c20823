"""The keyword leg on PostgreSQL (tsvector, a lexicon for prefixes, bm25 computed from the
postings, or from the tsvectors for a phrase) ranks as SQLite's FTS5 does on the same records: the same hits in the
same order and the same bm25 scores, whole or bounded (``keyword_postings``), for duplicate
hints (title words, no prefix) too."""

from __future__ import annotations

import pytest

from kernel.pg import PgBackend
from kernel.storage import Database
from plugins.memory import records
from plugins.memory.models import MemoryIn, MemorySettings
from plugins.memory.pgstore import PG_MIGRATIONS, PgMemoryStore
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore
from tests.plugins.memory.test_ann import QUERIES, records as synthetic
from tests.support import fresh_pg_dsn

pytestmark = pytest.mark.postgres_only("compares the PostgreSQL store with a SQLite one itself")

NOW = "2026-01-01T00:00:00.000Z"
# words both stemmers agree on (Snowball and Porter part on a few, such as "timeouts")
ASKED = QUERIES[:4] + ["tree-sitter node kinds", "rate limit", "hash tokens", "vacuum",
                       "keep-alive connections per proxy", "fixtures module", "rare"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory, backend):
    """A SQLite store and a PostgreSQL store holding the same 400 records."""
    ops = []
    for i, fields in enumerate(synthetic(400, seed=5)):
        rec = records.build(MemoryIn(**fields).model_dump(), root=None, now=NOW, head="",
                            errors=[])
        ops.append(("create", rec, records.content_sha(rec), {}, "test"))
    lite = MemoryStore(Database(tmp_path_factory.mktemp("kw") / "memory.db", MIGRATIONS))
    pg = PgBackend(fresh_pg_dsn(), 2)
    pgstore = PgMemoryStore(pg.database("memory", PG_MIGRATIONS), "kw")
    for store in (lite, pgstore):
        store.apply_batch(ops, NOW)
    yield lite, pgstore
    lite.db.close()
    pg.close()


@pytest.mark.parametrize("postings", [10_000, 100])  # whole; bounded from 200 records
@pytest.mark.parametrize("query", ASKED)
def test_keyword_hits_and_scores_equal_sqlites(stores, query, postings):
    searcher = Searcher(MemorySettings(keyword_postings=postings), kernel=None)
    lite, pg = (searcher.keyword(store, query, {"status": "ACTIVE"}, "2026-01-01", 20,
                                 full=False) for store in stores)
    assert lite, query
    assert [s for _, s in pg] == pytest.approx([s for _, s in lite], rel=1e-6)
    assert above_the_last(pg) == above_the_last(lite)


def above_the_last(hits) -> set[str]:
    """The hits scored above the last one: the records are templates, so many tie, and the
    engines order ties apart (FTS5 by row, the PostgreSQL store by id)."""
    return {rec["id"] for rec, s in hits if s > hits[-1][1] * (1 + 1e-6)}


def test_a_phrase_matches_the_records_holding_it(stores):
    """``created_at`` is a phrase to both engines (matched from the tsvectors here, not the
    postings); its bm25 counts the phrase's tokens as terms on PostgreSQL, so the hits, not
    the scores, are compared."""
    searcher = Searcher(MemorySettings(), kernel=None)
    lite, pg = (searcher.keyword(store, "created_at", {"status": "ALL"}, "2026-01-01", 400)
                for store in stores)
    assert lite and {r["id"] for r, _ in pg} == {r["id"] for r, _ in lite}
    assert all("created_at" in r["title"] + r["rationale"] for r, _ in pg)


@pytest.mark.parametrize("title", ["Retry the HTTP client (3)", "Hash the API tokens"])
def test_duplicate_hints_equal_sqlites(stores, title):
    searcher = Searcher(MemorySettings(), kernel=None)
    lite, pg = (searcher.similar_titles(store, title, {"status": "ACTIVE"}, "2026-01-01", 5,
                                        exclude="none") for store in stores)
    assert lite and sorted(s for _, s in pg) == sorted(s for _, s in lite)
