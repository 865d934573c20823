"""The memory component's PostgreSQL steps run again on a database that has them: an older
release (one that knew the first steps only), started on a database this release migrated,
wrote back the version it knew. Migrating again then leaves the schema and the derived rows
(the lexicon's counts, the postings, bm25's totals) as they were, and the store goes on."""

from __future__ import annotations

import pytest

from kernel.pg import PgBackend
from plugins.memory import records
from plugins.memory.models import MemorySettings
from plugins.memory.pgstore import PG_MIGRATIONS, PgMemoryStore
from plugins.memory.search import Searcher
from tests.plugins.memory.test_ann import records as synthetic
from tests.plugins.memory.test_pg_counts import (NOW, creates, lexicon, older, postings,
                                                 postings_truth, totals, truth)
from tests.support import fresh_pg_dsn

pytestmark = pytest.mark.postgres_only("the PostgreSQL store's schema steps")

PROJECTS = ("alpha", "beta")

# this install's schema (the DSN's search path names it first), as pg_catalog describes it
SCHEMA = {
    "columns": "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, "
               "column_default, collation_name, generation_expression "
               "FROM information_schema.columns WHERE table_schema = current_schema() "
               "ORDER BY 1, 3",
    "relations": "SELECT c.relname, c.relkind FROM pg_class c "
                 "WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
               "ORDER BY 1",
    "constraints": "SELECT r.relname, c.conname, pg_get_constraintdef(c.oid) "
                   "FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid "
                   "WHERE c.connamespace = current_schema()::regnamespace ORDER BY 1, 2",
    "triggers": "SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled "
                "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal "
                "ORDER BY 1, 2",
    "functions": "SELECT p.proname, pg_get_function_identity_arguments(p.oid), "
                 "pg_get_functiondef(p.oid) FROM pg_proc p "
                 "WHERE p.pronamespace = current_schema()::regnamespace ORDER BY 1, 2",
    "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema() "
             "ORDER BY 1",
}

# what the steps derive from the records, every project's
DERIVED = {
    "lexemes": "SELECT project_id, lexeme, records FROM all_memory_lexemes ORDER BY 1, 2",
    "postings": "SELECT project_id, lexeme, memory_id, tf, title_tf, words "
                "FROM all_memory_postings ORDER BY 1, 2, 3",
    "meta": "SELECT project_id, key, value FROM all_memory_meta ORDER BY 1, 2",
    "memories": "SELECT project_id, id, words, fts::text FROM all_memories ORDER BY 1, 2",
}


def snapshot(db, queries: dict[str, str]) -> dict[str, list[tuple]]:
    """Each query's rows, this install's schema name taken out of the definitions."""
    prefix = db.conn.execute("SELECT current_schema()").fetchone()[0] + "."
    return {name: [tuple(v.replace(prefix, "") if isinstance(v, str) else v for v in r)
                   for r in db.conn.execute(sql)] for name, sql in queries.items()}


def version(db) -> int:
    return db.conn.execute("SELECT version FROM nm_schema WHERE component = 'memory'"
                           ).fetchone()[0]


def consistent(store) -> None:
    """The derived rows are what the project's records hold."""
    assert lexicon(store) == truth(store)
    assert postings(store) == postings_truth(store)
    count, words = store.db.conn.execute("SELECT COUNT(*), COALESCE(SUM(words), 0) "
                                         "FROM memories").fetchone()
    assert totals(store) == (count, words)


@pytest.fixture()
def pg(backend):
    pg = PgBackend(fresh_pg_dsn(), 2)
    yield pg
    pg.close()


@pytest.fixture()
def stored(pg):
    """A database migrated by this release, two projects written (records created, edited,
    deleted: a lexeme no record holds any more stays at 0), one project's HNSW index built."""
    shared = pg.database("memory", PG_MIGRATIONS)
    stores = {p: PgMemoryStore(shared, p) for p in PROJECTS}
    for seed, store in enumerate(stores.values(), start=21):
        ops = creates(synthetic(30, seed=seed))
        store.apply_batch(ops, NOW)
        for _, rec, _, _, _ in ops[:3]:
            edited = {**rec, "title": "Vacuum the quantum annealer", "rationale": "Annealing."}
            assert store.update(edited, records.content_sha(edited), kind="updated",
                                actor="test", changes={"title": [rec["title"], edited["title"]]})
        store.apply_batch([("delete", rec, None, {}, "test") for _, rec, _, _, _ in ops[3:6]],
                          NOW)
    assert stores["alpha"].build_nearest(MemorySettings())
    for store in stores.values():
        consistent(store)
    return shared, stores


@pytest.mark.parametrize("known", [5, 4, 3, 2, 1])
def test_migrating_again_after_an_older_release_changes_nothing(stored, pg, known):
    shared, _ = stored
    schema, derived = snapshot(shared, SCHEMA), snapshot(shared, DERIVED)
    assert any(name.startswith("all_memory_vectors_hnsw_") for name, _ in schema["indexes"])
    assert any(count == 0 for _, _, count in derived["lexemes"])
    with shared.transaction() as conn:  # what an older release that knew `known` steps wrote
        conn.execute("UPDATE nm_schema SET version = ? WHERE component = 'memory'", (known,))

    again = pg.database("memory", PG_MIGRATIONS)  # a server starting: no error
    assert version(again) == len(PG_MIGRATIONS) == 6
    assert snapshot(again, SCHEMA) == schema
    assert snapshot(again, DERIVED) == derived

    # the store goes on: a search finds what was there, a write is counted once
    searcher = Searcher(MemorySettings(), kernel=None)
    store = PgMemoryStore(again, "alpha")
    hits = searcher.keyword(store, "annealer", {"status": "ALL"}, "2026-01-01", 20,
                            full=False)
    assert len(hits) == lexicon(store)["anneal"] == 3
    new = creates([{"title": "Zeppelin hangar doors", "rationale": "Wind."}])
    store.apply_batch(new, NOW)
    hits = searcher.keyword(store, "zeppelin", {"status": "ALL"}, "2026-01-01", 20,
                            full=False)
    assert [rec["id"] for rec, _ in hits] == [new[0][1]["id"]]
    assert lexicon(store)["zeppelin"] == 1
    for project in PROJECTS:
        consistent(PgMemoryStore(again, project))
    assert snapshot(again, SCHEMA) == schema


def test_a_fresh_database_and_an_upgraded_one_have_one_schema(pg):
    """Each step's effect on a database of an older release: the schema a fresh database gets,
    the derived rows counted from the records already stored."""
    fresh = pg.database("memory", PG_MIGRATIONS)
    schema = snapshot(fresh, SCHEMA)
    other = PgBackend(fresh_pg_dsn(), 2)
    try:
        for known in (1, 2, 3, 4, 5):
            old = other.database("memory", PG_MIGRATIONS[:known])
            older(PgMemoryStore(old, f"p{known}")).apply_batch(
                creates(synthetic(20, seed=known)), NOW)
        upgraded = other.database("memory", PG_MIGRATIONS)
        assert snapshot(upgraded, SCHEMA) == schema
        for known in (1, 2, 3, 4, 5):
            consistent(PgMemoryStore(upgraded, f"p{known}"))
    finally:
        other.close()
