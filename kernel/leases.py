"""Named leases in the kernel's database: one holder at a time among every worker — and, on
PostgreSQL, every server — for work that must not run twice at once (a project's build, its
watcher, a queue's sender). A holder keeps its lease by heartbeat; a lease whose heartbeat is
older than its ttl, or whose holder was a process on this host that has died, is taken over."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

from kernel.daemon import pid_alive

HOST = socket.gethostname()

SQLITE_MIGRATION = """
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    job_id TEXT,
    heartbeat REAL NOT NULL,
    state TEXT NOT NULL DEFAULT '{}',
    stop_requested INTEGER NOT NULL DEFAULT 0
);
"""
PG_MIGRATION = SQLITE_MIGRATION.replace("heartbeat REAL", "heartbeat DOUBLE PRECISION")


class Leases:
    def __init__(self, db):
        self.db = db

    def acquire(self, name: str, owner: str, ttl_s: float, job_id: str | None = None):
        """Take lease ``name`` for ``owner``: None when taken, else the live holder's row."""
        holder = self.get(name)
        if holder is not None and holder["owner"] != owner and self._alive(holder, ttl_s):
            return holder
        now = time.time()
        with self.db.transaction() as conn:
            # the takeover is conditional on what we saw, so two takers never both win
            taken = conn.execute(
                "INSERT INTO leases (name, owner, host, pid, job_id, heartbeat) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, "
                "host = excluded.host, pid = excluded.pid, job_id = excluded.job_id, "
                "heartbeat = excluded.heartbeat, state = '{}', stop_requested = 0 "
                "WHERE leases.owner = ? RETURNING owner",
                (name, owner, HOST, os.getpid(), job_id, now,
                 holder["owner"] if holder else owner)).fetchone()
        return None if taken is not None else self.get(name)

    def _alive(self, row, ttl_s: float) -> bool:
        if time.time() - row["heartbeat"] >= ttl_s:
            return False
        return row["host"] != HOST or pid_alive(row["pid"])

    def heartbeat(self, name: str, owner: str, state: dict[str, Any] | None = None) -> bool:
        """Refresh the lease (and its ``state``); False when it is no longer ours."""
        sets, args = "heartbeat = ?", [time.time()]
        if state is not None:
            sets, args = sets + ", state = ?", args + [json.dumps(state)]
        with self.db.transaction() as conn:
            return conn.execute(f"UPDATE leases SET {sets} WHERE name = ? AND owner = ?",
                                (*args, name, owner)).rowcount > 0

    def get(self, name: str):
        return self.db.conn.execute("SELECT * FROM leases WHERE name = ?", (name,)).fetchone()

    def holder(self, name: str, ttl_s: float):
        """The live holder's row, or None."""
        row = self.get(name)
        return row if row is not None and self._alive(row, ttl_s) else None

    def request_stop(self, name: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("UPDATE leases SET stop_requested = 1 WHERE name = ?",
                                (name,)).rowcount > 0

    def release(self, name: str, owner: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))
