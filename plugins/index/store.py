"""The index's SQLite (``<state_dir>/index.db``): files, symbol nodes, edges, the FTS5
keyword index, vectors keyed by the hash of the text they embed, ignore rules, and the lock
rows that keep one build and one watcher per project across workers. Only SQL lives here."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

MIGRATIONS = ["""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (
    path TEXT PRIMARY KEY,
    language TEXT NOT NULL,
    file_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    hash TEXT NOT NULL,
    lines INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    indexed_at TEXT NOT NULL
);
CREATE TABLE nodes (
    nid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL REFERENCES files(path) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    qualname TEXT NOT NULL,
    signature TEXT NOT NULL,
    docstring TEXT NOT NULL,
    line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    language TEXT NOT NULL,
    file_type TEXT NOT NULL,
    parent INTEGER,
    whole INTEGER NOT NULL,
    text TEXT NOT NULL,
    embed_hash TEXT
);
CREATE INDEX nodes_by_path ON nodes (path);
CREATE INDEX nodes_by_name ON nodes (name);
CREATE INDEX nodes_by_embed ON nodes (embed_hash);
CREATE TABLE edges (
    src INTEGER NOT NULL REFERENCES nodes(nid) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target TEXT NOT NULL
);
CREATE INDEX edges_by_src ON edges (src);
CREATE INDEX edges_by_target ON edges (kind, target);
CREATE VIRTUAL TABLE nodes_fts USING fts5(label, body, tokenize = 'porter unicode61');
CREATE TABLE vectors (hash TEXT PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE rules (
    id TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    value TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE locks (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    job_id TEXT,
    heartbeat REAL NOT NULL,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT '{}'
);
"""]

NODE_COLUMNS = ("id", "path", "kind", "name", "qualname", "signature", "docstring", "line",
                "end_line", "language", "file_type", "parent", "whole", "text", "embed_hash")


@dataclass
class FileRow:
    path: str
    language: str
    file_type: str
    size: int
    mtime_ns: int
    hash: str
    lines: int
    tokens: int
    nodes: list[dict[str, Any]]  # NODE_COLUMNS + label/body for FTS; parent as list index
    edges: list[tuple[int, str, str]]  # (node index, kind, target)


class IndexStore:
    def __init__(self, db):
        self.db = db

    # -- meta ---------------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self.db.conn.execute("SELECT key, value FROM meta")}

    def set_meta(self, conn, **values: Any) -> None:
        conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                         [(k, str(v)) for k, v in values.items()])

    def version(self) -> int:
        row = self.db.conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        return int(row[0]) if row else 0

    def _bump(self, conn) -> None:
        conn.execute("INSERT INTO meta (key, value) VALUES ('version', '1') ON CONFLICT(key) "
                     "DO UPDATE SET value = CAST(value AS INTEGER) + 1")

    # -- files and nodes ----------------------------------------------------------------------

    def file_states(self) -> dict[str, tuple[int, int, str]]:
        return {r[0]: (r[1], r[2], r[3]) for r in
                self.db.conn.execute("SELECT path, size, mtime_ns, hash FROM files")}

    def apply(self, changed: list[FileRow], deleted: Iterable[str],
              touched: Iterable[tuple[str, int, int]], meta: dict[str, Any], now: str) -> None:
        """One transaction: replace changed files, drop deleted ones, refresh mtimes."""
        with self.db.transaction() as conn:
            for path in [*deleted, *(f.path for f in changed)]:
                self._drop(conn, path)
            for f in changed:
                conn.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (f.path, f.language, f.file_type, f.size, f.mtime_ns, f.hash,
                              f.lines, f.tokens, now))
                nids: list[int] = []
                for node in f.nodes:
                    parent = nids[node["parent"]] if node["parent"] is not None else None
                    cur = conn.execute(
                        f"INSERT INTO nodes ({', '.join(NODE_COLUMNS)}) VALUES "
                        f"({', '.join('?' * len(NODE_COLUMNS))})",
                        [parent if c == "parent" else node[c] for c in NODE_COLUMNS])
                    nids.append(cur.lastrowid)
                    conn.execute("INSERT INTO nodes_fts (rowid, label, body) VALUES (?, ?, ?)",
                                 (cur.lastrowid, node["label"], node["body"]))
                conn.executemany("INSERT INTO edges (src, kind, target) VALUES (?, ?, ?)",
                                 [(nids[i], kind, target) for i, kind, target in f.edges])
            conn.executemany("UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?",
                             [(m, s, p) for p, s, m in touched])
            self.set_meta(conn, **meta)
            self._bump(conn)

    def _drop(self, conn, path: str) -> None:
        conn.execute("DELETE FROM nodes_fts WHERE rowid IN (SELECT nid FROM nodes WHERE path = ?)",
                     (path,))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def purge(self, paths: Iterable[str]) -> int:
        """Remove files (and their nodes) from the index; the files on disk stay."""
        paths = list(paths)
        if not paths:
            return 0
        with self.db.transaction() as conn:
            for path in paths:
                self._drop(conn, path)
            self._bump(conn)
        return len(paths)

    def file(self, path: str):
        return self.db.conn.execute("SELECT * FROM files WHERE path = ?", (path,)).fetchone()

    def files(self) -> list:
        return self.db.conn.execute("SELECT * FROM files ORDER BY path").fetchall()

    def nodes_of(self, path: str) -> list:
        return self.db.conn.execute("SELECT * FROM nodes WHERE path = ? ORDER BY line, nid",
                                    (path,)).fetchall()

    def nodes(self, nids: Iterable[int]) -> dict[int, Any]:
        nids = list(nids)
        if not nids:
            return {}
        marks = ",".join("?" * len(nids))
        rows = self.db.conn.execute(f"SELECT * FROM nodes WHERE nid IN ({marks})", nids).fetchall()
        return {r["nid"]: r for r in rows}

    def node_paths(self) -> dict[int, str]:
        return {r[0]: r[1] for r in self.db.conn.execute("SELECT nid, path FROM nodes")}

    def nodes_by_kind(self, kinds: Iterable[str]) -> list:
        kinds = list(kinds)
        return self.db.conn.execute(
            f"SELECT nid, path, kind, qualname, signature, docstring, line FROM nodes "
            f"WHERE kind IN ({','.join('?' * len(kinds))}) ORDER BY path, line", kinds).fetchall()

    # -- edges --------------------------------------------------------------------------------

    def edges_from(self, nid: int, kind: str) -> list[str]:
        return [r[0] for r in self.db.conn.execute(
            "SELECT target FROM edges WHERE src = ? AND kind = ?", (nid, kind))]

    def callers(self, name: str, limit: int) -> list:
        return self.db.conn.execute(
            "SELECT n.* FROM edges e JOIN nodes n ON n.nid = e.src WHERE e.kind = 'calls' "
            "AND e.target = ? ORDER BY n.path, n.line LIMIT ?", (name, limit)).fetchall()

    def defined(self, names: Iterable[str], limit: int) -> list:
        names = list(names)
        if not names:
            return []
        return self.db.conn.execute(
            f"SELECT * FROM nodes WHERE name IN ({','.join('?' * len(names))}) "
            f"AND kind IN ('function', 'method', 'class') ORDER BY path, line LIMIT ?",
            [*names, limit]).fetchall()

    def import_counts(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self.db.conn.execute(
            "SELECT target, COUNT(*) FROM edges WHERE kind = 'imports' GROUP BY target")}

    # -- keyword ------------------------------------------------------------------------------

    def keyword(self, match: str, limit: int, file_type: str | None) -> list[tuple[int, float]]:
        sql = ("SELECT f.rowid, -bm25(nodes_fts, 4.0, 1.0) AS score FROM nodes_fts f")
        args: list[Any] = [match]
        if file_type:
            sql += " JOIN nodes n ON n.nid = f.rowid WHERE nodes_fts MATCH ? AND n.file_type = ?"
            args.append(file_type)
        else:
            sql += " WHERE nodes_fts MATCH ?"
        sql += " ORDER BY bm25(nodes_fts, 4.0, 1.0) LIMIT ?"
        args.append(limit)
        return [(r[0], r[1]) for r in self.db.conn.execute(sql, args)]

    # -- vectors ------------------------------------------------------------------------------

    def missing_vectors(self, hashes: Iterable[str]) -> set[str]:
        hashes = set(hashes)
        have: set[str] = set()
        items = list(hashes)
        for i in range(0, len(items), 500):
            chunk = items[i:i + 500]
            have.update(r[0] for r in self.db.conn.execute(
                f"SELECT hash FROM vectors WHERE hash IN ({','.join('?' * len(chunk))})", chunk))
        return hashes - have

    def unembedded(self) -> list:
        """Indexed nodes whose vector is missing (built while no model was available)."""
        return self.db.conn.execute(
            "SELECT * FROM nodes WHERE embed_hash IS NOT NULL AND embed_hash NOT IN "
            "(SELECT hash FROM vectors)").fetchall()

    def put_vectors(self, items: list[tuple[str, bytes]]) -> None:
        with self.db.transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO vectors (hash, vec) VALUES (?, ?)", items)

    def forget_vectors(self) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM vectors")
            self._bump(conn)

    def drop_orphan_vectors(self) -> int:
        with self.db.transaction() as conn:
            return conn.execute(
                "DELETE FROM vectors WHERE hash NOT IN "
                "(SELECT embed_hash FROM nodes WHERE embed_hash IS NOT NULL)").rowcount

    def vectors(self, file_type: str | None = None) -> list[tuple[int, str, bytes]]:
        return [(r[0], r[1], r[2]) for r in self.db.conn.execute(
            "SELECT n.nid, n.file_type, v.vec FROM nodes n JOIN vectors v ON v.hash = n.embed_hash "
            "ORDER BY n.nid")]

    # -- stats --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        conn = self.db.conn
        per = {}
        for r in conn.execute("SELECT language, COUNT(*), SUM(lines), SUM(tokens) FROM files "
                              "GROUP BY language"):
            per[r[0]] = {"files": r[1], "lines": r[2] or 0, "tokens": r[3] or 0, "nodes": 0,
                         "edges": 0}
        for r in conn.execute("SELECT language, COUNT(*) FROM nodes GROUP BY language"):
            per.setdefault(r[0], {"files": 0, "lines": 0, "tokens": 0, "nodes": 0, "edges": 0})
            per[r[0]]["nodes"] = r[1]
        for r in conn.execute("SELECT n.language, COUNT(*) FROM edges e JOIN nodes n "
                              "ON n.nid = e.src GROUP BY n.language"):
            per[r[0]]["edges"] = r[1]
        kinds = {r[0]: r[1] for r in conn.execute("SELECT kind, COUNT(*) FROM edges GROUP BY kind")}
        vectors = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        return {"languages": per, "edge_kinds": kinds, "vectors": vectors}

    # -- ignore rules -------------------------------------------------------------------------

    def rules(self) -> list:
        return self.db.conn.execute("SELECT * FROM rules ORDER BY created_at, id").fetchall()

    def save_rule(self, rid: str, type_: str, value: str, enabled: bool, reason: str,
                  now: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO rules (id, type, value, enabled, reason, created_at, "
                         "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                         "type = excluded.type, value = excluded.value, "
                         "enabled = excluded.enabled, "
                         "reason = excluded.reason, updated_at = excluded.updated_at",
                         (rid, type_, value, int(enabled), reason, now, now))

    def delete_rule(self, rid: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM rules WHERE id = ?", (rid,)).rowcount > 0

    # -- locks (one build, one watcher per project across workers) ---------------------------

    def acquire(self, name: str, owner: str, pid: int, ttl_s: float,
                alive: Callable[[int], bool], job_id: str | None = None):
        """Take lock ``name``; the holder's row when someone live holds it, else None."""
        now = time.time()
        with self.db.transaction() as conn:
            row = conn.execute("SELECT * FROM locks WHERE name = ?", (name,)).fetchone()
            if row is not None and now - row["heartbeat"] < ttl_s and alive(row["pid"]):
                return row
            conn.execute("INSERT OR REPLACE INTO locks (name, owner, pid, job_id, heartbeat) "
                         "VALUES (?, ?, ?, ?, ?)", (name, owner, pid, job_id, now))
        return None

    def heartbeat(self, name: str, owner: str, **fields: Any) -> bool:
        """Refresh the lock; False when it is no longer ours (taken over after expiry)."""
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self.db.transaction() as conn:
            return conn.execute(
                f"UPDATE locks SET heartbeat = ?{', ' + sets if sets else ''} "
                "WHERE name = ? AND owner = ?",
                (time.time(), *fields.values(), name, owner)).rowcount > 0

    def lock(self, name: str):
        return self.db.conn.execute("SELECT * FROM locks WHERE name = ?", (name,)).fetchone()

    def request_stop(self, name: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("UPDATE locks SET stop_requested = 1 WHERE name = ?",
                                (name,)).rowcount > 0

    def release(self, name: str, owner: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM locks WHERE name = ? AND owner = ?", (name, owner))
