"""The store without FTS5 (a SQLite built without it): keyword search falls back to LIKE,
ranked by how many query words a record contains. Real SQLite file, no server needed."""

from __future__ import annotations

import pytest

from kernel.clock import today
from kernel.storage import Database
from plugins.memory import records
from plugins.memory.models import MemorySettings
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore

pytestmark = pytest.mark.sqlite_only("a SQLite built without FTS5, and SQLite's schema steps")


def test_like_fallback_ranks_by_matched_words(tmp_path):
    db = Database(tmp_path / "memory.db", MIGRATIONS)
    for name in ("memories_fts_insert", "memories_fts_delete", "memories_fts_update"):
        db.conn.execute(f"DROP TRIGGER {name}")
    db.conn.execute("DROP TABLE memories_fts")
    store = MemoryStore(db)
    assert store.fts is False
    now = "2026-01-01T00:00:00.000Z"
    for mid, title in [("a", "cache the parser output"), ("b", "cache everything"),
                       ("c", "unrelated decision")]:
        rec = records.build({"id": mid, "title": title, "rationale": "why"}, root=tmp_path,
                            now=now, head="", errors=[])
        assert store.create(rec, records.content_sha(rec), "t")
    searcher = Searcher(MemorySettings(), kernel=None)
    hits = searcher.keyword(store, "cache parser", {"status": "ALL"}, today(), 10)
    assert [(r["id"], s) for r, s in hits] == [("a", 2.0), ("b", 1.0)]
    assert searcher.keyword(store, "nothing here", {"status": "ALL"}, today(), 10) == []


def test_a_store_of_the_first_schema_migrates_in_place(tmp_path):
    """Schema step 3 on a file written before it: records keep everything, read as decisions
    of the decision kind's default importance, and the new tables work."""
    path = tmp_path / "memory.db"
    old = Database(path, MIGRATIONS[:2])
    old.conn.execute(
        "INSERT INTO memories (id, title, rationale, decision_type, confidence, status, created_at,"
        " updated_at, content_sha, tags) VALUES ('m1', 'Use WAL', 'why', 'CONFIG', 0.7, 'ACTIVE', "
        "'2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z', 'x', '[\"db\"]')")
    old.close()
    store = MemoryStore(Database(path, MIGRATIONS))
    rec = store.get("m1")
    assert (rec["kind"], rec["importance"], rec["pinned"], rec["access_count"]) == (
        "decision", 0.8, False, 0)
    assert (rec["title"], rec["decision_type"], rec["confidence"], rec["tags"]) == (
        "Use WAL", "CONFIG", 0.7, ["db"])
    assert store.config("decay") is None and store.links(["m1"]) == []
    assert store.sweep_due(1000.0, 10.0) is False and store.sweep_due(1011.0, 10.0) is True
