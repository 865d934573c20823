"""The index's SQLite (``<state_dir>/index.db``): files, symbol nodes, edges with what they
resolve to, the FTS5 keyword index, vectors keyed by the hash of the text they embed,
ingested documents, ignore rules, and the lock rows that keep one build and one watcher per
project across workers. Only SQL lives here."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from plugins.index.keywords import node_keywords


def _rekey(conn) -> None:
    """Every keyword row derived again from its node: the keyword text changed form (NFKC,
    Chinese and Japanese as character pairs), and a query in the new form finds no name of a
    row in the old one. The nodes hold all it takes, so no file is read or parsed again."""
    conn.execute("DELETE FROM nodes_fts")
    nodes = conn.execute("SELECT nid, qualname, signature, docstring, text FROM nodes")
    conn.executemany("INSERT INTO nodes_fts (rowid, label, body) VALUES (?, ?, ?)",
                     ((nid, *node_keywords(*rest)) for nid, *rest in nodes))


def _nfc_paths(conn) -> None:
    """A file's path in NFC beside it (only where it differs from ASCII), indexed: a path a
    client types in the other normalisation form is then one lookup, not a scan."""
    conn.execute("ALTER TABLE files ADD COLUMN nfc_path TEXT")
    paths = conn.execute("SELECT path FROM files WHERE path GLOB '*[^ -~]*'").fetchall()
    conn.executemany("UPDATE files SET nfc_path = ? WHERE path = ?",
                     ((nfc_key(path), path) for (path,) in paths))
    conn.execute("CREATE INDEX files_by_nfc_path ON files (nfc_path) WHERE nfc_path IS NOT NULL")


def nfc_key(path: str) -> str | None:
    """What a path is looked up by in the other normalisation form: its NFC, or None for an
    ASCII path (which has no other form)."""
    return None if path.isascii() else unicodedata.normalize("NFC", path)


class Derived(list):
    """The migrations of a file the index derives (``index.db`` from the repository,
    ``usage.db`` from use), carrying what the kernel tells of a damaged one: delete it and
    build again, never restore it from a backup — and what of it a build does not make again."""

    def __init__(self, migrations, *, also: str = ""):
        super().__init__(migrations)
        self.remedy = ("delete it (with the server stopped, and its -wal and -shm), then build "
                       "the project again: the code index is derived from the repository, never "
                       f'restored{also} (docs/operations.md, "Storage")')


MIGRATIONS = Derived(["""
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
""", """
-- the resolved graph: what each edge points at (plugins/index/resolve.py), NULL until linked
ALTER TABLE edges ADD COLUMN ref TEXT;
ALTER TABLE edges ADD COLUMN alias TEXT;
ALTER TABLE edges ADD COLUMN dst INTEGER REFERENCES nodes(nid) ON DELETE SET NULL;
ALTER TABLE edges ADD COLUMN how TEXT;
CREATE INDEX edges_by_dst ON edges (dst);
CREATE INDEX edges_unlinked ON edges (how) WHERE dst IS NULL;
-- documents ingested over the API live beside the repository's files
ALTER TABLE files ADD COLUMN source TEXT NOT NULL DEFAULT 'repo';
CREATE TABLE documents (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    path TEXT NOT NULL UNIQUE,
    content_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    actor TEXT
);
-- files parsed before edges carried references are parsed again by the next build
UPDATE files SET hash = '', mtime_ns = -1;
""", """
-- the build and watch locks are kernel leases now (shared by every server of a team)
DROP TABLE IF EXISTS locks;
""", """
-- each vector's hubness (plugins/index/search.py), NULL until the next build measures it
ALTER TABLE vectors ADD COLUMN hub REAL;
CREATE INDEX vectors_hubless ON vectors (hash) WHERE hub IS NULL;
""", """
-- a one-word search names a definition in any case (plugins/index/search.py named)
CREATE INDEX nodes_by_name_nocase ON nodes (name COLLATE NOCASE);
""", _rekey, _nfc_paths], also=(
    "; but the documents ingested into it (`project ingest`) and the ignore rules added to it "
    "are kept nowhere else: ingest and add them again"))

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
    edges: list[tuple[int, str, str, str, str, int | None]]  # node indexes: src … dst
    source: str = "repo"  # or "ingested" (a document sent to POST …/documents)


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
        """The repository's indexed files (ingested documents are not the walker's)."""
        return {r[0]: (r[1], r[2], r[3]) for r in self.db.conn.execute(
            "SELECT path, size, mtime_ns, hash FROM files WHERE source = 'repo'")}

    def apply(self, changed: list[FileRow], deleted: Iterable[str],
              touched: Iterable[tuple[str, int, int]], meta: dict[str, Any], now: str,
              after: Callable[[Any], None] = lambda conn: None) -> None:
        """One transaction: replace changed files, drop deleted ones, refresh mtimes, then
        ``after(conn)`` (the graph's links) before it commits."""
        with self.db.transaction() as conn:
            for path in [*deleted, *(f.path for f in changed)]:
                self._drop(conn, path)
            for f in changed:
                conn.execute("INSERT INTO files (path, language, file_type, size, mtime_ns, hash, "
                             "lines, tokens, indexed_at, source, nfc_path) VALUES "
                             "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (f.path, f.language, f.file_type, f.size, f.mtime_ns, f.hash,
                              f.lines, f.tokens, now, f.source, nfc_key(f.path)))
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
                conn.executemany(
                    "INSERT INTO edges (src, kind, target, ref, alias, dst, how) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(nids[i], kind, target, ref, alias, None if d is None else nids[d],
                      None if d is None else "exact")
                     for i, kind, target, ref, alias, d in f.edges])
            conn.executemany("UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?",
                             [(m, s, p) for p, s, m in touched])
            after(conn)
            self.set_meta(conn, **meta)
            self._bump(conn)

    def _drop(self, conn, path: str) -> None:
        conn.execute("DELETE FROM nodes_fts WHERE rowid IN (SELECT nid FROM nodes WHERE path = ?)",
                     (path,))
        conn.execute("DELETE FROM nodes WHERE path = ?", (path,))  # even where FKs were off
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

    # -- ingested documents -------------------------------------------------------------------

    def add_document(self, row: FileRow, doc: dict[str, Any] | None, now: str) -> None:
        """The document's nodes and its record (None: it has one), in one transaction."""
        def record(conn) -> None:
            if doc is not None:
                conn.execute("INSERT INTO documents (id, name, path, content_type, size, sha, "
                             "text, created_at, actor) VALUES (:id, :name, :path, :content_type, "
                             ":size, :sha, :text, :created_at, :actor)", doc)
        self.apply([row], [], [], {}, now, after=record)

    def document_record(self, doc_id: str):
        return self.db.conn.execute("SELECT * FROM documents WHERE id = ?", (doc_id,)).fetchone()

    def document_records(self) -> list:
        """Every ingested document, oldest first, with the count of its nodes."""
        return self.db.conn.execute(
            "SELECT d.id, d.name, d.path, d.content_type, d.size, d.sha, d.created_at, d.actor, "
            "(SELECT COUNT(*) FROM nodes n WHERE n.path = d.path) AS nodes FROM documents d "
            "ORDER BY d.created_at, d.id").fetchall()

    def remove_document(self, doc_id: str) -> bool:
        with self.db.transaction() as conn:
            row = conn.execute("SELECT path FROM documents WHERE id = ?", (doc_id,)).fetchone()
            if row is None:
                return False
            self._drop(conn, row[0])
            conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
            self._bump(conn)
        self.drop_orphan_vectors()
        return True

    def file(self, path: str):
        return self.db.conn.execute("SELECT * FROM files WHERE path = ?", (path,)).fetchone()

    def indexed_path(self, path: str) -> str | None:
        """The indexed path of the file ``path`` names: itself, else the one equal to it in
        NFC — macOS names files in NFD and a client types NFC (or the other way round), both
        naming one file. Only paths with a character past ASCII are compared."""
        if self.file(path) is not None:
            return path
        if (key := nfc_key(path)) is None:
            return None
        row = self.db.conn.execute("SELECT path FROM files WHERE nfc_path = ? ORDER BY path "
                                   "LIMIT 1", (key,)).fetchone()
        return row[0] if row else None

    def file_tokens(self, paths: Iterable[str]) -> int:
        """The tokens of these files, each counted once (the whole files an answer drew on)."""
        paths = sorted(set(paths))
        if not paths:
            return 0
        return self.db.conn.execute(
            f"SELECT COALESCE(SUM(tokens), 0) FROM files WHERE path IN "
            f"({','.join('?' * len(paths))})", paths).fetchone()[0]

    def files(self, source: str | None = None) -> list:
        if source is None:
            return self.db.conn.execute("SELECT * FROM files ORDER BY path").fetchall()
        return self.db.conn.execute("SELECT * FROM files WHERE source = ? ORDER BY path",
                                    (source,)).fetchall()

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

    def named(self, qualified: str, file_type: str | None, limit: int
              ) -> list[tuple[int, str]]:
        """``[(node id, qualname)]`` of the definitions (modules, classes, functions, methods)
        called as ``qualified``'s last part — as written, else in any case — those whose
        qualname is ``qualified`` or ends with it first."""
        sql = ("SELECT nid, qualname FROM nodes WHERE name = ?{} AND kind IN "
               "('module', 'class', 'function', 'method')"
               + (" AND file_type = ?" if file_type else "")
               + " ORDER BY (qualname = ? OR substr(qualname, -?) = ?) DESC, path, line LIMIT ?")
        tail = "." + qualified
        args = [qualified.rsplit(".", 1)[-1], *([file_type] if file_type else []), qualified,
                len(tail), tail, limit]
        return (self.db.conn.execute(sql.format(""), args).fetchall()
                or self.db.conn.execute(sql.format(" COLLATE NOCASE"), args).fetchall())

    # -- edges --------------------------------------------------------------------------------

    def callers(self, nid: int) -> list:
        """The nodes whose calls resolve to ``nid`` (the graph's edges, not bare names), each
        once; ``guessed`` is 1 when none of its calls resolved but by a ``name`` guess."""
        return self._calls("e.src", "e.dst", nid)

    def callees(self, nid: int) -> list:
        """The nodes ``nid``'s calls resolve to, each once (``guessed`` as for callers)."""
        return self._calls("e.dst", "e.src", nid)

    def _calls(self, other: str, this: str, nid: int) -> list:
        return self.db.conn.execute(
            f"SELECT n.nid, n.qualname, n.signature, n.path, n.line, "
            f"MIN(e.how != 'exact') AS guessed FROM edges e JOIN nodes n ON n.nid = {other} "
            f"WHERE {this} = ? AND e.kind = 'calls' AND e.dst IS NOT NULL GROUP BY n.nid",
            (nid,)).fetchall()

    def importers(self) -> dict[str, int]:
        """Per file, how many other files hold an import resolved into it: a module named like
        the standard library's, or like a package, is credited with nobody else's imports."""
        return {r[0]: r[1] for r in self.db.conn.execute(
            "SELECT d.path, COUNT(DISTINCT s.path) FROM edges e JOIN nodes s ON s.nid = e.src "
            "JOIN nodes d ON d.nid = e.dst WHERE e.kind = 'imports' AND s.path != d.path "
            "GROUP BY d.path")}

    # -- the resolved graph (plugins/index/graph.py) ------------------------------------------

    def node_tree(self) -> list[tuple[int, str, int | None]]:
        return [(r[0], r[1], r[2]) for r in
                self.db.conn.execute("SELECT nid, path, parent FROM nodes")]

    def resolved_edges(self) -> list[tuple[int, int, str, str]]:
        return [(r[0], r[1], r[2], r[3]) for r in self.db.conn.execute(
            "SELECT src, dst, kind, how FROM edges WHERE dst IS NOT NULL "
            "AND kind IN ('calls', 'imports', 'inherits')")]

    def unresolved(self, nids: Iterable[int], limit: int) -> list:
        """The references of ``nids`` no node answers (other packages, builtins)."""
        nids = list(nids)
        if not nids:
            return []
        return self.db.conn.execute(
            f"SELECT e.kind AS edge_kind, COALESCE(e.ref, e.target) AS ref, n.id, n.qualname, "
            f"n.kind, n.path, n.line FROM edges e JOIN nodes n ON n.nid = e.src WHERE e.src "
            f"IN ({','.join('?' * len(nids))}) AND e.how = 'unresolved' "
            f"AND e.kind IN ('calls', 'imports', 'inherits') ORDER BY n.path, n.line "
            f"LIMIT ?", [*nids, limit]).fetchall()

    def symbols(self, kinds: Iterable[str], language: str) -> list:
        """Nodes of these kinds in one language, each with its file's module name."""
        kinds = list(kinds)
        return self.db.conn.execute(
            f"SELECT n.nid, n.name, n.kind, n.qualname, n.path, m.qualname AS module FROM nodes n "
            f"JOIN nodes m ON m.path = n.path AND m.parent IS NULL WHERE n.kind IN "
            f"({','.join('?' * len(kinds))}) AND n.language = ? ORDER BY n.nid",
            [*kinds, language]).fetchall()

    def call_sites(self) -> list[tuple[str, str]]:
        """``(bare name called, file of the caller)`` of every call edge."""
        return [(r[0], r[1]) for r in self.db.conn.execute(
            "SELECT e.target, n.path FROM edges e JOIN nodes n ON n.nid = e.src "
            "WHERE e.kind = 'calls'")]

    def node_by_id(self, node_id: str):
        return self.db.conn.execute("SELECT * FROM nodes WHERE id = ?", (node_id,)).fetchone()

    def link_counts(self) -> dict[str, int]:
        return {r[0] or "unlinked": r[1] for r in self.db.conn.execute(
            "SELECT how, COUNT(*) FROM edges WHERE kind != 'contains' GROUP BY how")}

    # -- the graph's links (plugins/index/resolve.py), read inside the build's transaction ----

    @staticmethod
    def graph_nodes(conn) -> list:
        return conn.execute("SELECT n.nid, n.path, n.kind, n.name, n.qualname, n.parent, "
                            "n.language FROM nodes n ORDER BY n.nid").fetchall()

    @staticmethod
    def graph_bindings(conn) -> list[tuple[str, str, str]]:
        return [(r[0], r[1], r[2]) for r in conn.execute(
            "SELECT n.path, e.ref, e.alias FROM edges e JOIN nodes n ON n.nid = e.src "
            "WHERE e.kind = 'imports' AND e.alias IS NOT NULL AND e.alias != ''")]

    @staticmethod
    def graph_bases(conn) -> list[tuple[int, int]]:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT src, dst FROM edges WHERE kind = 'inherits' AND dst IS NOT NULL")]

    @staticmethod
    def graph_returns(conn) -> list[tuple[int, str]]:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT src, ref FROM edges WHERE kind = 'returns' AND ref IS NOT NULL")]

    @staticmethod
    def texts_named(conn, name: str) -> list[tuple[str, str]]:
        """``(path, text)`` of the whole-file nodes of files called ``name`` (``go.mod``)."""
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT path, text FROM nodes WHERE parent IS NULL AND (path = ? OR path LIKE ?)",
            (name, f"%/{name}"))]

    @staticmethod
    def edges_to_link(conn, names: set[str] | None, unresolved: bool = False) -> list:
        """Every edge but ``contains`` when ``names`` is None; else new edges, edges whose
        target went away, and unresolved (all of them with ``unresolved``: a file came or
        went) or name-guessed edges that ``names`` may now answer."""
        sql = "SELECT rowid, src, kind, target, ref FROM edges WHERE kind != 'contains'"
        if names is None:
            return conn.execute(sql).fetchall()
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS link_names (name TEXT PRIMARY KEY)")
        conn.execute("DELETE FROM link_names")
        conn.executemany("INSERT OR IGNORE INTO link_names VALUES (?)", [(n,) for n in names])
        return conn.execute(
            sql + " AND (how IS NULL OR (dst IS NULL AND how != 'unresolved') "
            "OR (how = 'unresolved' AND (? OR target IN link_names)) "
            "OR (how = 'name' AND target IN link_names))", (int(unresolved),)).fetchall()

    @staticmethod
    def set_links(conn, updates: list[tuple[int | None, str, int]]) -> None:
        conn.executemany("UPDATE edges SET dst = ?, how = ? WHERE rowid = ?", updates)

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

    def vectors(self) -> list[tuple[int, str, bytes, float | None]]:
        """``(nid, file_type, vector, hubness)`` of every embedded node."""
        return [(r[0], r[1], r[2], r[3]) for r in self.db.conn.execute(
            "SELECT n.nid, n.file_type, v.vec, v.hub FROM nodes n "
            "JOIN vectors v ON v.hash = n.embed_hash ORDER BY n.nid")]

    def hubless(self, every: bool = False) -> list[tuple[str, bytes]]:
        """``(hash, vector)`` of the vectors whose hubness is not measured yet (``every``: all)."""
        return self.db.conn.execute("SELECT hash, vec FROM vectors"
                                    + ("" if every else " WHERE hub IS NULL")).fetchall()

    def reference_vectors(self, limit: int) -> list[bytes]:
        """Up to ``limit`` vectors that nodes use (not a file's earlier version, kept until the
        next whole build), the same ones while the index holds them (ordered by their text's
        hash: a sample that favours no file)."""
        return [r[0] for r in self.db.conn.execute(
            "SELECT vec FROM vectors WHERE hash IN (SELECT embed_hash FROM nodes) "
            "ORDER BY hash LIMIT ?", (limit,))]

    def put_hubs(self, items: Iterable[tuple[float, str]]) -> None:
        """Store ``(hubness, hash)`` pairs; searches load the vectors again."""
        with self.db.transaction() as conn:
            conn.executemany("UPDATE vectors SET hub = ? WHERE hash = ?", items)
            self._bump(conn)

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

    # -- consistency (POST …/validate) ------------------------------------------------------

    def integrity(self) -> str:
        return self.db.conn.execute("PRAGMA quick_check").fetchone()[0]

    def schema_version(self) -> int:
        return self.db.conn.execute("PRAGMA user_version").fetchone()[0]

    def fts_gaps(self) -> tuple[list[int], int]:
        """Nodes without a keyword row, and how many keyword rows have no node."""
        missing = [r[0] for r in self.db.conn.execute(
            "SELECT nid FROM nodes WHERE nid NOT IN (SELECT rowid FROM nodes_fts)")]
        orphans = self.db.conn.execute("SELECT COUNT(*) FROM nodes_fts WHERE rowid NOT IN "
                                       "(SELECT nid FROM nodes)").fetchone()[0]
        return missing, orphans

    def mend_fts(self, rows: list[tuple[int, str, str]]) -> None:
        """Add the missing keyword rows ``(nid, label, body)``; drop those of no node."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM nodes_fts WHERE rowid NOT IN (SELECT nid FROM nodes)")
            conn.executemany("INSERT INTO nodes_fts (rowid, label, body) VALUES (?, ?, ?)", rows)
            self._bump(conn)

    def orphan_vectors(self) -> int:
        return self.db.conn.execute(
            "SELECT COUNT(*) FROM vectors WHERE hash NOT IN (SELECT embed_hash FROM nodes "
            "WHERE embed_hash IS NOT NULL)").fetchone()[0]

    def relink(self, link: Callable[[Any], Any]) -> None:
        """Run ``link(conn)`` (every edge re-resolved) in a transaction of its own."""
        with self.db.transaction() as conn:
            link(conn)
            self._bump(conn)

    def orphan_ingested(self) -> list[str]:
        """Ingested files no document record names, and records whose file is gone."""
        return [r[0] for r in self.db.conn.execute(
            "SELECT path FROM files WHERE source = 'ingested' AND path NOT IN "
            "(SELECT path FROM documents)")]

    def documents_without_file(self) -> list:
        return self.db.conn.execute("SELECT * FROM documents WHERE path NOT IN "
                                    "(SELECT path FROM files)").fetchall()

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
