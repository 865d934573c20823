"""The store without FTS5 (a SQLite built without it): keyword search falls back to LIKE,
ranked by how many query words a record contains. Real SQLite file, no server needed."""

from __future__ import annotations

from kernel.clock import today
from kernel.storage import Database
from plugins.memory import records
from plugins.memory.models import MemorySettings
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore


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
