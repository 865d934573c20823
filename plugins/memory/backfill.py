"""The background backfill: embeds new and changed records shortly after they are written,
so writes never wait for the model and searches rarely have anything left to embed.

Debounced (a burst of writes becomes one pass), batched, and one per project across gunicorn
workers: a lease row in the project's SQLite, renewed between batches, decides who embeds.
While writes go on it keeps up: a pass starts at the latest ``KEEP_UP`` delays after the first
write it waits for, and embeds at least that long before it yields to them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from neuralmind import APIError, log_failure

log = logging.getLogger("neuralmind.memory")
KEEP_UP = 4  # × backfill_delay_s: the longest wait for a pause, then the least work done
# the longest a shutdown waits for a sweep under way (plugins.memory.sweeps)
STOP_WAIT_S = 5.0
# the longest it waits for the backfill, which ends after the embedding step under way
# (search.EMBED_STEP texts, ~0.5 s): with a sweep's wait, memory's close takes at most 7 s of
# gunicorn's graceful_timeout of 10 s (kernel/serving.py), about 0.5 s when no sweep runs
BACKFILL_WAIT_S = 2.0


class Backfiller:
    def __init__(self, searcher, embedder: Callable[[], Any], settings):
        self.searcher = searcher
        self._embedder = embedder
        self.settings = settings
        self.owner = f"{os.getpid()}-{id(self):x}"
        self._due: dict[str, tuple[Any, float, float]] = {}  # path → (store, due, first write)
        self._last_write: dict[str, float] = {}
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def notify(self, store) -> None:
        """A write happened in ``store``: embed its changes once writes pause, or ``KEEP_UP``
        delays after the first write waiting while they go on."""
        with self._cond:
            self._last_write[str(store.db.path)] = time.monotonic()
            self._schedule(store, self.settings.backfill_delay_s)

    def held(self, store) -> None:
        """A search embedded vectors of ``store`` it could not store (a read writes nothing):
        store them at the next pass — now, or when writes pause if a pass already waits for
        that (a search is no write: it neither stops a pass under way nor hurries one)."""
        with self._cond:
            if str(store.db.path) not in self._due:
                self._schedule(store, 0.0)

    def _schedule(self, store, delay: float, again: bool = False) -> None:
        """Run a pass on ``store`` ``delay`` from now — no later than ``KEEP_UP`` delays after
        the first write waiting (``again``: from now on, a pass yielding to writes)."""
        with self._cond:
            key, now = str(store.db.path), time.monotonic()
            idle = not self._due
            since = now if again else self._due.get(key, (None, None, now))[2]
            latest = since + KEEP_UP * self.settings.backfill_delay_s
            self._due[key] = (store, min(now + delay, latest), since)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memory-backfill",
                                                daemon=True)
                self._thread.start()
            elif idle:
                # Only wake a thread that waits for nothing: waking it on every write hands it
                # the GIL each time (a 5 ms switch interval per create); a thread already
                # waiting for a due time finds the later time when it wakes and sleeps again.
                self._cond.notify()

    def forget(self, key: str) -> None:
        """Let go of the store ``key`` names (its project was removed)."""
        with self._cond:
            self._due.pop(key, None)
            self._last_write.pop(key, None)

    def stop(self) -> None:
        """No pass starts from now; the one under way stores what it embedded and ends after
        its embedding step, which is waited for (``BACKFILL_WAIT_S`` at most): the kernel
        closes the stores once its plugins have stopped, and vectors written after that, or
        a lease released, met a closed store."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(BACKFILL_WAIT_S)

    def _next(self) -> Any | None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                ready = [k for k, (_, at, _) in self._due.items() if at <= now]
                if ready:
                    return self._due.pop(ready[0])[0]
                wait = min((at for _, at, _ in self._due.values()), default=now + 3600) - now
                self._cond.wait(timeout=max(wait, 0.01))
            return None

    def _run(self) -> None:
        while (store := self._next()) is not None:
            try:
                if self.run_once(store) is None:  # another worker is embedding: look again later
                    self.notify(store)
            except APIError as ex:  # no model: semantic search says so when asked
                log.debug("memory backfill skipped: %s", ex.message)
            except Exception as ex:
                if self._stopped:  # a step past BACKFILL_WAIT_S met its store closed: the end
                    log.info("memory backfill for %s stopped by the shutdown: %s",
                             store.db.path, ex)
                else:
                    log_failure(log, f"memory backfill for {store.db.path}", ex)
            del store  # not held while waiting: a removed project's store closes its files

    def run_once(self, store) -> int | None:
        """Embed what ``store`` is missing; None when another process holds the lease."""
        lease = self.settings.backfill_lease_s
        if not store.lease("backfill", self.owner, time.time(), lease):
            return None
        key, delay, started = str(store.db.path), self.settings.backfill_delay_s, time.monotonic()

        def stop() -> bool:
            if self._stopped:
                return True
            now = time.monotonic()
            if now - self._last_write.get(key, 0.0) < delay and now - started >= KEEP_UP * delay:
                self._schedule(store, delay, again=True)  # writes go on: yield, back soon
                return True
            return not store.lease("backfill", self.owner, time.time(), lease)

        try:
            return self.searcher.fill(store, self._embedder(), stop=stop,
                                      halt=lambda: self._stopped)
        finally:
            store.release("backfill", self.owner)
