"""Storing vectors: one already stored for the same text, model and shape — by another
process that embedded the same records meanwhile — is not written again. Rewritten, it would
move past the ANN index's watermark (plugins/memory/ann.py), and a restarted worker would
count it as new and build a new generation."""

from __future__ import annotations

import numpy as np

from neuralmind import now_iso
from plugins.memory import records
from plugins.memory.models import MemoryIn

MODEL, DIM = "test@1", 4


def create(store, n: int) -> list[tuple[str, str]]:
    """``n`` records written through the store: their ``(id, content_sha)``."""
    at = now_iso()
    built = [records.build(MemoryIn(title=f"Decision {i}", rationale=f"Because {i}").model_dump(),
                           root=None, now=at, head="", errors=[]) for i in range(n)]
    store.apply_batch([("create", rec, records.content_sha(rec), {}, "test") for rec in built], at)
    return [(rec["id"], records.content_sha(rec)) for rec in built]


def blob(i: int, passages: int = 0) -> bytes:
    return np.full(DIM * (1 + passages), i + 1, np.float32).tobytes()


def stored(store) -> dict[str, tuple[int | None, bytes]]:
    """Each record's vector, with its row where the store keeps an ANN watermark (SQLite)."""
    rows = store.vectors_after(MODEL, 0) if store.LOCAL_ANN else store.vectors(MODEL)
    return {r["memory_id"]: (r["v_rowid"] if store.LOCAL_ANN else None, bytes(r["vector"]))
            for r in rows}


def test_a_vector_already_stored_is_not_written_again(new_store):
    store = new_store("vector-writes")
    made = create(store, 3)
    rows = [(mid, blob(i), sha) for i, (mid, sha) in enumerate(made)]
    assert store.put_vectors(MODEL, DIM, rows) == 3
    first, version = stored(store), store.version()
    assert store.put_vectors(MODEL, DIM, rows) == 0  # a second embedder's same records
    assert stored(store) == first and store.version() == version
    # a longer vector (the record's passages beside its own) replaces the shorter one
    mid, sha = made[0]
    assert store.put_vectors(MODEL, DIM, [(mid, blob(0, passages=2), sha)]) == 1
    after = stored(store)
    assert after[mid][1] == blob(0, passages=2) and store.version() > version
    assert {m: after[m] for m in after if m != mid} == {m: first[m] for m in first if m != mid}
    # another model's vector replaces it too
    assert store.put_vectors("test@2", DIM, [(mid, blob(9), sha)]) == 1
    assert mid not in stored(store)
