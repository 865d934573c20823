"""MCP sessions (``Mcp-Session-Id``): opened by ``initialize``, ended by ``DELETE /v1/mcp``.

They live in SQLite, so any gunicorn worker answers a session's requests and a restarted
daemon still knows them. A session belongs to the actor that opened it: another token
naming it gets the same 404 as an unknown id. It records the negotiated protocol version,
so a request that omits ``MCP-Protocol-Version`` is still answered in that version."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    actor TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    client TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    seen_at REAL NOT NULL,
    ended_at REAL
);
"""]

SEEN_EVERY_S = 3600.0          # how stale seen_at may get before a request refreshes it
IDLE_S = 30 * 24 * 3600.0      # sessions unused this long are forgotten at start-up


@dataclass(frozen=True)
class Session:
    id: str
    protocol_version: str


class Sessions:
    def __init__(self, db):
        self.db = db

    def open(self, actor: str, protocol_version: str, client: dict) -> str:
        sid = secrets.token_urlsafe(24)
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO sessions (id, actor, protocol_version, client, created_at, "
                         "seen_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (sid, actor, protocol_version, json.dumps(client), now, now))
        return sid

    def find(self, sid: str, actor: str) -> Session | None:
        """The actor's live session ``sid``, or None."""
        row = self.db.conn.execute(
            "SELECT protocol_version, seen_at FROM sessions WHERE id = ? AND actor = ? AND "
            "ended_at IS NULL", (sid, actor)).fetchone()
        if row is None:
            return None
        now = time.time()
        if now - row["seen_at"] > SEEN_EVERY_S:
            with self.db.transaction() as conn:
                conn.execute("UPDATE sessions SET seen_at = ? WHERE id = ?", (now, sid))
        return Session(sid, row["protocol_version"])

    def end(self, sid: str, actor: str) -> bool:
        with self.db.transaction() as conn:
            ended = conn.execute("UPDATE sessions SET ended_at = ? WHERE id = ? AND actor = ? "
                                 "AND ended_at IS NULL", (time.time(), sid, actor)).rowcount
        return bool(ended)

    def prune(self) -> int:
        """Forget ended sessions and those idle for ``IDLE_S``."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM sessions WHERE ended_at IS NOT NULL OR seen_at < ?",
                                (time.time() - IDLE_S,)).rowcount
