"""SQLite for every store: WAL, a busy timeout, foreign keys, migrations by schema version.

A store opens one connection per thread; writers take ``BEGIN IMMEDIATE`` so two gunicorn
workers queue on the busy timeout instead of failing with "database is locked".
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_MS = 10_000

Migration = str | Callable[[sqlite3.Connection], None]


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection in autocommit mode with the project's pragmas applied."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    _use_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (it stays so). The switch needs the file to itself and does not
    wait on the busy timeout, so processes opening a new file together retry it here."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as ex:
            if "locked" not in str(ex) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> int:
    """Bring the database to ``len(migrations)``; step *n* runs when ``user_version`` < n.

    Each step runs in its own transaction with the version bump, so a crash leaves the
    database at a whole version and running this again is harmless.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    for number, step in enumerate(migrations, start=1):
        if number <= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # re-read: another process may have migrated while we waited for the lock
            if conn.execute("PRAGMA user_version").fetchone()[0] >= number:
                conn.execute("COMMIT")
                continue
            if callable(step):
                step(conn)
            else:
                for statement in _statements(step):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(migrations)


def _statements(script: str) -> Iterator[str]:
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                yield buf.strip()
            buf = ""
    if buf.strip():
        yield buf.strip()


class Database:
    """A SQLite file with its migrations, handing each thread its own connection."""

    def __init__(self, path: str | Path, migrations: Sequence[Migration] = ()):
        self.path = Path(path)
        self._local = threading.local()
        self._migrations = migrations
        migrate(self.conn, migrations)

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self.path)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed on exit, rolled back on error."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
