"""MemoryStore: the only code that speaks SQL to a project's ``memory.db``.

Every write is one transaction holding the row change, its FTS update (triggers), its
history event and a bump of the version stamp — the stamp tells each process's vector cache
that it must reload. A write of several steps (a supersede, a merge, a resolution) runs its
steps on one :class:`Writer`, in one transaction. Records go in and come out as plain dicts;
lists are JSON text. Links, contradictions, per-project config (the decay policy, the
contradiction settings) and collections live beside the records (schema step 3).
"""

from __future__ import annotations

import itertools
import json
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from neuralmind import now_iso, statements
from plugins.memory import times
from plugins.memory.decay import DEFAULT_IMPORTANCE
from plugins.memory.text import keyword_columns, nfc

LIST_FIELDS = ("files_affected", "evidence", "rejected_alternatives", "dependency_constraints",
               "tags")
FIELDS = ("id", "title", "rationale", "commit_sha", "files_affected", "decision_type", "kind",
          "importance", "pinned", "confidence", "status", "author", "agent", "session_id",
          "review_by", "evidence", "rejected_alternatives", "dependency_constraints", "tags",
          "created_at", "updated_at", "last_accessed_at", "access_count")
# what a write sets; recalls alone move last_accessed_at and access_count (MemoryStore.touch)
WRITTEN = tuple(f for f in FIELDS if f not in ("id", "created_at", "last_accessed_at",
                                               "access_count"))
# the text the keyword index holds, folded in Python (plugins.memory.text), schema step 4
KEYWORD_COLUMNS = ("keyword_title", "keyword_body")
REWRITTEN = (*LIST_FIELDS, "author")  # the columns schema step 4 stores anew

SCHEMA = """
CREATE TABLE memories (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    rationale TEXT NOT NULL,
    commit_sha TEXT NOT NULL DEFAULT '',
    files_affected TEXT NOT NULL DEFAULT '[]',
    decision_type TEXT NOT NULL,
    confidence REAL NOT NULL,
    status TEXT NOT NULL,
    author TEXT,
    agent TEXT,
    session_id TEXT,
    review_by TEXT,
    evidence TEXT NOT NULL DEFAULT '[]',
    rejected_alternatives TEXT NOT NULL DEFAULT '[]',
    dependency_constraints TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    content_sha TEXT NOT NULL
);
CREATE INDEX memories_by_created ON memories (created_at, id);
CREATE TABLE memory_files (
    path TEXT NOT NULL,
    memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    PRIMARY KEY (path, memory_id)
) WITHOUT ROWID;
CREATE INDEX memory_files_by_memory ON memory_files (memory_id);
CREATE TABLE memory_events (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    memory_id TEXT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT,
    changes TEXT NOT NULL DEFAULT '{}',
    note TEXT
);
CREATE INDEX memory_events_by_memory ON memory_events (memory_id, seq);
CREATE TABLE memory_vectors (
    memory_id TEXT PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    model_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    content_sha TEXT NOT NULL
);
CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL, owner TEXT);
INSERT INTO memory_meta (key, value) VALUES ('version', 0), ('backfill_until', 0);
"""

FTS_SCHEMA = """
CREATE VIRTUAL TABLE memories_fts USING fts5(
    title, rationale, evidence, tags, content='memories', content_rowid='rowid',
    tokenize='porter unicode61');
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, title, rationale, evidence, tags)
    VALUES (new.rowid, new.title, new.rationale, new.evidence, new.tags);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, title, rationale, evidence, tags)
    VALUES ('delete', old.rowid, old.title, old.rationale, old.evidence, old.tags);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF title, rationale, evidence, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, title, rationale, evidence, tags)
    VALUES ('delete', old.rowid, old.title, old.rationale, old.evidence, old.tags);
    INSERT INTO memories_fts (rowid, title, rationale, evidence, tags)
    VALUES (new.rowid, new.title, new.rationale, new.evidence, new.tags);
END;
"""


def _schema_v1(conn: sqlite3.Connection) -> None:
    for statement in statements(SCHEMA):
        conn.execute(statement)
    try:  # FTS5 is compiled into nearly every SQLite; without it keyword search uses LIKE
        for statement in statements(FTS_SCHEMA):
            conn.execute(statement)
    except sqlite3.OperationalError:
        pass


def _fts_automerge(conn: sqlite3.Connection) -> None:
    """Merge FTS5 segments two at a time (the default waits for four): every create commits
    its own small segment, and each keyword query probes every segment for every word — on
    10k records fewer segments made a duplicate hint ~15% cheaper and a create no dearer."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'").fetchone():
        conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('automerge', 2)")


SCHEMA_V3 = f"""
ALTER TABLE memories ADD COLUMN kind TEXT NOT NULL DEFAULT 'decision';
ALTER TABLE memories ADD COLUMN importance REAL NOT NULL DEFAULT {DEFAULT_IMPORTANCE['decision']};
ALTER TABLE memories ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN last_accessed_at TEXT;
ALTER TABLE memories ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0;
CREATE TABLE memory_links (
    source TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    target TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    created_at TEXT NOT NULL,
    actor TEXT,
    note TEXT,
    PRIMARY KEY (source, type, target)
) WITHOUT ROWID;
CREATE INDEX memory_links_by_target ON memory_links (target);
CREATE TABLE memory_contradictions (
    id TEXT PRIMARY KEY,
    a TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    b TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    confidence REAL NOT NULL,
    kind TEXT,
    explanation TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    detected_at TEXT NOT NULL,
    resolved_at TEXT,
    resolved_by TEXT,
    strategy TEXT,
    outcome TEXT,
    UNIQUE (a, b)
);
CREATE INDEX memory_contradictions_by_b ON memory_contradictions (b);
CREATE INDEX memory_contradictions_by_time ON memory_contradictions (detected_at, id);
CREATE TABLE memory_config (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memory_collections (
    name TEXT PRIMARY KEY,
    filters TEXT NOT NULL,
    description TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
INSERT INTO memory_meta (key, value) VALUES ('decay_until', 0), ('decay_last', 0);
"""


# Step 4: the keyword index over text the plugin folds itself (plugins.memory.text: Chinese and
# Japanese split into character pairs, accents and case folded alike on both engines), stored
# beside the record, and list fields as real text — they were JSON with every non-ASCII
# character escaped, so the index held ``u043a…`` instead of the words.
OLD_FTS = """
DROP TRIGGER IF EXISTS memories_fts_insert;
DROP TRIGGER IF EXISTS memories_fts_delete;
DROP TRIGGER IF EXISTS memories_fts_update;
DROP TABLE IF EXISTS memories_fts;
"""
KEYWORD_FTS = """
CREATE VIRTUAL TABLE memories_fts USING fts5(
    keyword_title, keyword_body, content='memories', content_rowid='rowid',
    tokenize='porter unicode61');
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, keyword_title, keyword_body)
    VALUES (new.rowid, new.keyword_title, new.keyword_body);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, keyword_title, keyword_body)
    VALUES ('delete', old.rowid, old.keyword_title, old.keyword_body);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF keyword_title, keyword_body ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, keyword_title, keyword_body)
    VALUES ('delete', old.rowid, old.keyword_title, old.keyword_body);
    INSERT INTO memories_fts (rowid, keyword_title, keyword_body)
    VALUES (new.rowid, new.keyword_title, new.keyword_body);
END;
INSERT INTO memories_fts (memories_fts) VALUES ('rebuild');
"""


def _keyword_text(conn: sqlite3.Connection) -> None:
    """Schema step 4: the keyword columns filled, list fields rewritten, the index rebuilt
    over the keyword columns (FTS5 cannot index text a trigger computes in Python)."""
    had_fts = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'").fetchone()
    for column in KEYWORD_COLUMNS:
        conn.execute(f"ALTER TABLE memories ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    # the old index goes first: its triggers would re-index every rewritten row (3.8× the
    # step's time at 50,000 records) in an index rebuilt just after
    for statement in statements(OLD_FTS):
        conn.execute(statement)
    rewrite_text(conn)
    if had_fts:  # without FTS5 keyword search scans the keyword columns with LIKE
        for statement in statements(KEYWORD_FTS):
            conn.execute(statement)
        _fts_automerge(conn)


def rewrite_text(conn, prefix: str = "", scope: tuple[str, ...] = ()) -> None:
    """Every record stored as this release writes it: list fields as real text, tags, author
    and files in NFC (the file index too), the keyword columns filled — an UPDATE for each
    record that changes, so a run again changes nothing. ``prefix`` and ``scope``: the tables
    and key columns of the PostgreSQL store's every project (``all_``, ``project_id``)."""
    names = (*scope, "id", *REWRITTEN, *KEYWORD_COLUMNS, "title", "rationale")
    key, files_key = (" AND ".join(f"{k} = ?" for k in (*scope, last)) for last in
                      ("id", "memory_id"))
    files = f"{prefix}memory_files"
    for row in conn.execute(f"SELECT {', '.join(names)} FROM {prefix}memories").fetchall():
        was = dict(zip(names, row))
        rec = normalised({**was, **{f: json.loads(was[f]) for f in LIST_FIELDS}})
        now = {f: _stored(rec, f) for f in REWRITTEN}
        now.update(zip(KEYWORD_COLUMNS, keyword_columns(rec)))
        ids = [was[k] for k in (*scope, "id")]
        if any(now[f] != was[f] for f in now):
            conn.execute(f"UPDATE {prefix}memories SET {', '.join(f'{f} = ?' for f in now)} "
                         f"WHERE {key}", (*now.values(), *ids))
        if now["files_affected"] != was["files_affected"]:
            conn.execute(f"DELETE FROM {files} WHERE {files_key}", ids)
            conn.executemany(f"INSERT INTO {files} ({', '.join(scope)}{', ' if scope else ''}"
                             f"memory_id, path) VALUES ({', '.join('?' * (len(ids) + 1))}) "
                             "ON CONFLICT DO NOTHING",
                             [(*ids, path) for path in rec["files_affected"]])


def normalised(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with its tags, author and files in NFC, each once (what the API now stores)."""
    return {**rec, "author": nfc(rec["author"]),
            **{f: list(dict.fromkeys(map(nfc, rec[f]))) for f in ("tags", "files_affected")}}


MIGRATIONS = [_schema_v1, _fts_automerge, SCHEMA_V3, _keyword_text]

COUNTS_TTL_S = 60.0  # how long a process trusts its per-word record counts
COUNTS_MAX = 50_000  # words remembered before the counts start over

# The effective status in SQL: an ACTIVE record whose review_by has passed reads as STALE.
EFFECTIVE = ("CASE WHEN m.status = 'ACTIVE' AND m.review_by IS NOT NULL AND m.review_by < :today "
             "THEN 'STALE' ELSE m.status END")
COLUMNS = ", ".join(f"m.{f}" for f in FIELDS)
INSERT = (f"INSERT INTO memories ({', '.join(FIELDS)}, content_sha, {', '.join(KEYWORD_COLUMNS)}) "
          f"VALUES ({', '.join('?' * (len(FIELDS) + 1 + len(KEYWORD_COLUMNS)))})")
VECTOR_COLUMNS = ("v.memory_id, v.vector, m.status, m.review_by, m.confidence, m.kind, "
                  "m.session_id, m.created_at")
UNCOMPARED = ("updated_at", "last_accessed_at", "access_count")  # an overwrite's changes leave out

EVENT = ("INSERT INTO memory_events (id, memory_id, at, kind, actor, changes, note) "
         "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
FILES = "INSERT INTO memory_files (path, memory_id) VALUES (?, ?) ON CONFLICT DO NOTHING"


def _stored(rec: dict[str, Any], field: str) -> Any:
    """A record's field as its column holds it: lists as JSON text of real characters (the
    ``\\u`` escapes of before step 4 hid every non-ASCII word from the index), flags as 0/1."""
    value = rec[field]
    if field in LIST_FIELDS:
        return json.dumps(value, ensure_ascii=False) if value else "[]"
    return int(value) if isinstance(value, bool) else value


def new_event_id() -> str:
    return "ev_" + secrets.token_hex(8)


def record_of(row: sqlite3.Row) -> dict[str, Any]:
    rec = {f: row[f] for f in FIELDS}
    for f in LIST_FIELDS:
        rec[f] = json.loads(rec[f])
    rec["pinned"] = bool(rec["pinned"])
    return rec


LINK_FIELDS = ("source", "target", "type", "created_at", "actor", "note")
CONTRADICTION_FIELDS = ("id", "a", "b", "confidence", "kind", "explanation", "status",
                        "detected_at", "resolved_at", "resolved_by", "strategy", "outcome")


def link_of(row: sqlite3.Row) -> dict[str, Any]:
    return {f: row[f] for f in LINK_FIELDS}


def contradiction_of(row: sqlite3.Row) -> dict[str, Any]:
    out = {f: row[f] for f in CONTRADICTION_FIELDS}
    out["outcome"] = json.loads(out["outcome"]) if out["outcome"] else None
    return out


def event_of(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "at": row["at"], "kind": row["kind"], "actor": row["actor"],
            "changes": json.loads(row["changes"]), "note": row["note"]}


class IdTaken(Exception):
    """A create named an id that exists (the write rolled back)."""


def records_by_id(conn, ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{id: record}`` of ``ids`` (the gone left out), read 500 at a time."""
    found: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        rows = conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.id IN "
                            f"({','.join('?' * len(chunk))})", chunk)
        found.update((r["id"], record_of(r)) for r in rows)
    return found


class Writer:
    """The steps of one write transaction (:meth:`MemoryStore.writing`); each record change
    comes with its history event, and the store's version moves once at the end."""

    TAKEN: type[Exception] = sqlite3.IntegrityError  # what a taken id raises

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.records_changed = False

    @staticmethod
    def _row(rec: dict[str, Any], content_sha: str) -> tuple:
        return (*(_stored(rec, f) for f in FIELDS), content_sha, *keyword_columns(rec))

    def get(self, memory_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?",
                                (memory_id,)).fetchone()
        return record_of(row) if row else None

    def get_many(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """``{id: record}`` of ``ids`` as this transaction sees them (the gone left out): what
        a background change re-reads before it writes."""
        return records_by_id(self.conn, ids)

    def insert(self, recs: list[tuple[dict[str, Any], str]]) -> None:
        """Rows and their file index, no events (creates and imports add their own)."""
        self.insert_rows([self._row(rec, sha) for rec, sha in recs])
        files = [(p, rec["id"]) for rec, _ in recs for p in rec["files_affected"]]
        if files:
            self.conn.executemany(FILES, files)
        self.records_changed = True

    def insert_rows(self, rows: list[tuple]) -> None:
        self.conn.executemany(INSERT, rows)

    def create(self, recs: list[tuple[dict[str, Any], str, str | None]]) -> None:
        """Insert ``[(record, content_sha, actor)]`` with their ``created`` events; a taken id
        raises :class:`IdTaken` (the transaction then rolls back)."""
        try:
            self.insert([(rec, sha) for rec, sha, _ in recs])
        except self.TAKEN:
            raise IdTaken() from None
        self.conn.executemany(EVENT, [(new_event_id(), rec["id"], rec["created_at"], "created",
                                       actor, "{}", None) for rec, _, actor in recs])

    def update(self, rec: dict[str, Any], content_sha: str, *, kind: str, actor: str | None,
               changes: dict[str, Any], note: str | None = None,
               expect_updated_at: str | None = None) -> bool:
        """Write ``rec`` over the stored row; False when ``expect_updated_at`` no longer holds."""
        if expect_updated_at is not None:
            row = self.conn.execute("SELECT updated_at FROM memories WHERE id = ?",
                                    (rec["id"],)).fetchone()
            if row is None or row[0] != expect_updated_at:
                return False
        values = [_stored(rec, f) for f in WRITTEN]
        self.conn.execute(f"UPDATE memories SET {', '.join(f'{f} = ?' for f in WRITTEN)}, "
                          f"content_sha = ?, {', '.join(f'{f} = ?' for f in KEYWORD_COLUMNS)} "
                          "WHERE id = ?", (*values, content_sha, *keyword_columns(rec), rec["id"]))
        if "files_affected" in changes:
            self.conn.execute("DELETE FROM memory_files WHERE memory_id = ?", (rec["id"],))
            self.conn.executemany(FILES, [(p, rec["id"]) for p in rec["files_affected"]])
        self.event(rec["id"], rec["updated_at"], kind, actor, changes, note)
        self.records_changed = True
        return True

    def apply(self, ops: list[tuple[str, dict[str, Any], str | None, dict[str, Any],
                                    str | None]], at: str) -> None:
        """``[(op, record, content_sha, changes, actor)]``, ``op`` create, patch, invalidate
        or delete: a batch's writes, each with its event."""
        for i, (op, rec, sha, changes, actor) in enumerate(ops):
            if op == "create" and (i == 0 or ops[i - 1][0] != "create"):
                run = [(r, s, a) for _, r, s, _, a in itertools.takewhile(
                    lambda o: o[0] == "create", ops[i:])]
                self.create(run)  # a run of creates: three executemany calls
            elif op == "create":
                continue
            elif op == "patch":
                self.update(rec, sha, kind="amended", actor=actor, changes=changes)
            elif op == "invalidate":
                self.update(rec, sha, kind="invalidated", actor=actor,
                            changes={"status": changes["status"]}, note=changes["reason"])
            else:
                self.delete(rec["id"], at, actor, rec["title"])

    def delete(self, memory_id: str, at: str, actor: str | None, title: str) -> bool:
        """Remove the record, its vector, links and contradictions; its events stay, closed by
        a ``deleted`` event, and each record it was linked to gets an ``unlinked`` event (the
        statuses the links set stay, as when a link is removed: restore undoes)."""
        links = [link_of(r) for r in self.conn.execute(
            "SELECT * FROM memory_links WHERE source = ? OR target = ?", (memory_id, memory_id))]
        if self.conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount == 0:
            return False
        self.event(memory_id, at, "deleted", actor, note=title)
        for link in links:
            other = link["target"] if link["source"] == memory_id else link["source"]
            if other != memory_id:
                self.event(other, at, "unlinked", actor, {"link": {
                    k: link[k] for k in ("source", "target", "type")}}, f"{memory_id} was deleted")
        self.records_changed = True
        return True

    def event(self, memory_id: str, at: str, kind: str, actor: str | None,
              changes: dict | None = None, note: str | None = None,
              event_id: str | None = None) -> None:
        self.conn.execute(EVENT, (event_id or new_event_id(), memory_id, at, kind, actor,
                                  json.dumps(changes, default=str) if changes else "{}", note))

    def link(self, link: dict[str, Any]) -> bool:
        """Add a link (no events: the caller writes them on both records); False if it exists."""
        return self.conn.execute(
            f"INSERT INTO memory_links ({', '.join(LINK_FIELDS)}) "
            f"VALUES ({', '.join('?' * len(LINK_FIELDS))}) ON CONFLICT DO NOTHING",
            tuple(link[f] for f in LINK_FIELDS)).rowcount == 1

    def targets(self, sources: list[str], link_type: str) -> list[str]:
        """The targets of ``link_type`` links from any of ``sources``, as this transaction
        sees them (what a cycle check walks: a link committed meanwhile is in it)."""
        found: list[str] = []
        for i in range(0, len(sources), 500):
            chunk = sources[i:i + 500]
            found += [r[0] for r in self.conn.execute(
                f"SELECT DISTINCT target FROM memory_links WHERE type = ? AND source IN "
                f"({','.join('?' * len(chunk))})", (link_type, *chunk))]
        return found

    def outgoing(self, source: str) -> list[dict[str, Any]]:
        """The links ``source`` is the source of, as this transaction sees them."""
        return [link_of(r) for r in self.conn.execute(
            "SELECT * FROM memory_links WHERE source = ?", (source,))]

    def unlink(self, source: str, target: str, link_type: str | None) -> list[dict[str, Any]]:
        """Remove the links from ``source`` to ``target`` (of ``link_type``, else all); returns them."""
        sql = "FROM memory_links WHERE source = ? AND target = ?"
        args: tuple = (source, target)
        if link_type is not None:
            sql += " AND type = ?"
            args += (link_type,)
        gone = [link_of(r) for r in self.conn.execute(f"SELECT * {sql}", args)]
        self.conn.execute(f"DELETE {sql}", args)
        return gone

    def contradiction(self, row: dict[str, Any]) -> bool:
        """Store a detected contradiction; False when the pair is known already (any status)."""
        return self.conn.execute(
            f"INSERT INTO memory_contradictions ({', '.join(CONTRADICTION_FIELDS)}) "
            f"VALUES ({', '.join('?' * len(CONTRADICTION_FIELDS))}) ON CONFLICT DO NOTHING",
            tuple(json.dumps(row[f]) if f == "outcome" and row[f] is not None else row[f]
                  for f in CONTRADICTION_FIELDS)).rowcount == 1

    def resolve(self, cid: str, *, at: str, actor: str | None, strategy: str,
                outcome: dict[str, Any]) -> bool:
        """Close an open contradiction; False when it is not open (any more)."""
        return self.conn.execute(
            "UPDATE memory_contradictions SET status = 'resolved', resolved_at = ?, "
            "resolved_by = ?, strategy = ?, outcome = ? WHERE id = ? AND status = 'open'",
            (at, actor, strategy, json.dumps(outcome), cid)).rowcount == 1

    # Upserts are an insert that skips a taken key, then an update: an ON CONFLICT target
    # names a unique index, which PostgreSQL's per-project views (plugins.memory.pgstore) lack.

    def put_config(self, name: str, value: dict[str, Any]) -> None:
        if not self.conn.execute("INSERT INTO memory_config (name, value) VALUES (?, ?) "
                                 "ON CONFLICT DO NOTHING", (name, json.dumps(value))).rowcount:
            self.conn.execute("UPDATE memory_config SET value = ? WHERE name = ?",
                              (json.dumps(value), name))

    def put_collection(self, name: str, filters: dict[str, Any], description: str | None,
                       at: str) -> bool:
        """Create or replace a collection; True when it is new."""
        text = json.dumps(filters, default=str)
        new = self.conn.execute(
            "INSERT INTO memory_collections (name, filters, description, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (name, text, description, at, at)).rowcount == 1
        if not new:
            self.conn.execute("UPDATE memory_collections SET filters = ?, description = ?, "
                              "updated_at = ? WHERE name = ?", (text, description, at, name))
        return new

    def delete_collection(self, name: str) -> bool:
        return self.conn.execute("DELETE FROM memory_collections WHERE name = ?",
                                 (name,)).rowcount == 1


class MemoryStore:
    """One project's memories, history, vectors, links, contradictions and settings.

    Every write transaction is serial (``transaction(serial=True)``): one writer at a time per
    project, which SQLite's file gives anyway and the PostgreSQL twin asks for, so a write's
    reads (an expected ``updated_at``, a lease's owner) hold until it commits."""

    writer = Writer
    TAGS = "json_each(m.tags)"  # a record's tags as rows with a ``value`` column
    LOCAL_ANN = True  # the ANN leg's files live beside this store's file (plugins.memory.ann)

    def __init__(self, db):
        self.db = db
        self.fts = self.has_fts()
        self._counts: dict[str, int] = {}
        self._counts_total = 0
        self._counts_at = float("-inf")

    def has_fts(self) -> bool:
        """Whether this SQLite has FTS5 (else keyword search scans with LIKE)."""
        return self.db.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'"
                                    ).fetchone() is not None

    # -- writes (each one transaction: change + event + stamp) ------------------------------

    @contextmanager
    def writing(self) -> Iterator[Writer]:
        """One write transaction; the version stamp moves when a record changed."""
        with self.db.transaction(serial=True) as conn:
            writer = self.writer(conn)
            yield writer
            if writer.records_changed:
                conn.execute("UPDATE memory_meta SET value = value + 1 WHERE key = 'version'")

    def exists(self, ids: Iterable[str], conn=None) -> set[str]:
        ids = list(ids)
        found: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = (conn or self.db.conn).execute(
                f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            found.update(r[0] for r in rows)
        return found

    def create(self, rec: dict[str, Any], content_sha: str, actor: str | None) -> bool:
        """Insert ``rec`` with its ``created`` event; False when the id is taken."""
        try:
            with self.writing() as w:
                w.create([(rec, content_sha, actor)])
        except IdTaken:
            return False
        return True

    def update(self, rec: dict[str, Any], content_sha: str, *, kind: str, actor: str | None,
               changes: dict[str, Any], note: str | None = None,
               expect_updated_at: str | None = None) -> bool:
        """Write ``rec`` over the stored row; False when ``expect_updated_at`` no longer holds."""
        with self.writing() as w:
            return w.update(rec, content_sha, kind=kind, actor=actor, changes=changes, note=note,
                            expect_updated_at=expect_updated_at)

    def apply_batch(self, ops: list[tuple[str, dict[str, Any], str | None, dict[str, Any],
                                          str | None]], at: str) -> None:
        """:meth:`Writer.apply` in a transaction of its own."""
        with self.writing() as w:
            w.apply(ops, at)

    def import_lines(self, lines: list[tuple[dict[str, Any], str, list[dict[str, Any]],
                                             list[dict[str, Any]], list[dict[str, Any]]]],
                     overwrite: bool, actor: Callable[[dict[str, Any]], str],
                     signed: bool = False) -> tuple[int, int, int]:
        """Restore exported ``(record, content_sha, history, links, contradictions)``; returns
        (created, overwritten, skipped). Links and contradictions go in after every record, so
        they may point forward; a pair whose older record is in neither the import nor the
        store is left out, as a link to a missing record is.

        A record overwritten into something else says so in its history — an ``imported``
        event with the fields it changed (by ``actor(record)``), ``unlinked`` for each link of
        its that the line does not hold (on both ends) — and is stamped with the import's
        time, taken in its transaction, so its history explains it in order and an
        ``If-Match`` read before does not hold after. ``signed``: every record written gets
        that ``imported`` event (server mode — the events before it are only what the file
        says, whatever actors it names, and the history must show who brought them)."""
        created = overwritten = skipped = 0
        with self.writing() as w:
            at = now_iso()
            imported = [rec["id"] for rec, *_ in lines]
            taken = self.exists(imported, w.conn)
            # an overwritten record is deleted and inserted again: what other records hold
            # about it — their links to it, the contradictions it is in — would go with it, so
            # it is read first and put back; a pair its line holds too is the line's
            links, kept = self._held_about(w.conn, taken if overwrite else set(), set(imported))
            # and each one's own links, read before any is deleted: a delete takes the links
            # to it along, so a line after its target's would no longer see them
            had = {mid: w.outgoing(mid) for mid in (taken if overwrite else ())}
            found: list[dict[str, Any]] = []
            for rec, sha, history, out, contradictions in lines:
                if rec["id"] in taken:
                    if not overwrite:
                        skipped += 1
                        continue
                    was = w.get(rec["id"])
                    w.conn.execute("DELETE FROM memories WHERE id = ?", (rec["id"],))
                    overwritten += 1
                    changes = {f: [was[f], rec[f]] for f in rec
                               if f in was and f not in UNCOMPARED and rec[f] != was[f]}
                    dropped = [lk for lk in had[rec["id"]] if not any(
                        (lk["type"], lk["target"]) == (x["type"], x["target"]) for x in out)]
                    if changes or dropped:
                        rec = {**rec, "updated_at": times.after(was["updated_at"], at)}
                else:
                    created += 1
                    changes, dropped = {}, []
                w.insert([(rec, sha)])
                for ev in history:
                    w.event(rec["id"], ev["at"], ev["kind"], ev["actor"], ev["changes"],
                            ev["note"], event_id=ev["id"])
                if changes or signed:
                    w.event(rec["id"], at, "imported", actor(rec), changes,
                            ("overwritten" if rec["id"] in taken else "created")
                            + " by an import" + (f"; the {len(history)} event(s) before this "
                                                 "one are the file's" if signed else ""))
                for lk in dropped:
                    for end in (rec["id"], lk["target"]):
                        w.event(end, at, "unlinked", actor(rec), {"link": {
                            k: lk[k] for k in ("source", "target", "type")}},
                            "overwritten by an import")
                links += out
                found += contradictions
            present = self.exists({lk["target"] for lk in links} | {c["a"] for c in found},
                                  w.conn)
            for lk in links:
                if lk["target"] in present:
                    w.link(lk)
            for row in [c for c in found if c["a"] in present] + kept:
                w.contradiction(row)
        return created, overwritten, skipped

    @staticmethod
    def _held_about(conn, ids: set[str], imported: set[str]
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(links to any of ids from records the import does not bring, contradictions any
        of ids is in)``; the links of an imported record are its export line's."""
        links: list[dict[str, Any]] = []
        found: list[dict[str, Any]] = []
        chunks = [sorted(ids)[i:i + 500] for i in range(0, len(ids), 500)]
        for chunk in chunks:
            marks = ",".join("?" * len(chunk))
            links += [link_of(r) for r in conn.execute(
                f"SELECT * FROM memory_links WHERE target IN ({marks})", chunk)
                if r["source"] not in imported]
            found += [contradiction_of(r) for r in conn.execute(
                f"SELECT * FROM memory_contradictions WHERE a IN ({marks}) OR b IN ({marks})",
                chunk + chunk)]
        unique = {c["id"]: c for c in found}  # a pair across two chunks is read twice
        return links, list(unique.values())

    def touch(self, recalls: dict[str, int], at: str) -> None:
        """Recalls: ``{id: times}`` returned by searches up to ``at``. Moves only the access
        columns (no event, no version: ranking reads them per search, the vector cache not)."""
        if recalls:
            with self.db.transaction(serial=True) as conn:
                conn.executemany("UPDATE memories SET last_accessed_at = ?, access_count = "
                                 "access_count + ? WHERE id = ?",
                                 [(at, n, mid) for mid, n in recalls.items()])

    # -- reads -----------------------------------------------------------------------------

    def get(self, memory_id: str) -> dict[str, Any] | None:
        row = self.db.conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?",
                                   (memory_id,)).fetchone()
        return record_of(row) if row else None

    def get_many(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        return records_by_id(self.db.conn, ids)

    @classmethod
    def _where(cls, f: dict[str, Any], today: str) -> tuple[list[str], dict[str, Any]]:
        """SQL conditions for the list/search filters (see models.Filters), and ``exclude``:
        a record left out (the one a duplicate hint is for)."""
        where, args = [], {"today": today}
        if f.get("exclude"):
            where.append("m.id != :exclude")
            args["exclude"] = f["exclude"]
        if f.get("status") and f["status"] != "ALL":
            where.append(f"{EFFECTIVE} = :status")
            args["status"] = f["status"]
        if f.get("file"):
            keys = [f"file{i}" for i in range(len(f["file"]))]
            where.append("m.id IN (SELECT memory_id FROM memory_files WHERE path IN "
                         f"({', '.join(':' + k for k in keys)}))")
            args.update(zip(keys, f["file"]))
        if f.get("tag"):
            keys = [f"tag{i}" for i in range(len(f["tag"]))]
            where.append(f"EXISTS (SELECT 1 FROM {cls.TAGS} WHERE value IN "
                         f"({', '.join(':' + k for k in keys)}))")
            args.update(zip(keys, f["tag"]))
        if f.get("kind"):
            keys = [f"kind{i}" for i in range(len(f["kind"]))]
            where.append(f"m.kind IN ({', '.join(':' + k for k in keys)})")
            args.update(zip(keys, f["kind"]))
        for name, column in (("type", "decision_type"), ("author", "author"), ("agent", "agent"),
                             ("session_id", "session_id")):
            if f.get(name) is not None:
                where.append(f"m.{column} = :{name}")
                args[name] = f[name]
        if f.get("created_after"):
            where.append("substr(m.created_at, 1, 10) >= :created_after")
            args["created_after"] = str(f["created_after"])
        if f.get("created_before"):
            where.append("substr(m.created_at, 1, 10) <= :created_before")
            args["created_before"] = str(f["created_before"])
        if f.get("min_confidence") is not None:
            where.append("m.confidence >= :min_confidence")
            args["min_confidence"] = f["min_confidence"]
        return where, args

    def list(self, filters: dict[str, Any], today: str, limit: int,
             before: tuple[str, str] | None) -> list[dict[str, Any]]:
        """Newest first; ``before`` is the (created_at, id) of the previous page's last row."""
        where, args = self._where(filters, today)
        if before:
            where.append("(m.created_at, m.id) < (:b_at, :b_id)")
            args.update(b_at=before[0], b_id=before[1])
        sql = (f"SELECT {COLUMNS} FROM memories m {'WHERE ' + ' AND '.join(where) if where else ''} "
               "ORDER BY m.created_at DESC, m.id DESC LIMIT :limit")
        args["limit"] = limit
        return [record_of(r) for r in self.db.conn.execute(sql, args)]

    def filter_ids(self, filters: dict[str, Any], today: str,
                   among: list[str] | None = None) -> set[str]:
        """Ids of the records passing ``filters`` (only those ``among`` these, if given)."""
        where, args = self._where(filters, today)
        if among is not None:
            where.append(f"m.id IN ({', '.join(f':id{i}' for i in range(len(among)))})")
            args.update({f"id{i}": mid for i, mid in enumerate(among)})
        sql = f"SELECT m.id FROM memories m {'WHERE ' + ' AND '.join(where) if where else ''}"
        return {r[0] for r in self.db.conn.execute(sql, args)}

    def keyword(self, match: str, words: list[str], filters: dict[str, Any], today: str,
                limit: int, full: bool = True, pool: int | None = None
                ) -> list[tuple[dict[str, Any], float]]:
        """Records matching an FTS5 expression, best first, scored ``-bm25``; without FTS5 a
        LIKE scan ranked by how many of ``words`` each record contains. ``full=False`` returns
        only ``{id, confidence}`` per hit (a fusion pool needs no more). ``pool`` ranks only
        the best ``pool`` matches before the filters apply: cheap and approximate, for hints."""
        columns = COLUMNS if full else "m.id, m.confidence"
        where, args = self._where(filters, today)
        args["limit"] = limit
        extra = "".join(f" AND {w}" for w in where)
        if self.fts and pool:
            args.update(match=match, pool=pool)
            sql = (f"WITH top AS (SELECT rowid, bm25(memories_fts) AS r FROM memories_fts "
                   f"WHERE memories_fts MATCH :match ORDER BY r LIMIT :pool) "
                   f"SELECT {columns}, -top.r AS score FROM top JOIN memories m ON m.rowid = top.rowid"
                   f" WHERE 1{extra} ORDER BY top.r LIMIT :limit")
        elif self.fts:
            args["match"] = match
            sql = (f"SELECT {columns}, -bm25(memories_fts) AS score FROM memories_fts "
                   f"JOIN memories m ON m.rowid = memories_fts.rowid "
                   f"WHERE memories_fts MATCH :match{extra} ORDER BY bm25(memories_fts) LIMIT :limit")
        else:
            hits = []
            for i, word in enumerate(words):
                args[f"w{i}"] = f"%{word}%"
                hits.append(f"(m.keyword_title || ' ' || m.keyword_body LIKE :w{i})")
            if not hits:
                return []
            sql = (f"SELECT {columns}, ({' + '.join(hits)}) AS score FROM memories m "
                   f"WHERE score > 0{extra} ORDER BY score DESC, m.created_at DESC LIMIT :limit")
        try:
            rows = self.db.conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError:  # an FTS expression SQLite refuses matches nothing
            return []
        if not full:
            return [({"id": r["id"], "confidence": r["confidence"]}, float(r["score"])) for r in rows]
        return [(record_of(r), float(r["score"])) for r in rows]

    def texts(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """``{id: (title, body)}``: the text the keyword leg indexes, body being the rationale,
        evidence and tags (lists as their JSON text)."""
        if not ids:
            return {}
        rows = self.db.conn.execute(
            "SELECT id, title, rationale || ' ' || evidence || ' ' || tags FROM memories "
            f"WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {r[0]: (r[1], r[2]) for r in rows}

    def size_estimate(self) -> int:
        """How many records, from the highest rowid: cheap, and never below the truth."""
        return self.db.conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM memories").fetchone()[0]

    def doc_counts(self, words: list[str], total: int) -> dict[str, int]:
        """``{word: records holding it}``, FTS5's tokenizer and stemmer deciding what
        "holding" means. Kept per process until ``COUNTS_TTL_S`` passes or the store (of
        ``total`` records now) grows or shrinks by a quarter: they only choose which words a
        keyword query keeps, and counting a common word walks its whole posting list."""
        if not self.fts:
            return {w: 0 for w in words}
        now = time.monotonic()
        if (now - self._counts_at > COUNTS_TTL_S or len(self._counts) > COUNTS_MAX
                or abs(total - self._counts_total) > self._counts_total / 4):
            self._counts, self._counts_total, self._counts_at = {}, total, now
        counts = self._counts
        for w in words:
            if w not in counts:
                counts[w] = self.doc_count(w)
        return {w: counts[w] for w in words}

    def doc_count(self, word: str, prefix: bool = False) -> int:
        """Records holding ``word`` (``prefix``: a word it begins), uncached."""
        try:
            return self.db.conn.execute(
                "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?",
                (f'"{word}"' + ("*" if prefix else ""),)).fetchone()[0]
        except sqlite3.OperationalError:  # a word the tokenizer makes nothing of
            return 0

    def prefix_counts(self, words: list[str], total: int) -> dict[str, int]:
        """``{word: records holding a word it begins}`` (what a keyword query's ``"w"*``
        matches), cached beside :meth:`doc_counts`'s counts."""
        self.doc_counts([], total)  # starts the shared cache over when it is due
        counts = self._counts
        for w in words:
            if w + "*" not in counts:
                counts[w + "*"] = self.doc_count(w, prefix=True)
        return {w: counts[w + "*"] for w in words}

    def event_owners(self, ids: list[str]) -> dict[str, str]:
        """``{event id: its memory}`` for the events of these ids that exist."""
        found: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = self.db.conn.execute("SELECT id, memory_id FROM memory_events WHERE id IN "
                                        f"({','.join('?' * len(chunk))})", chunk).fetchall()
            found.update((row[0], row[1]) for row in rows)
        return found

    def history(self, memory_id: str, limit: int, after: int | None) -> list[tuple[int, dict]]:
        rows = self.db.conn.execute(
            "SELECT * FROM memory_events WHERE memory_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (memory_id, after or 0, limit)).fetchall()
        return [(r["seq"], event_of(r)) for r in rows]

    def export(self, batch: int = 500) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]],
                                                          list[dict[str, Any]],
                                                          list[dict[str, Any]]]]:
        """Every record (oldest first) with its history, the links it is the source of and
        the contradictions it is the newer record of, read page by page."""
        last = ("", "")
        conn = self.db.conn
        while True:
            rows = conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE (m.created_at, m.id) > "
                                "(?, ?) ORDER BY m.created_at, m.id LIMIT ?", (*last, batch)).fetchall()
            if not rows:
                return
            ids = [r["id"] for r in rows]
            events: dict[str, list] = {i: [] for i in ids}
            for ev in conn.execute("SELECT * FROM memory_events WHERE memory_id IN "
                                   f"({','.join('?' * len(ids))}) ORDER BY seq", ids):
                events[ev["memory_id"]].append(event_of(ev))
            links = self.links_from(ids)
            found: dict[str, list] = {i: [] for i in ids}
            for c in conn.execute("SELECT * FROM memory_contradictions WHERE b IN "
                                  f"({','.join('?' * len(ids))}) ORDER BY detected_at, id", ids):
                found[c["b"]].append(contradiction_of(c))
            for r in rows:
                yield record_of(r), events[r["id"]], links[r["id"]], found[r["id"]]
            last = (rows[-1]["created_at"], rows[-1]["id"])

    def files_context(self, paths: list[str], today: str) -> list[dict[str, Any]]:
        """Effectively ACTIVE records touching any of ``paths``."""
        if not paths:
            return []
        rows = self.db.conn.execute(
            f"SELECT DISTINCT {COLUMNS} FROM memory_files f JOIN memories m ON m.id = f.memory_id "
            f"WHERE f.path IN ({','.join('?' * len(paths))}) AND m.status = 'ACTIVE' "
            "AND (m.review_by IS NULL OR m.review_by >= ?)", (*paths, today)).fetchall()
        return [record_of(r) for r in rows]

    def active_to_check(self, today: str) -> list[dict[str, Any]]:
        """Stored-ACTIVE records, each with whether its review_by has passed."""
        rows = self.db.conn.execute(f"SELECT {COLUMNS}, (m.review_by IS NOT NULL AND "
                                    "m.review_by < ?) AS overdue FROM memories m "
                                    "WHERE m.status = 'ACTIVE'", (today,)).fetchall()
        return [{**record_of(r), "overdue": bool(r["overdue"])} for r in rows]

    def decay_inputs(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """What strength is computed from, for ``ids`` (ranking's candidates)."""
        if not ids:
            return {}
        rows = self.db.conn.execute(
            "SELECT id, kind, importance, pinned, updated_at, last_accessed_at, access_count "
            f"FROM memories WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {r["id"]: {**dict(r), "pinned": bool(r["pinned"])} for r in rows}

    def retained(self) -> list[dict[str, Any]]:
        """Records a decay sweep looks at: stored ACTIVE or STALE, not pinned."""
        rows = self.db.conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.status IN "
                                    "('ACTIVE', 'STALE') AND m.pinned = 0 ORDER BY m.id")
        return [record_of(r) for r in rows]

    def active(self, kinds: list[str], today: str) -> list[dict[str, Any]]:
        """Effectively ACTIVE records of ``kinds`` (every kind when empty), oldest first."""
        where, args = self._where({"status": "ACTIVE", "kind": kinds}, today)
        rows = self.db.conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE {' AND '.join(where)}"
                                    " ORDER BY m.created_at, m.id", args)
        return [record_of(r) for r in rows]

    def sharing(self, files: list[str], tags: list[str], today: str, limit: int,
                exclude: str) -> list[dict[str, Any]]:
        """Effectively ACTIVE records sharing a file or a tag with a record, newest first."""
        if not files and not tags:
            return []
        where, args = self._where({"status": "ACTIVE"}, today)
        either = []
        if files:
            either.append(f"m.id IN (SELECT memory_id FROM memory_files WHERE path IN "
                          f"({', '.join(f':f{i}' for i in range(len(files)))}))")
            args.update({f"f{i}": p for i, p in enumerate(files)})
        if tags:
            either.append(f"EXISTS (SELECT 1 FROM {self.TAGS} WHERE value IN "
                          f"({', '.join(f':t{i}' for i in range(len(tags)))}))")
            args.update({f"t{i}": t for i, t in enumerate(tags)})
        args.update(exclude=exclude, limit=limit)
        rows = self.db.conn.execute(
            f"SELECT {COLUMNS} FROM memories m WHERE {' AND '.join(where)} AND m.id != :exclude "
            f"AND ({' OR '.join(either)}) ORDER BY m.created_at DESC LIMIT :limit", args)
        return [record_of(r) for r in rows]

    def tag_counts(self, today: str, status: str) -> list[tuple[str, int]]:
        """``[(tag, records)]`` over records of effective ``status`` (ALL: every record)."""
        where, args = self._where({"status": status}, today)
        rows = self.db.conn.execute(
            f"SELECT t.value AS tag, COUNT(*) AS n FROM memories m, {self.TAGS} t "
            f"{'WHERE ' + ' AND '.join(where) if where else ''} GROUP BY t.value "
            "ORDER BY n DESC, t.value", args)
        return [(r["tag"], r["n"]) for r in rows]

    def stats(self, today: str, model_id: str | None) -> dict[str, Any]:
        """Counts by kind, effective status, author, agent and tag; embedded/pending vectors."""
        conn, args = self.db.conn, {"today": today}
        out: dict[str, Any] = {"total": conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]}
        for name, expr in (("by_kind", "m.kind"), ("by_status", EFFECTIVE),
                           ("by_author", "m.author"), ("by_agent", "m.agent")):
            out[name] = {r[0]: r[1] for r in conn.execute(
                f"SELECT {expr}, COUNT(*) FROM memories m WHERE {expr} IS NOT NULL GROUP BY 1 "
                "ORDER BY 1", args)}
        out["by_tag"] = dict(self.tag_counts(today, "ALL"))
        embedded = 0 if model_id is None else conn.execute(
            "SELECT COUNT(*) FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.model_id = ? AND v.content_sha = m.content_sha", (model_id,)).fetchone()[0]
        out["vectors"] = {"model_id": model_id, "embedded": embedded,
                          "pending": out["total"] - embedded}
        return out

    # -- links, contradictions, config, collections ---------------------------------------

    def links(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """Every link from or to any of ``ids``."""
        ids = list(ids)
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.conn.execute(
            f"SELECT * FROM memory_links WHERE source IN ({marks}) UNION "
            f"SELECT * FROM memory_links WHERE target IN ({marks}) ORDER BY created_at, source",
            (*ids, *ids))
        return [link_of(r) for r in rows]

    def links_from(self, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """``{id: links it is the source of}`` (what an export line carries)."""
        out: dict[str, list] = {i: [] for i in ids}
        if ids:
            for r in self.db.conn.execute(
                    f"SELECT * FROM memory_links WHERE source IN ({','.join('?' * len(ids))}) "
                    "ORDER BY created_at, type, target", ids):
                out[r["source"]].append(link_of(r))
        return out

    def contradiction(self, cid: str) -> dict[str, Any] | None:
        row = self.db.conn.execute("SELECT * FROM memory_contradictions WHERE id = ?",
                                   (cid,)).fetchone()
        return contradiction_of(row) if row else None

    def contradiction_between(self, a: str, b: str) -> dict[str, Any] | None:
        row = self.db.conn.execute("SELECT * FROM memory_contradictions WHERE a = ? AND b = ?",
                                   (a, b)).fetchone()
        return contradiction_of(row) if row else None

    def contradictions(self, status: str, memory_id: str | None, limit: int,
                       before: tuple[str, str] | None) -> list[dict[str, Any]]:
        """Newest first; ``before`` is the (detected_at, id) of the previous page's last row."""
        where, args = [], []
        if status != "all":
            where.append("status = ?")
            args.append(status)
        if memory_id is not None:
            where.append("(a = ? OR b = ?)")
            args += [memory_id, memory_id]
        if before:
            where.append("(detected_at, id) < (?, ?)")
            args += list(before)
        rows = self.db.conn.execute(
            f"SELECT * FROM memory_contradictions {'WHERE ' + ' AND '.join(where) if where else ''}"
            " ORDER BY detected_at DESC, id DESC LIMIT ?", (*args, limit))
        return [contradiction_of(r) for r in rows]

    def config(self, name: str) -> dict[str, Any] | None:
        row = self.db.conn.execute("SELECT value FROM memory_config WHERE name = ?",
                                   (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def collection(self, name: str) -> dict[str, Any] | None:
        row = self.db.conn.execute("SELECT * FROM memory_collections WHERE name = ?",
                                   (name,)).fetchone()
        return {**dict(row), "filters": json.loads(row["filters"])} if row else None

    def collections(self) -> list[dict[str, Any]]:
        return [{**dict(r), "filters": json.loads(r["filters"])} for r in
                self.db.conn.execute("SELECT * FROM memory_collections ORDER BY name")]

    # -- vectors ---------------------------------------------------------------------------

    def version(self) -> int:
        return self.db.conn.execute("SELECT value FROM memory_meta WHERE key = 'version'"
                                    ).fetchone()[0]

    def missing_vectors(self, model_id: str, limit: int | None = None,
                        passages_over: int | None = None
                        ) -> list[tuple[str, str, str, str]]:
        """``(id, title, rationale, content_sha)`` of records whose vectors are absent, stale
        or of another model, or (``passages_over`` set) whose rationale is longer than that
        and who have only their own vector (plugins.memory.passages)."""
        rows = self.db.conn.execute(
            "SELECT m.id, m.title, m.rationale, m.content_sha FROM memories m "
            "LEFT JOIN memory_vectors v ON v.memory_id = m.id "
            "WHERE v.memory_id IS NULL OR v.model_id != ? OR v.content_sha != m.content_sha "
            "OR (? AND length(m.rationale) > ? AND length(v.vector) = v.dim * 4)"
            + ("" if limit is None else f" LIMIT {int(limit)}"),
            (model_id, passages_over is not None, passages_over or 0)).fetchall()
        return [tuple(r) for r in rows]

    # a vector another process stored meanwhile for the same text, model and shape stays:
    # written again, it would move to a new rowid, past the ANN index's watermark (ann.py)
    PUT_VECTOR = ("INSERT OR REPLACE INTO memory_vectors (memory_id, model_id, dim, vector, "
                  "content_sha) SELECT id, :model, :dim, :blob, content_sha FROM memories m "
                  "WHERE id = :id AND content_sha = :sha AND NOT EXISTS (SELECT 1 FROM "
                  "memory_vectors v WHERE v.memory_id = m.id AND v.model_id = :model AND "
                  "v.content_sha = :sha AND length(v.vector) = length(:blob))")

    def vector_params(self, model_id: str, dim: int, blob: bytes, memory_id: str, sha: str
                      ) -> dict[str, Any]:
        return {"model": model_id, "dim": dim, "blob": blob, "id": memory_id, "sha": sha}

    def put_vectors(self, model_id: str, dim: int,
                    rows: list[tuple[str, bytes, str]]) -> int:
        """Store vectors; one whose record changed or vanished meanwhile, or that is already
        stored, is skipped."""
        with self.db.transaction(serial=True) as conn:
            n = 0
            for memory_id, blob, sha in rows:
                n += conn.execute(self.PUT_VECTOR, self.vector_params(
                    model_id, dim, blob, memory_id, sha)).rowcount
            if n:
                conn.execute("UPDATE memory_meta SET value = value + 1 WHERE key = 'version'")
        return n

    def vectors(self, model_id: str) -> list[sqlite3.Row]:
        """Current vectors of ``model_id`` (a blob of one or more: the record's own, then its
        passages') with what filtering needs (status, review_by, confidence, kind) and what
        orders a session (session_id, created_at)."""
        return self.db.conn.execute(
            f"SELECT {VECTOR_COLUMNS} FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.model_id = ? AND v.content_sha = m.content_sha", (model_id,)).fetchall()

    def vectors_after(self, model_id: str, rowid: int, limit: int = -1) -> list[sqlite3.Row]:
        """Current vectors stored at or after vector row ``rowid`` (``v_rowid``, ascending),
        with :meth:`vectors`'s columns: what an ANN index built up to ``rowid`` lacks."""
        return self.db.conn.execute(
            f"SELECT v.rowid AS v_rowid, {VECTOR_COLUMNS} FROM memory_vectors v "
            "JOIN memories m ON m.id = v.memory_id WHERE v.rowid >= ? AND v.model_id = ? "
            "AND v.content_sha = m.content_sha ORDER BY v.rowid LIMIT ?",
            (rowid, model_id, limit)).fetchall()

    def vectors_of(self, model_id: str, ids: list[str]) -> list[sqlite3.Row]:
        """:meth:`vectors` of these records only (those embedded by ``model_id``)."""
        out: list[sqlite3.Row] = []
        for at in range(0, len(ids), 900):  # under SQLite's bound-parameter limit
            chunk = ids[at:at + 900]
            out += self.db.conn.execute(
                f"SELECT {VECTOR_COLUMNS} FROM memory_vectors v JOIN memories m ON "
                f"m.id = v.memory_id WHERE v.memory_id IN ({','.join('?' * len(chunk))}) "
                "AND v.model_id = ? AND v.content_sha = m.content_sha", (*chunk, model_id))
        return out

    def sessions(self) -> list[tuple[str, str, str]]:
        """``(id, session_id, created_at)`` of every record in a session."""
        return [tuple(r) for r in self.db.conn.execute(
            "SELECT id, session_id, created_at FROM memories WHERE session_id IS NOT NULL")]

    def lease(self, name: str, owner: str, now: float, lease_s: float) -> bool:
        """Take (or renew) the project's lease ``name`` — ``backfill``: one embedder per
        project across processes; ``decay``: one sweep at a time."""
        with self.db.transaction(serial=True) as conn:
            row = conn.execute("SELECT value, owner FROM memory_meta WHERE key = ?",
                               (f"{name}_until",)).fetchone()
            if row["value"] > now and row["owner"] not in (None, owner):
                return False
            conn.execute("UPDATE memory_meta SET value = ?, owner = ? WHERE key = ?",
                         (now + lease_s, owner, f"{name}_until"))
        return True

    def release(self, name: str, owner: str) -> None:
        with self.db.transaction(serial=True) as conn:
            conn.execute("UPDATE memory_meta SET value = 0, owner = NULL "
                         "WHERE key = ? AND owner = ?", (f"{name}_until", owner))

    def sweep_due(self, now: float, period_s: float) -> bool:
        """Whether the daily decay sweep is due: ``period_s`` since the last one. A project
        first seen starts its clock instead (its records are as fresh as they will be)."""
        with self.db.transaction(serial=True) as conn:
            last = conn.execute("SELECT value FROM memory_meta WHERE key = 'decay_last'"
                                ).fetchone()[0]
            if not last:
                conn.execute("UPDATE memory_meta SET value = ? WHERE key = 'decay_last'", (now,))
                return False
            return now - last >= period_s

    def swept(self, now: float) -> None:
        with self.db.transaction(serial=True) as conn:
            conn.execute("UPDATE memory_meta SET value = ? WHERE key = 'decay_last'", (now,))
