"""The append-only event log, the ``track_event`` fan-out, and the SSE stream of ``/v1/events``.

Events live in the kernel's SQLite, so a stream served by one gunicorn worker sees writes
made by another; the stream polls the table rather than an in-process queue.
"""

from __future__ import annotations

import difflib
import getpass
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kernel.clock import now_iso
from kernel.errors import log_failure, storage_failure

log = logging.getLogger("neuralmind.events")

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    project_id TEXT,
    actor TEXT,
    request_id TEXT,
    data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_by_project ON events (project_id, id);
"""]
PG_MIGRATION = MIGRATIONS[0].replace("id INTEGER PRIMARY KEY AUTOINCREMENT", "id BIGSERIAL PRIMARY KEY")

POLL_S = 0.25


@dataclass(frozen=True)
class Event:
    id: int
    at: str
    kind: str
    project_id: str | None
    actor: str | None
    request_id: str | None
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "at": self.at, "kind": self.kind, "project_id": self.project_id,
                "actor": self.actor, "request_id": self.request_id, "data": self.data}


@dataclass(frozen=True)
class EventKind:
    """An event kind a plugin emits (``register_event_kinds``), with what it means. A webhook
    or a stream whose pattern matches no declared kind is refused: a typo would otherwise wait
    for events that never come."""

    name: str
    description: str


KERNEL_EVENT_KINDS = (
    EventKind("project.registered", "a project was registered"),
    EventKind("project.removed", "a project was unregistered (its state removed or kept)"),
)


def unknown_patterns(patterns: Iterable[str], kinds: Iterable[str]) -> list[str]:
    """Each of ``patterns`` that matches none of ``kinds``, with the nearest kind when a
    typo is likely: ``["memory.craeted (did you mean memory.created?)"]``."""
    kinds = sorted(kinds)
    wrong = []
    for pattern in dict.fromkeys(patterns):
        if not any(map(kind_filter([pattern]), kinds)):
            near = difflib.get_close_matches(pattern.rstrip("*"), kinds, n=1, cutoff=0.75)
            wrong.append(pattern + (f" (did you mean {near[0]}?)" if near else ""))
    return wrong


def kind_filter(patterns: Iterable[str]) -> Callable[[str], bool]:
    """Whether an event kind matches one of ``patterns``: a kind, or a prefix ending in ``*``
    (``memory.*``; ``*`` alone matches every kind). No patterns match every kind."""
    patterns = list(patterns)
    if not patterns:
        return lambda kind: True
    exact = {p for p in patterns if not p.endswith("*")}
    prefixes = tuple(p[:-1] for p in patterns if p.endswith("*"))
    return lambda kind: kind in exact or kind.startswith(prefixes)


def _event(row) -> Event:
    return Event(row["id"], row["at"], row["kind"], row["project_id"], row["actor"],
                 row["request_id"], json.loads(row["data"]))


INSERT = "INSERT INTO events (at, kind, project_id, actor, request_id, data) VALUES "
ROWS_PER_INSERT = 100  # 600 parameters a statement, far below SQLite's limit


def _insert(conn, rows: list[tuple]) -> list[int]:
    """``rows`` in one statement, their ids in the rows' order: RETURNING promises no order,
    but ids grow in the order rows go in (AUTOINCREMENT, a sequence), the VALUES order."""
    sql = INSERT + ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(rows)) + " RETURNING id"
    return sorted(r[0] for r in conn.execute(sql, [v for row in rows for v in row]))


class EventLog:
    """The log, written by every server of the state. Events the database will not take now
    (a SQLite file locked past its busy timeout, PostgreSQL unreachable) — after the write
    they tell of has committed — are kept in order and written by a thread that tries again
    until it can: the log is the webhooks' and the audit's queue, so an event never written
    is a delivery never made. Later events queue behind them, keeping ids in commit order."""

    RETRY_S = (0.5, 5.0)  # the first wait before trying again, and the longest

    def __init__(self, db, fan_out: Callable[[Event], None]):
        self.db = db
        self._fan_out = fan_out
        self._held = threading.local()
        self._unwritten: list[tuple] = []
        self._lock = threading.Lock()  # over _unwritten and each write, so order holds
        self._retrying: threading.Thread | None = None
        self._closed = threading.Event()
        self._ending = threading.Event()  # the process is stopping: streams end

    def append(self, kind: str, project_id: str | None, actor: str | None,
               data: dict[str, Any] | None, request_id: str | None) -> None:
        """Record an event now, or, while this thread holds them, when it releases them."""
        row = (now_iso(), kind, project_id, actor, request_id, json.dumps(data or {}, default=str))
        held = self._stack()
        if held:
            held[-1].append(row)
        else:
            self._write([row])

    def hold(self) -> None:
        """Keep this thread's events until :meth:`release`: a request's write and its
        ``api.call`` then cost one commit, not two. Holds nest, so a request the app serves
        inside another on the same thread (an MCP tool call) releases its own events only."""
        self._stack().append([])

    def release(self) -> None:
        held = self._stack()
        rows = held.pop() if held else None
        if rows:
            self._write(rows)

    def _stack(self) -> list[list[tuple]]:
        stack = getattr(self._held, "stack", None)
        if stack is None:
            stack = self._held.stack = []
        return stack

    def _write(self, rows: list[tuple]) -> None:
        with self._lock:
            if self._unwritten:  # an outage is on: behind the events still waiting
                self._unwritten.extend(rows)
                return
            try:
                events = self._commit(rows)
            except Exception as ex:
                if not storage_failure(ex):
                    raise
                self._unwritten.extend(rows)
                self._retry_later(ex)
                return
        self._send(events)

    def _commit(self, rows: list[tuple]) -> list[Event]:
        # serial: ids must commit in id order, or a stream reading past an id could skip an
        # event that commits after a later one (PostgreSQL's sequences give ids at insert)
        with self.db.transaction(serial=True) as conn:  # a request's events: one statement
            ids = [i for at in range(0, len(rows), ROWS_PER_INSERT)
                   for i in _insert(conn, rows[at:at + ROWS_PER_INSERT])]
        return [Event(event_id, at, kind, project_id, actor, request_id, json.loads(payload))
                for event_id, (at, kind, project_id, actor, request_id, payload)
                in zip(ids, rows)]

    def _send(self, events: list[Event]) -> None:
        for event in events:
            self._fan_out(event)

    def _retry_later(self, ex: BaseException) -> None:
        log.error("events could not be recorded (%s); %d kept, trying again until the "
                  "database takes them", ex, len(self._unwritten))
        if self._retrying is None or not self._retrying.is_alive():
            self._retrying = threading.Thread(target=self._retry, name="events-retry",
                                              daemon=True)
            self._retrying.start()

    def _retry(self) -> None:
        wait = self.RETRY_S[0]
        while not self._closed.wait(wait):
            if self.flush():
                return
            wait = min(wait * 2, self.RETRY_S[1])

    def flush(self) -> bool:
        """Write the events an outage kept; True once none is left."""
        with self._lock:
            if not self._unwritten:
                return True
            try:
                events = self._commit(self._unwritten)
            except Exception as ex:
                if not storage_failure(ex):
                    log.exception("events could not be recorded; %d kept",
                                  len(self._unwritten))
                return False
            self._unwritten.clear()
        log.warning("the %d events kept during the outage are recorded", len(events))
        self._send(events)
        return True

    def close(self) -> None:
        """Stop trying; what is still kept is tried once more, then said lost."""
        self._closed.set()
        if not self.flush():
            log.error("%d events were never recorded (the database was out of reach): "
                      "webhooks and the audit miss them", len(self._unwritten))

    def prune(self, before: str) -> int:
        """Delete the events older than ``before`` (an ISO time); how many went."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM events WHERE at < ?", (before,)).rowcount

    def end_streams(self) -> None:
        """End every open stream of this process within a poll (the process stops: a stream
        open in a dashboard held a worker to its graceful timeout); the client comes back to
        another worker, or to the restarted server, with its ``Last-Event-ID``."""
        self._ending.set()

    def last_id(self) -> int:
        return self.db.conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]

    def after(self, last_id: int, limit: int = 500) -> list[Event]:
        rows = self.db.conn.execute("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?",
                                    (last_id, limit)).fetchall()
        return [_event(r) for r in rows]

    def stream(self, last_id: int, keep: Callable[[Event], bool], heartbeat_s: float,
               admitted: Callable[[], bool]) -> Iterator[bytes]:
        """Server-sent events after ``last_id``, with a comment line as heartbeat; ends when
        the client goes away (the server's write fails and closes the generator), and when
        the database cannot be read (an outage, a server shutting down): the client comes
        back after ``retry`` with its ``Last-Event-ID`` and misses nothing; and when the process
        stops (:meth:`end_streams`). It ends, too, when
        ``admitted()`` no longer holds — asked before each batch it sends and each heartbeat
        (a token revoked or expired meanwhile gets nothing more)."""
        yield b"retry: 2000\n\n"
        quiet_since = time.monotonic()
        while not self._ending.is_set():
            try:
                batch = self.after(last_id)
            except Exception as ex:
                if not storage_failure(ex):
                    raise
                log.warning("an event stream ended after event %s: %s", last_id, ex)
                return
            if batch and not admitted():
                return
            for event in batch:
                last_id = event.id
                if keep(event):
                    quiet_since = time.monotonic()
                    yield (f"id: {event.id}\nevent: {event.kind}\n"
                           f"data: {json.dumps(event.as_dict(), default=str)}\n\n").encode()
            if time.monotonic() - quiet_since >= heartbeat_s:
                if not admitted():
                    return
                quiet_since = time.monotonic()
                yield b": keepalive\n\n"
            if not batch:
                time.sleep(POLL_S)


class HeldEvents:
    """Falcon middleware, outside the kernel's guards and the plugins' middleware: the events
    of a request are written together right after the handler and those middleware's
    ``process_response`` (``api.call`` included) — the write they tell of has committed, so
    nothing that may wait belongs before them. Middleware marked ``after_events`` sit outside
    this one: their ``process_response`` runs once the events are written (tier2's seat note,
    which can wait on seats.db's lock)."""

    def __init__(self, events: EventLog):
        self.events = events

    def process_request(self, req, resp) -> None:
        self.events.hold()

    def process_response(self, req, resp, resource, req_succeeded: bool) -> None:
        try:
            self.events.release()
        except Exception as ex:  # the response is decided and its write committed; never a 500
            log_failure(log, f"recording the events of request "
                             f"{getattr(req.context, 'request_id', '?')}", ex)


def record_event(settings, kind: str, data: dict[str, Any] | None = None, *,
                 project_id: str | None = None) -> bool:
    """An event from a CLI command (``cli:<user>`` as actor), appended to the event log — the
    shared database's, or the home's ``kernel.db``, made with the kernel's migrations when no
    server has run there yet (a token created before the first start is an event too: the
    server's ``/v1/events`` and the audit find it in the log). ``track_event`` plugins are
    not called, as no kernel runs in the CLI. False when the event could not be written (the
    database out of reach or locked past its busy timeout; the log says why)."""
    from kernel.app import kernel_migrations
    from kernel.pg import open_shared
    from kernel.storage import Database
    try:
        db = open_shared(settings, "kernel", kernel_migrations(postgres=True))
        if db is None:
            home = settings.home
            if not home.exists():
                home.mkdir(parents=True, mode=0o700)  # as a server makes it
            db = Database(home / "kernel.db", kernel_migrations(postgres=False))
    except Exception as ex:  # unreadable, not a database, a newer schema: the caller says so
        log.error("the %s event cannot be recorded: %s", kind, ex)
        return False
    events = EventLog(db, lambda event: None)
    try:
        events.append(kind, project_id, f"cli:{getpass.getuser()}", data, None)
        events.close()  # what an outage kept is tried once more, else said lost
        return not events._unwritten
    finally:
        db.close()
