"""The hash-chained audit trail: ``audit.db`` in the state home, one row per kernel event.

Each record's ``hash`` is ``sha256(prev_hash + canonical JSON of the record)``, the canonical
form being the record's seven fields (``seq, at, actor, action, project, target, request_id``)
as JSON with sorted keys, no whitespace, UTF-8, non-ASCII kept as is. The first record's
``prev_hash`` is 64 zeros. An edit, deletion, insertion or reordering breaks the chain at the
first record it touches; ``verify`` names that record.

The trail mirrors the kernel's event log: a copy appends every kernel event after the last one
copied (``audit_meta.event_cursor``), inside one ``BEGIN IMMEDIATE`` transaction. So two
gunicorn workers never fork the chain, records follow the kernel's event order, and an event
whose copy failed (a locked or broken file) is copied by the next copy that succeeds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuralmind import database_errors, one_line
from plugins.tier2_bridge.storage import LazyDatabase, StoreUnavailable

log = logging.getLogger("neuralmind.tier2.audit")

AUDIT_FILE = "audit.db"
GENESIS = "0" * 64
RECORD_FIELDS = ("seq", "at", "actor", "action", "project", "target", "request_id")
NULLABLE = frozenset({"actor", "project", "target", "request_id"})
COLUMNS = (*RECORD_FIELDS, "prev_hash", "hash")
CATCH_UP_BATCH = 500  # kernel events copied per transaction, so other workers get their turn
POLL_S = 1.0  # the copier also looks for events nobody signalled (the CLI writes some)
TARGET_KEYS = ("target", "memory_id", "id", "token_id", "path")

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    actor TEXT,
    action TEXT NOT NULL,
    project TEXT,
    target TEXT,
    request_id TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_actor ON audit (actor, seq);
CREATE INDEX IF NOT EXISTS audit_by_project ON audit (project, seq);
CREATE TABLE IF NOT EXISTS audit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""]
PG_MIGRATIONS = [MIGRATIONS[0][:MIGRATIONS[0].index("CREATE TRIGGER")] + """
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the audit trail is append-only'; END $$;
CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit
FOR EACH ROW EXECUTE FUNCTION audit_append_only();
"""]


def audit_path(home: Path) -> Path:
    return Path(home) / AUDIT_FILE


# -- the chain ------------------------------------------------------------------------------

def canonical(record: dict[str, Any]) -> bytes:
    """The record's seven fields as sorted-key, whitespace-free UTF-8 JSON."""
    return json.dumps({k: record[k] for k in RECORD_FIELDS}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def chain_hash(prev_hash: str, record: dict[str, Any]) -> str:
    return hashlib.sha256(prev_hash.encode("ascii") + canonical(record)).hexdigest()


def malformed(row: dict[str, Any]) -> str | None:
    """What in a stored row no copier wrote — a column that is not text (a BLOB, bytes that
    are not UTF-8, a number), ``seq`` not a number — else None. Such a row was edited, and its
    hash cannot even be computed."""
    for column in COLUMNS:
        value = row[column]
        if column == "seq":
            ok = isinstance(value, int)
        else:
            ok = isinstance(value, str) or (value is None and column in NULLABLE)
        if not ok:
            kind = "bytes that are not UTF-8 text" if isinstance(value, bytes) else repr(value)
            return f"its {column} holds {kind:.60}: it was edited"
    return None


@dataclass(frozen=True)
class Break:
    """Where the chain stops holding: the first broken record and why."""

    seq: int
    reason: str


@dataclass(frozen=True)
class Verdict:
    records: int
    head_seq: int
    head_hash: str
    broken: Break | None = None


def verify(rows: Iterable[dict[str, Any]], anchor: tuple[int, str] | None = None) -> Verdict:
    """Walk records in ``seq`` order. ``anchor`` (a ``(seq, hash)`` saved earlier, e.g. from a
    previous run) also catches what a chain alone cannot: a cut tail or a rewritten chain."""
    prev, expected, count = GENESIS, 1, 0
    for row in rows:
        if why := malformed(row):
            seq = row["seq"] if isinstance(row["seq"], int) else expected
            return Verdict(count, expected - 1, prev, Break(seq, why))
        seq = row["seq"]
        if seq != expected:
            reason = (f"record {expected} is missing (the next record is {seq})" if seq > expected
                      else f"record {seq} is out of order (expected {expected})")
            return Verdict(count, expected - 1, prev, Break(expected if seq > expected else seq,
                                                            reason))
        if row["prev_hash"] != prev:
            before = f"record {seq - 1}" if seq > 1 else "the genesis hash (64 zeros)"
            return Verdict(count, seq - 1, prev, Break(seq, f"prev_hash does not match {before}: "
                                                            "a record was inserted, removed or "
                                                            "moved here"))
        if chain_hash(prev, row) != row["hash"]:
            return Verdict(count, seq - 1, prev, Break(seq, "hash does not match the record's "
                                                            "contents: it was edited"))
        if anchor is not None and seq == anchor[0] and row["hash"] != anchor[1]:
            return Verdict(count, seq - 1, prev, Break(seq, "hash differs from the anchor: the "
                                                            "chain was rewritten up to here"))
        prev, expected, count = row["hash"], expected + 1, count + 1
    if anchor is not None and anchor[0] >= expected:
        return Verdict(count, expected - 1, prev,
                       Break(expected, f"the trail ends at record {expected - 1}, before the "
                                       f"anchor {anchor[0]}: records were cut from the end"))
    return Verdict(count, expected - 1, prev)


def entry_of(event) -> dict[str, Any]:
    """The audit record of a kernel event (without ``seq``): the event's kind is the action;
    the target is what the event names (an ``api.call``'s method, path and status)."""
    data = event.data if isinstance(event.data, dict) else {}
    return {"at": event.at, "actor": event.actor, "action": event.kind,
            "project": event.project_id, "target": _target(event.kind, data),
            "request_id": event.request_id}


def _target(kind: str, data: dict[str, Any]) -> str | None:
    """What the event names, on one line: a control character in it — a refused request's
    path may hold any (``%00`` decodes to a NUL, which PostgreSQL's text cannot store: the
    shared trail stopped there for good) — is written as its escape, and a backslash doubled
    (or ``a%5Cx00b`` would read as ``a%00b``), before it is hashed."""
    if kind == "api.call" and data.get("method") and data.get("path"):
        return _escaped(" ".join(str(data[k]) for k in ("method", "path", "status")
                                 if data.get(k)))
    for key in TARGET_KEYS:
        value = data.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            return _escaped(str(value))
    return None


def _escaped(text: str) -> str:
    return one_line(text.replace("\\", "\\\\"))


# -- the store --------------------------------------------------------------------------------

class AuditTrail:
    """The server's side: a copier thread per process, and filtered pages for the admin route.

    ``track_event`` only wakes the copier, so a request never waits on ``audit.db`` and a
    broken file costs the audit — logged, once per outage — never the server or a request.
    The kernel's event log is the durable queue: whatever a process did not copy before it
    died, the next copy in any worker picks up. The copier also polls, so events written
    without a server (``neuralmind token create``) reach the trail too.
    """

    def __init__(self, db: LazyDatabase, events, poll_s: float = POLL_S):
        self.db = db
        self._events = events  # the kernel's EventLog: the source the trail copies from
        self._poll_s = poll_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._sync_lock = threading.Lock()
        self._failing = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tier2-audit", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """An event was committed: copy it soon (``track_event``; returns at once)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sync()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._poll_s)
            self._wake.clear()
            self.sync()

    def sync(self) -> int:
        """Copy every committed kernel event not yet in the chain; never raises. Returns how
        many records this call appended (0 when another worker already copied them)."""
        copied = 0
        with self._sync_lock:
            try:
                upto = self._events.last_id()
                while (n := self.copy_until(upto)):
                    copied += n
            except Exception as ex:  # the audit never fails anything but itself
                self.db.reconnect()  # the file may be replaced or repaired before the retry
                if not self._failing:  # once per outage, not once per poll
                    log.error("audit: events are not reaching %s: %s; retrying every %s s",
                              self.db.path, ex, self._poll_s)
                self._failing = True
                return copied
        if self._failing:
            log.warning("audit: %s is being written again; missed events copied", self.db.path)
            self._failing = False
        return copied

    def _cursor(self, conn) -> int:
        row = conn.execute("SELECT value FROM audit_meta WHERE key = 'event_cursor'").fetchone()
        return int(row[0]) if row else 0

    def copy_until(self, upto: int) -> int:
        """One transaction: append the kernel events after the cursor, up to event ``upto``
        and at most ``CATCH_UP_BATCH`` of them. Raises on failure (``sync`` does not)."""
        db = self.db.get()
        if self._cursor(db.conn) >= upto:  # the common case, answered without a write lock
            return 0
        with db.transaction(serial=True) as conn:  # one copier at a time: the chain never forks
            cursor = self._cursor(conn)  # again: another worker may have copied meanwhile
            if cursor >= upto:
                return 0
            # ids commit in order (serial appends), so this bounds the read too
            batch = self._events.after(cursor, min(CATCH_UP_BATCH, upto - cursor))
            pending = [e for e in batch if e.id <= upto]
            if not pending:
                return 0
            head = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            seq, prev = (head[0], head[1]) if head else (0, GENESIS)
            for event in pending:
                seq += 1
                rec = {"seq": seq, **entry_of(event)}
                digest = chain_hash(prev, rec)
                conn.execute("INSERT INTO audit (seq, at, actor, action, project, target, "
                             "request_id, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (*(rec[k] for k in RECORD_FIELDS), prev, digest))
                prev = digest
            conn.execute("INSERT INTO audit_meta (key, value) VALUES ('event_cursor', ?) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         (str(pending[-1].id),))
        return len(pending)

    def page(self, *, after: int, limit: int, actor: str | None = None,
             action: str | None = None, project: str | None = None,
             since: str | None = None) -> list[dict[str, Any]]:
        """Records with ``seq > after`` in chain order. ``action`` ending in ``*`` is a prefix."""
        where, args = ["seq > ?"], [after]
        for column, value in (("actor", actor), ("project", project)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if action is not None:
            if action.endswith("*"):
                where.append("substr(action, 1, ?) = ?")
                args += [len(action) - 1, action[:-1]]
            else:
                where.append("action = ?")
                args.append(action)
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        sql = f"SELECT * FROM audit WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?"
        try:
            rows = self.db.get().conn.execute(sql, (*args, limit)).fetchall()
        except database_errors() as ex:
            raise StoreUnavailable(f"cannot read {self.db.path}: {ex}") from ex
        out = [{k: r[k] for k in r.keys()} for r in rows]
        for row in out:
            if why := malformed(row):
                raise StoreUnavailable(f"record {row['seq']} of {self.db.path}: {why} "
                                       "(`neuralmind audit verify` walks the whole chain)")
        return out


# -- the operator's side: read-only, never creates or migrates the file -----------------------

def read_only(path: Path) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise StoreUnavailable(f"no audit trail at {path}")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as ex:
        raise StoreUnavailable(f"cannot open {path}: {ex}") from ex
    conn.row_factory = sqlite3.Row
    conn.text_factory = _text
    return conn


def _text(raw: bytes) -> str | bytes:
    """A TEXT value as a string; bytes that are not UTF-8 stay bytes, for verify to name."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def records(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Every record in ``seq`` order, from one consistent snapshot."""
    try:
        conn.execute("BEGIN")
        for row in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM audit ORDER BY seq"):
            yield dict(row)
        conn.execute("COMMIT")
    except sqlite3.Error as ex:
        raise StoreUnavailable(f"cannot read the audit trail: {ex}") from ex


def shared_records(db) -> Iterator[dict[str, Any]]:
    """Every record of the shared database's trail in ``seq`` order, from one snapshot."""
    try:
        with db.transaction() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM audit ORDER BY seq").fetchall()
    except database_errors() as ex:
        raise StoreUnavailable(f"cannot read the audit trail: {ex}") from ex
    for row in rows:
        yield {k: row[k] for k in COLUMNS}


# -- neuralmind storage migrate -----------------------------------------------------------------

def stored_files(home) -> list:
    from neuralmind import StoredFile
    return [StoredFile(audit_path(home.path), MIGRATIONS)]


UNMENDED = ("An audit record cannot be mended: the chain's hashes cover it. Keep the trail as it "
            "is (`neuralmind audit export --out FILE`, and the head `neuralmind audit verify` "
            "prints), move audit.db out of the home, then run the same command again: the "
            "database's trail is made anew from the event log.")


def copy_trail(home, target) -> list:
    """audit.db into the shared database, records and the cursor over the event log as they
    are; verified by the count, the chain's head (seq and hash) in both, and a walk of the
    whole copied chain."""
    from neuralmind import Check, copy_table
    source = home.open(stored_files(home)[0])
    if source is None:
        return []
    try:
        checks = [copy_table(source, target, "audit", ("seq",), mend=False, remedy=UNMENDED),
                  copy_table(source, target, "audit_meta", ("key",))]
        mine = verify(dict(r) for r in source.conn.execute(
            f"SELECT {', '.join(COLUMNS)} FROM audit ORDER BY seq"))
    finally:
        source.close()
    theirs = verify(shared_records(target))
    return [*checks,
            Check("audit chain head", f"{mine.head_seq}:{mine.head_hash[:16]}",
                  f"{theirs.head_seq}:{theirs.head_hash[:16]}"),
            Check("audit chain whole", "yes", "yes" if theirs.broken is None else
                  f"broken at {theirs.broken.seq}: {theirs.broken.reason}")]
