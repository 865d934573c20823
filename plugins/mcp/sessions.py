"""MCP sessions (``Mcp-Session-Id``): opened by ``initialize``, ended by ``DELETE /v1/mcp``.

They live in a database, never in a worker's memory: in ``mcp.db`` in the state home, or with
``[storage] backend = "postgres"`` in the database every server shares (table ``mcp_sessions``),
so any gunicorn worker — and any server on that database — answers a session's requests, and a
restarted daemon still knows them. The same SQL runs on both engines; only the table's name and
types differ (:data:`MIGRATIONS`, :data:`PG_MIGRATIONS`). A session belongs to the credential
that opened it (the token, by its id; the actor itself for a caller without one, the loopback
token): another token naming it, even one of the same actor, gets the same 404 as an unknown
id. It records the negotiated protocol version, so a request that omits
``MCP-Protocol-Version`` is still answered in that version.

What a caller can make the store hold is bounded: the client's description is cut to a few
short fields (:func:`client_info`), an actor holds at most ``MAX_LIVE`` live sessions (opening
one more forgets its least recently used), and a session idle for ``IDLE_S`` is gone — refused
at once, and its row deleted by the next prune, which runs at start-up and then at most every
``PRUNE_EVERY_S`` as sessions are opened and used."""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

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
""", """
ALTER TABLE sessions ADD COLUMN credential TEXT;
UPDATE sessions SET credential = actor;
CREATE INDEX IF NOT EXISTS sessions_live ON sessions (actor, seen_at) WHERE ended_at IS NULL;
"""]
# step 2: sessions are the credential's, not the actor's. A session opened before it keeps
# working for a caller whose credential is the actor itself (the loopback token); one opened
# with a team server's token is not found any more, and its client initializes again.

# PostgreSQL's table is SQLite's at its last version, named for the plugin in the database every
# plugin shares (auth_tokens, webhooks_meta …), with 8-byte floats for times: PostgreSQL's REAL
# has 4 bytes, which round today's epoch seconds to two minutes
PG_TABLE = "mcp_sessions"
PG_MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS mcp_sessions (
    id TEXT PRIMARY KEY,
    actor TEXT NOT NULL,
    credential TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    client TEXT NOT NULL DEFAULT '{}',
    created_at DOUBLE PRECISION NOT NULL,
    seen_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS mcp_sessions_live ON mcp_sessions (actor, seen_at)
    WHERE ended_at IS NULL;
"""]

SEEN_EVERY_S = 300.0           # how stale seen_at may get before a request refreshes it
IDLE_S = 30 * 24 * 3600.0      # a session unused this long is expired
PRUNE_EVERY_S = 300.0          # how often (at most) a worker deletes ended and expired sessions
MAX_LIVE = 100                 # live sessions an actor holds; one more forgets the least used
CLIENT_FIELDS = ("name", "title", "version")  # what is kept of the client's clientInfo
CLIENT_FIELD_MAX = 200         # characters kept of each


def client_info(info: dict[str, Any]) -> dict[str, str]:
    """What is stored of an ``initialize``'s ``clientInfo``: its name, title and version, each
    cut to ``CLIENT_FIELD_MAX`` characters; the rest (description, website, icons) is not kept.
    Cut rather than refused: the record only describes the client, nothing is decided by it,
    and MCP sets no length a conforming client would know to keep under."""
    return {k: v[:CLIENT_FIELD_MAX] for k in CLIENT_FIELDS
            if isinstance(v := info.get(k), str)}


def credential(actor) -> str:
    """What a session is bound to: the token that authenticated ``actor`` (its id), or the
    actor itself when it came with none (the loopback token, other kinds of actor)."""
    token_id = (actor.extra or {}).get("token_id")
    return f"{actor.id}/token:{token_id}" if token_id else actor.id


@dataclass(frozen=True)
class Session:
    id: str
    protocol_version: str


class Sessions:
    """The sessions in ``db``'s ``table``: a SQLite :class:`~kernel.storage.Database`
    (``sessions`` in mcp.db) or the shared :class:`~kernel.pg.PgDatabase` (:data:`PG_TABLE`)."""

    def __init__(self, db, table: str = "sessions"):
        self.db = db
        self.table = table
        self.next_prune = 0.0  # time.time() after which the next open or find prunes
        self._prune_lock = threading.Lock()

    def open(self, actor, protocol_version: str, client: dict) -> str:
        """A new session of ``actor``'s credential; the actor's least recently used ones past
        ``MAX_LIVE`` are forgotten, never the new one (another server's clock may be ahead,
        its sessions seen "later"). Opens go one at a time, in every server on a shared
        database too, so two at once never leave the actor past the bound."""
        self._prune_due()
        sid = secrets.token_urlsafe(24)
        now = time.time()
        with self.db.transaction(serial=True) as conn:
            conn.execute(f"INSERT INTO {self.table} (id, actor, credential, protocol_version, "
                         "client, created_at, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (sid, actor.id, credential(actor), protocol_version,
                          json.dumps(client_info(client)), now, now))
            conn.execute(
                f"DELETE FROM {self.table} WHERE actor = :actor AND ended_at IS NULL "
                f"AND id <> :sid AND id NOT IN (SELECT id FROM {self.table} WHERE actor = :actor "
                "AND ended_at IS NULL AND id <> :sid "
                "ORDER BY seen_at DESC, created_at DESC, id DESC LIMIT :others)",
                {"actor": actor.id, "sid": sid, "others": MAX_LIVE - 1})
        return sid

    def find(self, sid: str, actor) -> Session | None:
        """The live session ``sid`` of ``actor``'s credential, or None (unknown, ended,
        expired, or another credential's)."""
        self._prune_due()
        now = time.time()
        row = self.db.conn.execute(
            f"SELECT protocol_version, seen_at FROM {self.table} WHERE id = ? AND actor = ? AND "
            "credential = ? AND ended_at IS NULL AND seen_at >= ?",
            (sid, actor.id, credential(actor), now - IDLE_S)).fetchone()
        if row is None:
            return None
        if now - row["seen_at"] > SEEN_EVERY_S:
            with self.db.transaction() as conn:
                conn.execute(f"UPDATE {self.table} SET seen_at = ? WHERE id = ?", (now, sid))
        return Session(sid, row["protocol_version"])

    def end(self, sid: str, actor) -> bool:
        with self.db.transaction() as conn:
            ended = conn.execute(f"UPDATE {self.table} SET ended_at = ? WHERE id = ? "
                                 "AND actor = ? AND credential = ? AND ended_at IS NULL",
                                 (time.time(), sid, actor.id, credential(actor))).rowcount
        return bool(ended)

    def prune(self) -> int:
        """Forget ended sessions and those idle for ``IDLE_S``."""
        now = time.time()
        self.next_prune = now + PRUNE_EVERY_S
        with self.db.transaction() as conn:
            return conn.execute(f"DELETE FROM {self.table} WHERE ended_at IS NOT NULL "
                                "OR seen_at < ?", (now - IDLE_S,)).rowcount

    def _prune_due(self) -> None:
        """Prune when ``PRUNE_EVERY_S`` has passed since this worker last did; one thread
        does it while the others carry on."""
        if time.time() < self.next_prune or not self._prune_lock.acquire(blocking=False):
            return
        try:
            if time.time() >= self.next_prune:
                self.prune()
        finally:
            self._prune_lock.release()


def storage_component():
    """For ``neuralmind storage``: mcp.db is checked (its version, against this release's) but
    not copied — a session is a client's handshake, and a client whose session is not found
    initializes again."""
    from neuralmind import StorageComponent, StoredFile
    return StorageComponent("mcp", PG_MIGRATIONS, (PG_TABLE,),
                            lambda home: [StoredFile(home.path / "mcp.db", MIGRATIONS)],
                            lambda home, target: [])
