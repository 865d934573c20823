"""Recalls, recorded in batches: each search adds its hits here, and a thread writes what
gathered at most every ``FLUSH_S`` — one transaction per project instead of a write per
search, off the request's path. A record's refreshed strength shows within a second or so."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from neuralmind import log_failure

log = logging.getLogger("neuralmind.memory")
FLUSH_S = 0.5


class Recalls:
    def __init__(self, flush_s: float = FLUSH_S):
        self.flush_s = flush_s
        self._pending: dict[str, tuple[Any, Counter, str]] = {}  # path → (store, ids, last at)
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def add(self, store, ids: list[str], at: str) -> None:
        with self._cond:
            key = str(store.db.path)
            _, counts, _ = self._pending.get(key, (store, Counter(), at))
            counts.update(ids)
            self._pending[key] = (store, counts, at)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memory-recalls",
                                                daemon=True)
                self._thread.start()

    def flush(self) -> None:
        """Write every gathered recall now."""
        with self._cond:
            pending, self._pending = self._pending, {}
        for found in pending.values():
            self._write(*found)

    def forget(self, key: str) -> None:
        """Let go of the store ``key`` names (its project was removed), its recalls written
        first — unless its file was deleted or replaced: they have nowhere to go."""
        with self._cond:
            found = self._pending.pop(key, None)
        if found is None:
            return
        replaced = getattr(found[0].db, "replaced", None)  # a SQLite file's; PostgreSQL stays
        if replaced is None or not replaced():
            self._write(*found)

    @staticmethod
    def _write(store, counts: Counter, at: str) -> None:
        try:
            store.touch(counts, at)
        except Exception as ex:  # a closed, vanished or full store: the recalls are lost
            log_failure(log, f"recording recalls for {store.db.path}", ex)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self.flush()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._cond.wait(timeout=self.flush_s)
            self.flush()
