"""The semantic leg of a large project: an HNSW index (usearch) over its stored vectors.

From ``[memory] ann_min_records`` records on, scanning every vector costs more than the rest
of a search (28 ms at 1M here) and holding them costs each worker 1.5 GB. The index lives
beside the project's store, one folder per model (``memory-ann/<model>/``), one generation per
build: the graph with int8 vectors, each row's record, the records' ids and their session
neighbours. Every worker maps the same files read-only (``Index.restore(view=True)``,
``np.load(mmap_mode="r")``), so their pages are shared, not copied.

One worker at a time builds, under a kernel lease, in a background thread: a full build, then
incremental ones (a copy of the graph plus what was written since) until the appended rows
reach a quarter of the graph, when the next build starts over. A generation is written beside
the last and named in ``CURRENT`` by an atomic rename; each worker moves to it on its next
search. Below ``ann_min_records`` the exact scan of :mod:`plugins.memory.search` answers;
above it, until the first build, every search reads and scores the stored vectors in
batches, keeping none (slow — seconds at 1M — but each worker's memory stays bounded).

A search takes ``ann_fetch × n`` candidates from the graph and from the vectors written since
its build (the *delta*, scored exactly in each worker), then reads the candidates' current
vectors and filter fields from the store and ranks them exactly: scores, filters and
deletions are the store's; only which records are candidates is approximate. When filters
pass too few candidates it asks the graph for more; when they are very selective it scores
every record they allow.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuralmind import log_failure, top_k
from plugins.memory.legs import SemanticLeg, session_neighbours

log = logging.getLogger("neuralmind.memory")

CURRENT = "CURRENT"
BATCH = 10_000  # vectors read and added per step of a build; the lease is renewed between
EXACT_MAX = 20_000  # filters allowing at most this many records are scored at once
MAX_FETCH = 4_096  # the most candidates asked of the graph for one search
FULL_AFTER = 0.25  # appended rows, as a share of the graph's base, that call a full build


def folder(store, model_id: str) -> Path:
    return store.db.path.parent / "memory-ann" / re.sub(r"[^A-Za-z0-9_.-]", "_", model_id)


def decode(values) -> list[str]:
    return [v.decode() for v in values.tolist()]


def usearch_index():
    """usearch's ``Index``, imported after onnxruntime when that is installed: importing
    onnxruntime after usearch (whose ``numkong`` extension brings its own C++ runtime)
    segfaults — usearch 2.26 with this machine's onnxruntime — and a worker may build an
    index before it first embeds."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        pass
    from usearch.index import Index
    return Index


@dataclass
class Snapshot:
    """One generation, mapped read-only: ``record`` maps a graph row (its key) to a record,
    ``ids`` a record to its id, ``prev``/``next`` a record to its session neighbours (-1)."""

    path: Path
    meta: dict[str, Any]
    graph: Any  # usearch.index.Index, a view
    ids: np.ndarray
    record: np.ndarray
    prev: np.ndarray
    next: np.ndarray
    sorter: np.ndarray  # ids' ascending order, for lookups by id

    @classmethod
    def open(cls, path: Path) -> Snapshot:
        Index = usearch_index()

        def array(name: str) -> np.ndarray:
            return np.load(path / f"{name}.npy", mmap_mode="r")

        return cls(path, json.loads((path / "meta.json").read_text()),
                   Index.restore(str(path / "graph.usearch"), view=True), array("ids"),
                   array("record"), array("prev"), array("next"), array("sorter"))

    def search(self, vector: np.ndarray, k: int, expansion: int) -> list[str]:
        """The records of the ``k`` rows nearest ``vector``, nearest first, each once."""
        self.graph.expansion_search = max(expansion, k)
        found = self.graph.search(vector, k)
        recs = self.record[np.asarray(found.keys, np.int64)]
        _, first = np.unique(recs, return_index=True)
        return decode(self.ids[recs[np.sort(first)]])

    def neighbours(self, ids: list[str]) -> list[str]:
        """The session neighbours (before and after) of those ``ids`` the snapshot holds."""
        width = self.ids.dtype.itemsize
        keys = np.array([m.encode() for m in ids if len(m.encode()) <= width],
                        dtype=self.ids.dtype)
        if not len(keys) or not len(self.ids):
            return []
        pos = np.minimum(np.searchsorted(self.ids, keys, sorter=self.sorter), len(self.ids) - 1)
        recs = self.sorter[pos][self.ids[self.sorter[pos]] == keys]
        links = np.concatenate([self.prev[recs], self.next[recs]])
        return decode(self.ids[links[links >= 0]])


def current(root: Path) -> Path | None:
    try:
        return root / (root / CURRENT).read_text().strip()
    except FileNotFoundError:
        return None


def build(store, model_id: str, dim: int, settings, heartbeat: Callable[[], bool] = lambda: True
          ) -> Path | None:
    """Write a new generation of ``store``'s index and name it current: incremental from the
    current one while it allows, else full. None when ``heartbeat()`` says to stop."""
    Index = usearch_index()
    root = folder(store, model_id)
    last = current(root)
    base = Snapshot.open(last) if last is not None else None
    incremental = (base is not None and base.meta["passages"] == settings.passages
                   and base.meta["appended"] <= FULL_AFTER * base.meta["base"])
    if incremental:
        graph = Index.restore(str(last / "graph.usearch"))  # a private copy, to add to
        ids, record = [np.asarray(base.ids)], [np.asarray(base.record)]
        after, appended = base.meta["watermark"], base.meta["appended"]
    else:
        graph = Index(ndim=dim, metric="cos", dtype="i8", connectivity=settings.ann_connectivity,
                      expansion_add=settings.ann_expansion_add)
        ids, record, after, appended = [], [], 0, 0
    rows, records, watermark = len(graph), sum(len(a) for a in ids), after
    while True:
        batch = store.vectors_after(model_id, after, BATCH)
        if not batch:
            break
        size = 4 * dim
        counts = np.array([len(r["vector"]) // size if settings.passages else 1 for r in batch])
        blob = b"".join(r["vector"] if settings.passages else r["vector"][:size] for r in batch)
        vectors = np.frombuffer(blob, np.float32).reshape(-1, dim)
        graph.add(np.arange(rows, rows + len(vectors)), vectors, threads=settings.ann_threads)
        ids.append(np.array([r["memory_id"].encode() for r in batch]))
        record.append(np.repeat(np.arange(records, records + len(batch), dtype=np.int32), counts))
        rows, records = rows + len(vectors), records + len(batch)
        appended += len(vectors) if incremental else 0
        watermark, after = batch[-1]["v_rowid"], batch[-1]["v_rowid"] + 1
        if not heartbeat():
            return None
    all_ids = np.concatenate(ids) if ids else np.zeros(0, "S1")
    prev, nxt = neighbours(store, all_ids)
    gen = root / f"g{time.time_ns()}-{os.getpid()}"
    gen.mkdir(parents=True)
    graph.save(str(gen / "graph.usearch"))
    for name, value in (("ids", all_ids), ("prev", prev), ("next", nxt),
                        ("sorter", np.argsort(all_ids, kind="stable").astype(np.int32)),
                        ("record", np.concatenate(record) if record else np.zeros(0, np.int32))):
        np.save(gen / f"{name}.npy", value)
    (gen / "meta.json").write_text(json.dumps({
        "model_id": model_id, "dim": dim, "rows": rows, "records": records,
        "watermark": watermark, "base": base.meta["base"] if incremental else rows,
        "appended": appended,
        "passages": settings.passages}))
    tmp = root / f"{CURRENT}.{os.getpid()}"
    tmp.write_text(gen.name)
    os.replace(tmp, root / CURRENT)
    for old in root.iterdir():  # keep the last generation: a worker may be opening it
        if old.is_dir() and old.name not in (gen.name, last.name if last else ""):
            shutil.rmtree(old, ignore_errors=True)
    return gen


def neighbours(store, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each record's previous and next record in its session (-1 none), among ``ids``."""
    prev, nxt = np.full(len(ids), -1, np.int32), np.full(len(ids), -1, np.int32)
    sessions = store.sessions()
    if not sessions:
        return prev, nxt
    wanted = {mid.encode() for mid, _, _ in sessions}
    where = {m: i for i, m in enumerate(ids.tolist()) if m in wanted}  # a record's latest row
    held = [s for s in sessions if s[0].encode() in where]
    before, after = session_neighbours([s[1] for s in held], [s[2] for s in held],
                                       np.array([s[0] for s in held], dtype=object))
    at = np.array([where[s[0].encode()] for s in held], dtype=np.int64)
    for out, links in ((prev, before), (nxt, after)):
        out[at[links >= 0]] = at[links[links >= 0]]
    return prev, nxt


class CandidateLeg(SemanticLeg):
    """The semantic leg on the ANN path: an exact index of the candidates alone, which grows
    when the second stage asks about a record outside it (a keyword-only hit)."""

    def __init__(self, fetch: Callable[[list[str]], list], make: Callable[[list], Any],
                 vector: np.ndarray, ids: list[str]):
        self._fetch, self._make, self._vector = fetch, make, vector
        self._by_id: dict[str, Any] = {}
        self._known: set[str] = set()
        super().__init__(None, None, [])
        self._add(ids)

    def _add(self, ids: list[str]) -> None:
        for row in self._fetch(ids):
            self._by_id[row["memory_id"]] = row
        self._known.update(ids)
        self.index = self._make(list(self._by_id.values()))
        self.scores = self.index.scores(self._vector)

    def _rows(self, ids: list[str]):
        missing = [m for m in ids if m not in self._known]
        if missing:
            self._add(missing)
        return super()._rows(ids)

    def best(self, n: int, keep: np.ndarray) -> list[tuple[str, float, float]]:
        index = self.index
        return [(index.ids[i], float(self.scores[i]), float(index.confidence[i]))
                for i in top_k(self.scores, n, keep)]


class AnnIndexes:
    """A process's view of its projects' ANN indexes, and their builder."""

    def __init__(self, settings, kernel, make_index: Callable[[list, int], Any]):
        self.settings = settings
        self.kernel = kernel
        self.make_index = make_index  # rows -> an exact index (search.VectorIndex.from_rows)
        self.owner = f"{os.getpid()}-{id(self):x}"
        self._snapshots: dict[Path, tuple[tuple[int, int], Snapshot]] = {}
        self._deltas: dict[str, tuple[tuple[int, Path], Any]] = {}
        self._building: set[str] = set()
        self._lock = threading.Lock()

    def forget(self, key: str) -> None:
        """Let go of the mapped generations and the delta of the store ``key`` names (its
        project was removed)."""
        root = Path(key).parent / "memory-ann"
        self._deltas.pop(key, None)
        for path in list(self._snapshots):
            if path.parent == root:
                self._snapshots.pop(path, None)

    def covers(self, store) -> bool:
        return (self.settings.ann and store.LOCAL_ANN
                and store.size_estimate() >= self.settings.ann_min_records)

    def snapshot(self, store, model_id: str) -> Snapshot | None:
        """The current generation, opened again when ``CURRENT`` moved."""
        root = folder(store, model_id)
        try:
            stat = os.stat(root / CURRENT)
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_ino)
        found = self._snapshots.get(root)
        if found is None or found[0] != stamp:
            path = current(root)
            try:
                found = self._snapshots[root] = (stamp, Snapshot.open(path))
            except (FileNotFoundError, TypeError):  # pruned under us: the next search retries
                return None
        return found[1]

    def delta(self, store, snap: Snapshot, model_id: str):
        """The exact index of what was embedded since ``snap``'s build, for this version."""
        key, stamp = str(store.db.path), (store.version(), snap.path)
        found = self._deltas.get(key)
        if found is None or found[0] != stamp:
            rows = store.vectors_after(model_id, snap.meta["watermark"])
            found = self._deltas[key] = (stamp, self.make_index(rows, snap.meta["dim"]))
        return found[1]

    def leg(self, store, embedder, vector: np.ndarray, filters: dict[str, Any], today: str,
            n: int, extra: dict[str, Any]) -> SemanticLeg:
        """The ``n`` records nearest ``vector`` that ``filters`` allow (``extra``: those the
        store applies): through the graph; scanned (:meth:`scan`) before the first build, or
        when filters pass too few candidates yet allow too many records to score at once."""
        def make(rows: list):
            return self.make_index(rows, embedder.dim)

        snap = self.snapshot(store, embedder.model_id)
        if snap is None or snap.meta["dim"] != embedder.dim:
            self.request(store, embedder.model_id, embedder.dim)
            return self.scan(store, embedder.model_id, make, vector, filters, today, n, extra)
        delta = self.delta(store, snap, embedder.model_id)
        if len(delta.ids) >= self.settings.ann_rebuild_rows:
            self.request(store, embedder.model_id, embedder.dim)

        def fetch(ids: list[str]) -> list:
            return store.vectors_of(embedder.model_id, ids + snap.neighbours(ids))

        k = self.settings.ann_fetch * n
        while True:
            found = snap.search(vector, k, self.settings.ann_expansion_search)
            fresh = [delta.ids[i] for i in top_k(delta.scores(vector), k)]
            leg = CandidateLeg(fetch, make, vector, list(dict.fromkeys(found + fresh)))
            allowed = (store.filter_ids(extra, today, among=list(leg.index.ids)) if extra
                       else None)
            keep = leg.index.mask(filters, today, allowed)
            leg.hits = leg.best(n, keep)
            if len(leg.hits) >= n or len(found) < k:  # enough, or the graph has no more
                return leg
            share = keep.mean() if len(keep) else 0.0
            if k >= MAX_FETCH or share * MAX_FETCH < n:
                break
            k = min(MAX_FETCH, max(4 * k, int(2 * n / max(share, 1e-9))))
        allowed_ids = store.filter_ids(filters, today)  # very selective filters: score them all
        if len(allowed_ids) > EXACT_MAX:
            return self.scan(store, embedder.model_id, make, vector, filters, today, n, extra)
        return self._exact(store, embedder.model_id, make, vector, sorted(allowed_ids),
                           filters, today, n, extra)

    def scan(self, store, model_id: str, make, vector: np.ndarray, filters: dict[str, Any],
             today: str, n: int, extra: dict[str, Any]) -> CandidateLeg:
        """Every vector read in batches and scored, none kept: a large project's leg until
        its first build, without holding its vectors (1.5 GB at 1M) in each worker."""
        best: list[tuple[float, str]] = []
        after = 0
        while batch := store.vectors_after(model_id, after, BATCH):
            index = make(batch)
            allowed = (store.filter_ids(extra, today, among=list(index.ids)) if extra
                       else None)
            scores = index.scores(vector)
            best = sorted(best + [(float(scores[i]), index.ids[i]) for i in
                                  top_k(scores, n, index.mask(filters, today, allowed))],
                          reverse=True)[:n]
            after = batch[-1]["v_rowid"] + 1
        return self._exact(store, model_id, make, vector, [m for _, m in best], filters,
                           today, n, extra)

    @staticmethod
    def _exact(store, model_id: str, make, vector: np.ndarray, ids: list[str],
               filters: dict[str, Any], today: str, n: int, extra: dict[str, Any]
               ) -> CandidateLeg:
        leg = CandidateLeg(lambda more: store.vectors_of(model_id, more), make, vector, ids)
        allowed = store.filter_ids(extra, today, among=list(leg.index.ids)) if extra else None
        leg.hits = leg.best(n, leg.index.mask(filters, today, allowed))
        return leg

    # -- building ------------------------------------------------------------------------

    def request(self, store, model_id: str, dim: int) -> None:
        """Build ``store``'s index in the background, unless this process already is."""
        key = str(store.db.path)
        with self._lock:
            if key in self._building:
                return
            self._building.add(key)
        threading.Thread(target=self._build, args=(store, model_id, dim, key),
                         name="memory-ann", daemon=True).start()

    def _build(self, store, model_id: str, dim: int, key: str) -> None:
        leases, name = self.kernel.leases, f"memory-ann:{key}:{model_id}"
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)  # serving first
            if leases.acquire(name, self.owner, self.settings.backfill_lease_s) is not None:
                return  # another worker builds it
            try:
                started = time.perf_counter()
                gen = build(store, model_id, dim, self.settings,
                            lambda: leases.heartbeat(name, self.owner))
                log.info("memory ANN index %s built in %.1f s", gen, time.perf_counter() - started)
            finally:
                leases.release(name, self.owner)
        except Exception as ex:
            log_failure(log, f"memory ANN build for {key}", ex)
        finally:
            with self._lock:
                self._building.discard(key)

    def wait(self, timeout: float = 600.0) -> None:
        """Until this process builds nothing (tests, bench)."""
        deadline = time.monotonic() + timeout
        while self._building and time.monotonic() < deadline:
            time.sleep(0.05)
