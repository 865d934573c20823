"""The webhooks plugin's state: hooks, their delivery queue and the event cursor — in
``webhooks.db`` in the state home, or in the database several servers share
(``[storage] backend = "postgres"``), behind the same methods.

Every line of SQL the plugin runs is here, written so both engines run it; only the tables'
types differ (:data:`MIGRATIONS` for SQLite, :data:`PG_MIGRATIONS` for PostgreSQL). Times are
epoch seconds from the service's clock. The sender's lease is a kernel lease
(``webhooks.sender``), shared the same way.

The queue is filled in one transaction with the cursor that says how far the kernel's event
log has been read (:meth:`WebhookStore.queue_events`): two workers never queue an event twice,
and a worker that dies mid-way leaves the cursor where its last commit put it, so no event is
skipped. Deliveries leave the queue in ``seq`` order per hook, one at a time. The writes that
read the queue's last ``seq`` are serial (one at a time in every server, as SQLite's writers
always are), so ``seq`` never repeats and a cursor is never read by two servers at once; so is
a rotation, which reads the secrets it keeps signing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS hooks (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    projects TEXT,
    description TEXT NOT NULL DEFAULT '',
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_until REAL,
    enabled INTEGER NOT NULL DEFAULT 1,
    disabled_reason TEXT,
    owner_id TEXT NOT NULL,
    owner_role TEXT NOT NULL,
    owner_kind TEXT NOT NULL,
    owner_projects TEXT,
    after_event INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    failing_since REAL,
    last_success_at REAL,
    secret_rotated_at REAL
);
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    hook_id TEXT NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
    event_id INTEGER,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    seq INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL,
    last_status_code INTEGER,
    last_error TEXT,
    last_latency_ms REAL,
    last_attempt_at REAL,
    created_at REAL NOT NULL,
    delivered_at REAL,
    UNIQUE (hook_id, event_id)
);
CREATE UNIQUE INDEX IF NOT EXISTS deliveries_in_order ON deliveries (seq);
CREATE INDEX IF NOT EXISTS deliveries_queue ON deliveries (hook_id, status, seq);
CREATE INDEX IF NOT EXISTS deliveries_by_hook ON deliveries (hook_id, seq);
CREATE TABLE IF NOT EXISTS webhooks_meta (
    key TEXT PRIMARY KEY,
    value TEXT,
    until REAL
);
INSERT OR IGNORE INTO webhooks_meta (key, value, until) VALUES ('event_cursor', NULL, NULL);
INSERT OR IGNORE INTO webhooks_meta (key, value, until) VALUES ('sender', NULL, 0);
""", "DELETE FROM webhooks_meta WHERE key = 'sender';"]  # the lease is a kernel lease now
# A hook signs with every replaced secret whose grace runs (``previous_secrets``: JSON
# ``[[secret, until], …]``, the latest replaced first; ``previous_secret`` and
# ``previous_until``, which held one, are left empty: SQLite before 3.35 cannot drop a
# column); a hook paused by a person (``paused_at``) keeps queueing, unlike one disabled for
# failing; and a delivery remembers its own first failed try (``first_failed_at``), so a hook
# is disabled for an outage, not for one old failure and one new blip (docs/webhooks.md).
_LIFECYCLE = """
ALTER TABLE hooks ADD COLUMN previous_secrets TEXT;
ALTER TABLE hooks ADD COLUMN paused_at REAL;
ALTER TABLE deliveries ADD COLUMN first_failed_at REAL;
UPDATE hooks SET previous_secrets = {pair}, previous_secret = NULL, previous_until = NULL
    WHERE previous_secret IS NOT NULL AND previous_until IS NOT NULL;
UPDATE hooks SET previous_secret = NULL, previous_until = NULL;
UPDATE hooks SET paused_at = updated_at WHERE enabled = 0 AND disabled_reason LIKE 'disabled by %';
"""
MIGRATIONS.append(_LIFECYCLE.format(
    pair="json_array(json_array(previous_secret, previous_until))"))
# PostgreSQL's tables are SQLite's at their last version, with PostgreSQL's types: 8-byte
# floats for times (its REAL has 4 bytes), 8-byte integers for event ids and seq. Its first
# step is SQLite's first without the row SQLite's second removes; its second, SQLite's third
PG_MIGRATIONS = [MIGRATIONS[0].replace(" REAL", " DOUBLE PRECISION")
                 .replace("event_id INTEGER", "event_id BIGINT").replace("seq INTEGER", "seq BIGINT")
                 .replace("INSERT OR IGNORE", "INSERT")
                 .replace("INSERT INTO webhooks_meta (key, value, until) VALUES ('sender', NULL, 0);\n",
                          ""),
                 _LIFECYCLE.replace(" REAL", " DOUBLE PRECISION").format(
                     pair="CAST(json_build_array(json_build_array(previous_secret, previous_until)) "
                          "AS TEXT)")]
MAX_PREVIOUS = 4  # replaced secrets that may sign at once: five signatures in a header at most

FILE = "webhooks.db"
TABLES = ("hooks", "deliveries", "webhooks_meta")
HOOK_FIELDS = ("url", "events", "projects", "description", "enabled", "disabled_reason",
               "paused_at", "failing_since", "updated_at")  # what change_hook may set
_JSON_FIELDS = ("events", "projects", "owner_projects", "previous_secrets")  # JSON text
_EMPTIED = ("previous_secret", "previous_until")  # columns of an older release, left empty


@dataclass(frozen=True)
class Hook:
    id: str
    url: str
    events: list[str]
    projects: list[str] | None
    description: str
    secret: str
    previous_secrets: list[list]  # [secret, until] of each replaced secret, the latest first
    enabled: bool
    disabled_reason: str | None
    paused_at: float | None  # paused by a person (not disabled for failing): still queueing
    owner_id: str
    owner_role: str
    owner_kind: str
    owner_projects: list[str] | None
    after_event: int
    created_at: float
    updated_at: float
    failing_since: float | None
    last_success_at: float | None
    secret_rotated_at: float | None


def _hook(row: sqlite3.Row) -> Hook:
    data = dict(row)
    for key in _EMPTIED:
        data.pop(key, None)
    for key in _JSON_FIELDS:
        data[key] = None if data[key] is None else json.loads(data[key])
    data["previous_secrets"] = data["previous_secrets"] or []
    data["enabled"] = bool(data["enabled"])
    return Hook(**data)


def in_grace(previous: list[list] | str | None, at: float) -> list[list]:
    """The replaced secrets still signing at ``at`` (``previous_secrets``, as stored or read)."""
    if isinstance(previous, str):
        previous = json.loads(previous)
    return [[secret, until] for secret, until in previous or [] if until is not None
            and until > at]


def _stored(value: Any, key: str) -> Any:
    if key in _JSON_FIELDS:
        return None if value is None else json.dumps(value)
    return int(value) if isinstance(value, bool) else value


@dataclass(frozen=True)
class Queued:
    """A delivery to put in the queue for an event."""

    id: str
    hook_id: str
    event_id: int
    kind: str
    body: str


class WebhookStore:
    def __init__(self, db):
        self.db = db

    # -- hooks ---------------------------------------------------------------------------

    def add_hook(self, hook: Hook) -> None:
        data = {k: _stored(v, k) for k, v in hook.__dict__.items()}
        columns = ", ".join(data)
        with self.db.transaction() as conn:
            conn.execute(f"INSERT INTO hooks ({columns}) VALUES ({', '.join('?' * len(data))})",
                         tuple(data.values()))

    def hook(self, hook_id: str) -> Hook | None:
        row = self.db.conn.execute("SELECT * FROM hooks WHERE id = ?", (hook_id,)).fetchone()
        return _hook(row) if row else None

    def hooks(self) -> list[Hook]:
        """Every hook, oldest first (a server has tens, not thousands)."""
        rows = self.db.conn.execute("SELECT * FROM hooks ORDER BY created_at, id").fetchall()
        return [_hook(r) for r in rows]

    def change_hook(self, hook_id: str, changes: dict[str, Any]) -> Hook | None:
        unknown = set(changes) - set(HOOK_FIELDS)
        if unknown:
            raise ValueError(f"not a field a change may set: {', '.join(sorted(unknown))}")
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self.db.transaction() as conn:
            conn.execute(f"UPDATE hooks SET {sets} WHERE id = ?",
                         (*(_stored(v, k) for k, v in changes.items()), hook_id))
            row = conn.execute("SELECT * FROM hooks WHERE id = ?", (hook_id,)).fetchone()
        return _hook(row) if row else None

    def resume_hook(self, hook_id: str, at: float) -> None:
        """A hook enabled again (paused, or disabled for failing): what it kept pending is due
        now, in its order, and its failure streak — the hook's and its deliveries' — forgotten."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE hooks SET enabled = 1, disabled_reason = NULL, paused_at = NULL, "
                         "failing_since = NULL, updated_at = ? WHERE id = ?", (at, hook_id))
            conn.execute("UPDATE deliveries SET next_at = ?, first_failed_at = NULL "
                         "WHERE hook_id = ? AND status = 'pending'", (at, hook_id))

    def set_secret(self, hook_id: str, secret: str, previous_until: float | None,
                   at: float) -> list[float] | None:
        """A new secret. With ``previous_until``, the one it replaces keeps signing until then,
        and every earlier one whose grace runs keeps signing until its own end; without, none
        but the new one signs from now on. Returns None when done, or — refused, nothing
        changed — the ends of the graces that run already, when :data:`MAX_PREVIOUS` replaced
        secrets sign (a gone hook is None too: the caller has just read it). Serial: two
        rotations at once under PostgreSQL's READ COMMITTED both read the same secrets, and
        the later write dropped the earlier's new secret, answered all the same."""
        with self.db.transaction(serial=True) as conn:
            row = conn.execute("SELECT secret, previous_secrets FROM hooks WHERE id = ?",
                               (hook_id,)).fetchone()
            if row is None:
                return None
            previous = []
            if previous_until is not None:
                previous = in_grace(row["previous_secrets"], at)
                if len(previous) >= MAX_PREVIOUS:
                    return sorted(until for _, until in previous)
                previous = [[row["secret"], previous_until], *previous]  # latest first
            conn.execute("UPDATE hooks SET previous_secrets = ?, secret = ?, "
                         "secret_rotated_at = ?, updated_at = ? WHERE id = ?",
                         (json.dumps(previous), secret, at, at, hook_id))
        return None

    def remove_hook(self, hook_id: str) -> bool:
        """Delete a hook and its deliveries — the deliveries first, in the order the sender
        locks them (a delivery, then its hook): the cascade from the hook took the other order
        and deadlocked with the sender on PostgreSQL."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM deliveries WHERE hook_id = ?", (hook_id,))
            return conn.execute("DELETE FROM hooks WHERE id = ?", (hook_id,)).rowcount == 1

    # -- filling the queue -----------------------------------------------------------------

    def cursor(self) -> int:
        """The id of the last kernel event the queue has taken in (0: none yet)."""
        return self._cursor(self.db.conn)

    @staticmethod
    def _cursor(conn) -> int:
        row = conn.execute("SELECT value FROM webhooks_meta WHERE key = 'event_cursor'").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def start_cursor(self, last_event: int) -> int | None:
        """On a new file, start after the events already in the log: hooks never get the past.
        A cursor past a log that holds events was taken in from a newer log (``kernel.db``
        restored from an older backup, whose ids are handed out again): it comes back to the
        log's end, so the events numbered anew are delivered, and the deliveries of the lost
        ids keep their body and history but no event id (a new event's would clash with it).
        Returns the cursor it replaced."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE webhooks_meta SET value = ? WHERE key = 'event_cursor' "
                         "AND value IS NULL", (str(last_event),))
            was = self._cursor(conn)
            if 0 < last_event < was:  # an empty log may be one retention emptied: no sign
                conn.execute("UPDATE webhooks_meta SET value = ? WHERE key = 'event_cursor'",
                             (str(last_event),))
                conn.execute("UPDATE deliveries SET event_id = NULL WHERE event_id > ?",
                             (last_event,))
                return was
        return None

    def queue_events(self, read_after: Callable[[int, int], Sequence[Any]],
                     plan: Callable[[Sequence[Any], list[Hook]], Iterable[Queued]],
                     batch: int, at: float, paused_after: float) -> int:
        """One transaction: read up to ``batch`` events after the cursor (``read_after(cursor,
        limit)``, each with an ``id``), queue what ``plan(events, hooks)`` says for the hooks
        that queue — the enabled ones, and those paused after ``paused_after`` (a hook disabled
        for failing, or paused before then, queues nothing) — and move the cursor past them.
        Returns how many events were taken in."""
        with self.db.transaction(serial=True) as conn:
            events = read_after(self._cursor(conn), batch)
            if not events:
                return 0
            hooks = [_hook(r) for r in conn.execute(
                "SELECT * FROM hooks WHERE enabled = 1 OR paused_at > ?", (paused_after,))]
            rows = list(plan(events, hooks)) if hooks else []
            if rows:
                seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM deliveries").fetchone()[0]
                conn.executemany(
                    "INSERT INTO deliveries (id, hook_id, event_id, kind, body, seq, next_at, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [(q.id, q.hook_id, q.event_id, q.kind, q.body, seq + i, at, at)
                     for i, q in enumerate(rows, start=1)])
            conn.execute("UPDATE webhooks_meta SET value = ? WHERE key = 'event_cursor'",
                         (str(events[-1].id),))
        return len(events)

    # -- sending -----------------------------------------------------------------------------

    def due(self, now: float, busy: Iterable[str] = (), hook_id: str | None = None
            ) -> list[sqlite3.Row]:
        """Each enabled hook's oldest pending delivery (or only ``hook_id``'s), when its time
        has come and the hook has none in flight (``busy``): so each hook receives its events
        in order."""
        one = "AND h.id = ? " if hook_id is not None else ""
        rows = self.db.conn.execute(
            "SELECT d.*, h.url, h.secret, h.previous_secrets "
            "FROM hooks h JOIN deliveries d ON d.id = (SELECT id FROM deliveries "
            "WHERE hook_id = h.id AND status = 'pending' ORDER BY seq LIMIT 1) "
            f"WHERE h.enabled = 1 AND d.next_at <= ? {one}ORDER BY d.seq",
            (now, *([hook_id] if hook_id is not None else []))).fetchall()
        busy = set(busy)
        return [r for r in rows if r["hook_id"] not in busy]

    def delivered(self, delivery_id: str, hook_id: str, code: int, latency_ms: float,
                  at: float) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE deliveries SET status = 'delivered', attempts = attempts + 1, "
                         "last_status_code = ?, last_error = NULL, last_latency_ms = ?, "
                         "last_attempt_at = ?, delivered_at = ?, next_at = NULL "
                         "WHERE id = ? AND status = 'pending'",
                         (code, latency_ms, at, at, delivery_id))
            conn.execute("UPDATE hooks SET failing_since = NULL, last_success_at = ? "
                         "WHERE id = ?", (at, hook_id))

    def try_failed(self, delivery_id: str, hook_id: str, code: int | None, error: str,
                   latency_ms: float | None, at: float, next_at: float | None,
                   disable_if_failing_since: float, reason: str) -> float | None:
        """Record a failed try: due again at ``next_at``, or failed for good when it is None.
        The hook's failure streak, and the delivery's own, start now unless they run already.
        The hook is disabled with ``reason`` when its streak began at or before
        ``disable_if_failing_since`` *and* this delivery has either used its last try or has
        itself failed every try since then: an outage that lasted, never one old failure and
        one new blip (a blip's next try may still succeed and end the streak). Returns the
        hook's streak's start when this call disabled it, else None."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE deliveries SET status = ?, attempts = attempts + 1, "
                         "last_status_code = ?, last_error = ?, last_latency_ms = ?, "
                         "last_attempt_at = ?, next_at = ?, "
                         "first_failed_at = COALESCE(first_failed_at, ?) "
                         "WHERE id = ? AND status = 'pending'",
                         ("pending" if next_at is not None else "failed", code, error,
                          latency_ms, at, next_at, at, delivery_id))
            conn.execute("UPDATE hooks SET failing_since = COALESCE(failing_since, ?) "
                         "WHERE id = ?", (at, hook_id))
            row = conn.execute(
                "SELECT h.failing_since FROM hooks h JOIN deliveries d ON d.hook_id = h.id "
                "WHERE h.id = ? AND d.id = ? AND h.enabled = 1 AND h.failing_since <= ? "
                "AND (d.status = 'failed' OR d.first_failed_at <= ?)",
                (hook_id, delivery_id, disable_if_failing_since, disable_if_failing_since)
            ).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE hooks SET enabled = 0, disabled_reason = ?, updated_at = ? "
                         "WHERE id = ?", (reason, at, hook_id))
        return row[0]

    def record_ping(self, delivery_id: str, hook_id: str, body: str, at: float,
                    code: int | None, error: str | None, latency_ms: float | None) -> None:
        """A test ping, sent at once: recorded finished, never retried, no effect on the hook's
        failure streak."""
        with self.db.transaction(serial=True) as conn:
            seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM deliveries").fetchone()[0]
            conn.execute("INSERT INTO deliveries (id, hook_id, event_id, kind, body, seq, status, "
                         "attempts, last_status_code, last_error, last_latency_ms, "
                         "last_attempt_at, created_at, delivered_at) "
                         "VALUES (?, ?, NULL, 'ping', ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)",
                         (delivery_id, hook_id, body, seq,
                          "failed" if error else "delivered", code, error, latency_ms, at, at,
                          None if error else at))

    # -- reading and re-sending deliveries ---------------------------------------------------

    def delivery(self, hook_id: str, delivery_id: str) -> sqlite3.Row | None:
        return self.db.conn.execute("SELECT * FROM deliveries WHERE id = ? AND hook_id = ?",
                                    (delivery_id, hook_id)).fetchone()

    def deliveries(self, hook_id: str, status: str | None, before_seq: int | None,
                   limit: int) -> list[sqlite3.Row]:
        """A hook's deliveries, newest first."""
        where, args = ["hook_id = ?"], [hook_id]
        if status is not None:
            where.append("status = ?")
            args.append(status)
        if before_seq is not None:
            where.append("seq < ?")
            args.append(before_seq)
        return self.db.conn.execute(
            f"SELECT * FROM deliveries WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT ?",
            (*args, limit)).fetchall()

    def requeue(self, hook_id: str, delivery_id: str, at: float) -> sqlite3.Row | None:
        """Put a finished delivery back at the end of the queue, due now, its tries counted
        afresh (same id, same body). Returns it as it was, or None when there is none; a
        delivery still pending is returned unchanged."""
        with self.db.transaction(serial=True) as conn:
            row = conn.execute("SELECT * FROM deliveries WHERE id = ? AND hook_id = ?",
                               (delivery_id, hook_id)).fetchone()
            if row is None or row["status"] == "pending":
                return row
            conn.execute("UPDATE deliveries SET status = 'pending', attempts = 0, next_at = ?, "
                         "delivered_at = NULL, first_failed_at = NULL, "
                         "seq = (SELECT MAX(seq) + 1 FROM deliveries) "
                         "WHERE id = ?", (at, delivery_id))
        return row

    def prune(self, before: float) -> int:
        """Forget finished deliveries whose last word came before ``before``."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM deliveries WHERE status != 'pending' AND "
                                "COALESCE(last_attempt_at, created_at) < ?", (before,)).rowcount


def storage_component():
    """For ``neuralmind storage``: webhooks.db into the shared tables — hooks, the queue with
    its delivery ids and ``seq`` order, and the cursor over the event log (events keep their
    ids when the kernel's log is copied)."""
    from neuralmind import StorageComponent, StoredFile

    def files(home) -> list:
        return [StoredFile(home.path / FILE, MIGRATIONS)]

    def copy(home, target) -> list:
        from neuralmind import copy_table
        source = home.open(files(home)[0])
        if source is None:
            return []
        try:
            checks = [copy_table(source, target, "hooks", ("id",)),
                      copy_table(source, target, "deliveries", ("id",))]
            if cursor := WebhookStore(source).cursor():
                WebhookStore(target).start_cursor(cursor)
        finally:
            source.close()
        return checks

    return StorageComponent("webhooks", PG_MIGRATIONS, TABLES, files, copy)
