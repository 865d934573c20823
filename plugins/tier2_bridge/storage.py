"""A SQLite file opened on first use, so a broken file costs its feature, never the server."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

RETRY_OPEN_S = 5.0  # after a failed open, callers fail fast for this long before trying again


class StoreUnavailable(Exception):
    """The file cannot be opened, migrated or read (corrupt, unreadable, locked too long)."""


class LazyDatabase:
    """``kernel.open_database(path, migrations)``, deferred until first use and retried."""

    def __init__(self, path: Path, migrations, open_database):
        self.path = Path(path)
        self._migrations = migrations
        self._open_database = open_database
        self._db = None
        self._failed_at = float("-inf")
        self._lock = threading.Lock()

    def get(self):
        if self._db is None:
            with self._lock:
                if self._db is None:
                    if time.monotonic() - self._failed_at < RETRY_OPEN_S:
                        raise StoreUnavailable(f"{self.path} failed to open moments ago")
                    try:
                        self._db = self._open_database(self.path, self._migrations)
                    except (sqlite3.Error, OSError) as ex:
                        self._failed_at = time.monotonic()
                        raise StoreUnavailable(f"cannot open {self.path}: {ex}") from ex
        return self._db

    def reconnect(self) -> None:
        """Drop this thread's connection: the file may have been replaced or repaired."""
        if self._db is not None:
            self._db.close()
