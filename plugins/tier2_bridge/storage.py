"""A database opened on first use, so a broken file (or an unreachable shared database) costs
its feature, never the server."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from neuralmind import database_errors

log = logging.getLogger("neuralmind.tier2")

RETRY_OPEN_S = 5.0  # after a failed open, callers fail fast for this long before trying again


class StoreUnavailable(Exception):
    """The database cannot be opened, migrated or read (corrupt, unreadable, locked too long,
    unreachable)."""


class LazyDatabase:
    """``open()`` — a SQLite file or the shared database — deferred until first use and
    retried; ``where`` names it in messages. A file removed or replaced under the server
    (``replaced()``, which the kernel's databases answer) is noticed and opened again: its
    connections would otherwise go on writing into the removed file, which nobody reads."""

    def __init__(self, where: str, open: Callable[[], object]):
        self.path = where
        self._open = open
        self._db = None
        self._failed_at = float("-inf")
        self._lock = threading.Lock()

    def get(self):
        if self._db is not None and self._db.replaced():
            with self._lock:
                if self._db is not None and self._db.replaced():
                    log.error("%s was removed or replaced while the server ran; opening it again",
                              self.path)
                    self._db.close()
                    self._db = None
        if self._db is None:
            with self._lock:
                if self._db is None:
                    if time.monotonic() - self._failed_at < RETRY_OPEN_S:
                        raise StoreUnavailable(f"{self.path} failed to open moments ago")
                    try:
                        self._db = self._open()
                    except (*database_errors(), OSError) as ex:
                        self._failed_at = time.monotonic()
                        raise StoreUnavailable(f"cannot open {self.path}: {ex}") from ex
        return self._db

    def reconnect(self) -> None:
        """Drop this thread's connection: the file may have been replaced or repaired."""
        if self._db is not None:
            self._db.close()
