"""MemoryStore: the only code that speaks SQL to a project's ``memory.db``.

Every write is one transaction holding the row change, its FTS update (triggers), its
history event and a bump of the version stamp — the stamp tells each process's vector cache
that it must reload. Records go in and come out as plain dicts; lists are JSON text.
"""

from __future__ import annotations

import itertools
import json
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import Any

from neuralmind import statements

LIST_FIELDS = ("files_affected", "evidence", "rejected_alternatives", "dependency_constraints",
               "tags")
FIELDS = ("id", "title", "rationale", "commit_sha", "files_affected", "decision_type",
          "confidence", "status", "author", "agent", "session_id", "review_by", "evidence",
          "rejected_alternatives", "dependency_constraints", "tags", "created_at", "updated_at")
FTS_COLUMNS = ("title", "rationale", "evidence", "tags")

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


MIGRATIONS = [_schema_v1, _fts_automerge]

COUNTS_TTL_S = 60.0  # how long a process trusts its per-word record counts
COUNTS_MAX = 50_000  # words remembered before the counts start over

# The effective status in SQL: an ACTIVE record whose review_by has passed reads as STALE.
EFFECTIVE = ("CASE WHEN m.status = 'ACTIVE' AND m.review_by IS NOT NULL AND m.review_by < :today "
             "THEN 'STALE' ELSE m.status END")
COLUMNS = ", ".join(f"m.{f}" for f in FIELDS)
INSERT = (f"INSERT INTO memories ({', '.join(FIELDS)}, content_sha) "
          f"VALUES ({', '.join('?' * (len(FIELDS) + 1))})")
EVENT = ("INSERT OR IGNORE INTO memory_events (id, memory_id, at, kind, actor, changes, note) "
         "VALUES (?, ?, ?, ?, ?, ?, ?)")


def _json(value: list) -> str:
    return json.dumps(value) if value else "[]"


def new_event_id() -> str:
    return "ev_" + secrets.token_hex(8)


def record_of(row: sqlite3.Row) -> dict[str, Any]:
    rec = {f: row[f] for f in FIELDS}
    for f in LIST_FIELDS:
        rec[f] = json.loads(rec[f])
    return rec


def event_of(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "at": row["at"], "kind": row["kind"], "actor": row["actor"],
            "changes": json.loads(row["changes"]), "note": row["note"]}


class MemoryStore:
    """One project's memories, history and vectors."""

    def __init__(self, db):
        self.db = db
        self.fts = db.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'"
                                   ).fetchone() is not None
        self._counts: dict[str, int] = {}
        self._counts_total = 0
        self._counts_at = float("-inf")

    # -- writes (each one transaction: change + event + stamp) ------------------------------

    @staticmethod
    def _row(rec: dict[str, Any], content_sha: str) -> tuple:
        return (*(_json(rec[f]) if f in LIST_FIELDS else rec[f] for f in FIELDS), content_sha)

    @classmethod
    def _insert_many(cls, conn, recs: list[tuple[dict[str, Any], str]]) -> None:
        conn.executemany(INSERT, [cls._row(rec, sha) for rec, sha in recs])
        files = [(p, rec["id"]) for rec, _ in recs for p in rec["files_affected"]]
        if files:
            conn.executemany("INSERT OR IGNORE INTO memory_files (path, memory_id) VALUES (?, ?)",
                             files)

    @classmethod
    def _insert(cls, conn, rec: dict[str, Any], content_sha: str) -> None:
        cls._insert_many(conn, [(rec, content_sha)])

    @staticmethod
    def _event(conn, memory_id: str, at: str, kind: str, actor: str | None,
               changes: dict | None = None, note: str | None = None,
               event_id: str | None = None) -> None:
        conn.execute(EVENT, (event_id or new_event_id(), memory_id, at, kind, actor,
                             json.dumps(changes, default=str) if changes else "{}", note))

    @staticmethod
    def _bump(conn) -> None:
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
        with self.db.transaction() as conn:
            try:
                self._insert(conn, rec, content_sha)
            except sqlite3.IntegrityError:
                return False
            self._event(conn, rec["id"], rec["created_at"], "created", actor)
            self._bump(conn)
        return True

    def update(self, rec: dict[str, Any], content_sha: str, *, kind: str, actor: str | None,
               changes: dict[str, Any], note: str | None = None,
               expect_updated_at: str | None = None) -> bool:
        """Write ``rec`` over the stored row; False when ``expect_updated_at`` no longer holds."""
        with self.db.transaction() as conn:
            return self._update(conn, rec, content_sha, kind=kind, actor=actor, changes=changes,
                                note=note, expect_updated_at=expect_updated_at)

    def _update(self, conn, rec, content_sha, *, kind, actor, changes, note=None,
                expect_updated_at=None) -> bool:
        if expect_updated_at is not None:
            row = conn.execute("SELECT updated_at FROM memories WHERE id = ?", (rec["id"],)).fetchone()
            if row is None or row[0] != expect_updated_at:
                return False
        sets = [f for f in FIELDS if f not in ("id", "created_at")]
        values = [json.dumps(rec[f]) if f in LIST_FIELDS else rec[f] for f in sets]
        conn.execute(f"UPDATE memories SET {', '.join(f'{f} = ?' for f in sets)}, content_sha = ? "
                     "WHERE id = ?", (*values, content_sha, rec["id"]))
        if "files_affected" in changes:
            conn.execute("DELETE FROM memory_files WHERE memory_id = ?", (rec["id"],))
            conn.executemany("INSERT OR IGNORE INTO memory_files (path, memory_id) VALUES (?, ?)",
                             [(p, rec["id"]) for p in rec["files_affected"]])
        self._event(conn, rec["id"], rec["updated_at"], kind, actor, changes, note)
        self._bump(conn)
        return True

    def delete(self, memory_id: str, at: str, actor: str | None, title: str) -> bool:
        """Remove the record and its vector; its events stay, closed by a ``deleted`` event."""
        with self.db.transaction() as conn:
            return self._delete(conn, memory_id, at, actor, title)

    def _delete(self, conn, memory_id, at, actor, title) -> bool:
        if conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount == 0:
            return False
        self._event(conn, memory_id, at, "deleted", actor, note=title)
        self._bump(conn)
        return True

    def apply_batch(self, ops: list[tuple[str, dict[str, Any], str | None, dict[str, Any]]],
                    at: str, actor: str | None) -> None:
        """``[(op, record, content_sha, changes)]`` in one transaction (all or nothing)."""
        with self.db.transaction() as conn:
            for i, (op, rec, sha, changes) in enumerate(ops):
                if op == "create" and (i == 0 or ops[i - 1][0] != "create"):
                    run = [(r, s) for _, r, s, _ in itertools.takewhile(
                        lambda o: o[0] == "create", ops[i:])]
                    self._insert_many(conn, run)  # a run of creates: two executemany calls
                    conn.executemany(EVENT, [(new_event_id(), r["id"], at, "created", actor,
                                              "{}", None) for r, _ in run])
                elif op == "create":
                    continue
                elif op == "patch":
                    self._update(conn, rec, sha, kind="amended", actor=actor, changes=changes)
                else:
                    self._delete(conn, rec["id"], at, actor, rec["title"])
            self._bump(conn)

    def import_lines(self, lines: list[tuple[dict[str, Any], str, list[dict[str, Any]]]],
                     overwrite: bool) -> tuple[int, int, int]:
        """Restore exported ``(record, content_sha, history)``; returns (created, overwritten, skipped)."""
        created = overwritten = skipped = 0
        with self.db.transaction() as conn:
            taken = self.exists([rec["id"] for rec, _, _ in lines], conn)
            for rec, sha, history in lines:
                if rec["id"] in taken:
                    if not overwrite:
                        skipped += 1
                        continue
                    conn.execute("DELETE FROM memories WHERE id = ?", (rec["id"],))
                    overwritten += 1
                else:
                    created += 1
                self._insert(conn, rec, sha)
                for ev in history:
                    self._event(conn, rec["id"], ev["at"], ev["kind"], ev["actor"], ev["changes"],
                                ev["note"], event_id=ev["id"])
            self._bump(conn)
        return created, overwritten, skipped

    # -- reads -----------------------------------------------------------------------------

    def get(self, memory_id: str) -> dict[str, Any] | None:
        row = self.db.conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?",
                                   (memory_id,)).fetchone()
        return record_of(row) if row else None

    def get_many(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        rows = self.db.conn.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.id IN "
                                    f"({','.join('?' * len(ids))})", ids)
        return {r["id"]: record_of(r) for r in rows}

    @staticmethod
    def _where(f: dict[str, Any], today: str) -> tuple[list[str], dict[str, Any]]:
        """SQL conditions for the list/search filters (see models.Filters)."""
        where, args = [], {"today": today}
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
            where.append("EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value IN "
                         f"({', '.join(':' + k for k in keys)}))")
            args.update(zip(keys, f["tag"]))
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

    def filter_ids(self, filters: dict[str, Any], today: str) -> set[str]:
        where, args = self._where(filters, today)
        sql = f"SELECT m.id FROM memories m {'WHERE ' + ' AND '.join(where) if where else ''}"
        return {r[0] for r in self.db.conn.execute(sql, args)}

    def keyword(self, match: str, words: list[str], filters: dict[str, Any], today: str,
                limit: int, exclude: str | None = None, full: bool = True,
                pool: int | None = None) -> list[tuple[dict[str, Any], float]]:
        """Records matching an FTS5 expression, best first, scored ``-bm25``; without FTS5 a
        LIKE scan ranked by how many of ``words`` each record contains. ``full=False`` returns
        only ``{id, confidence}`` per hit (a fusion pool needs no more). ``pool`` ranks only
        the best ``pool`` matches before the filters apply: cheap and approximate, for hints."""
        columns = COLUMNS if full else "m.id, m.confidence"
        where, args = self._where(filters, today)
        if exclude:
            where.append("m.id != :exclude")
            args["exclude"] = exclude
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
                hits.append(f"(m.title || ' ' || m.rationale || ' ' || m.evidence || ' ' || m.tags "
                            f"LIKE :w{i})")
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
                try:
                    counts[w] = self.db.conn.execute(
                        "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?",
                        (f'"{w}"',)).fetchone()[0]
                except sqlite3.OperationalError:  # a word the tokenizer makes nothing of
                    counts[w] = 0
        return {w: counts[w] for w in words}

    def history(self, memory_id: str, limit: int, after: int | None) -> list[tuple[int, dict]]:
        rows = self.db.conn.execute(
            "SELECT * FROM memory_events WHERE memory_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (memory_id, after or 0, limit)).fetchall()
        return [(r["seq"], event_of(r)) for r in rows]

    def export(self, batch: int = 500) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Every record (oldest first) with its history, read page by page."""
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
            for r in rows:
                yield record_of(r), events[r["id"]]
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

    # -- vectors ---------------------------------------------------------------------------

    def version(self) -> int:
        return self.db.conn.execute("SELECT value FROM memory_meta WHERE key = 'version'"
                                    ).fetchone()[0]

    def missing_vectors(self, model_id: str, limit: int = -1, passages_over: int | None = None
                        ) -> list[tuple[str, str, str, str]]:
        """``(id, title, rationale, content_sha)`` of records whose vectors are absent, stale
        or of another model, or (``passages_over`` set) whose rationale is longer than that
        and who have only their own vector (plugins.memory.passages)."""
        rows = self.db.conn.execute(
            "SELECT m.id, m.title, m.rationale, m.content_sha FROM memories m "
            "LEFT JOIN memory_vectors v ON v.memory_id = m.id "
            "WHERE v.memory_id IS NULL OR v.model_id != ? OR v.content_sha != m.content_sha "
            "OR (? AND length(m.rationale) > ? AND length(v.vector) = v.dim * 4) LIMIT ?",
            (model_id, passages_over is not None, passages_over or 0, limit)).fetchall()
        return [tuple(r) for r in rows]

    def put_vectors(self, model_id: str, dim: int,
                    rows: list[tuple[str, bytes, str]]) -> int:
        """Store vectors; one whose record changed or vanished meanwhile is skipped."""
        with self.db.transaction() as conn:
            n = 0
            for memory_id, blob, sha in rows:
                n += conn.execute(
                    "INSERT OR REPLACE INTO memory_vectors (memory_id, model_id, dim, vector, "
                    "content_sha) SELECT id, ?, ?, ?, content_sha FROM memories "
                    "WHERE id = ? AND content_sha = ?", (model_id, dim, blob, memory_id, sha)).rowcount
            if n:
                self._bump(conn)
        return n

    def vectors(self, model_id: str) -> list[sqlite3.Row]:
        """Current vectors of ``model_id`` (a blob of one or more: the record's own, then its
        passages') with what filtering needs (status, review_by, confidence) and what orders
        a session (session_id, created_at)."""
        return self.db.conn.execute(
            "SELECT v.memory_id, v.vector, m.status, m.review_by, m.confidence, m.session_id, "
            "m.created_at "
            "FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.model_id = ? AND v.content_sha = m.content_sha", (model_id,)).fetchall()

    def lease_backfill(self, owner: str, now: float, lease_s: float) -> bool:
        """Take the project's backfill lease (one embedder per project across processes)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT value, owner FROM memory_meta WHERE key = 'backfill_until'"
                               ).fetchone()
            if row["value"] > now and row["owner"] not in (None, owner):
                return False
            conn.execute("UPDATE memory_meta SET value = ?, owner = ? WHERE key = 'backfill_until'",
                         (now + lease_s, owner))
        return True

    def release_backfill(self, owner: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE memory_meta SET value = 0, owner = NULL "
                         "WHERE key = 'backfill_until' AND owner = ?", (owner,))
