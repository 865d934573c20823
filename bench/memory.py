"""Memory plugin figures over HTTP, next to the raw cost of the same work in the same run.

For each size (default 1,000 and 10,000 memories) in a fresh project on a real 2-worker
gunicorn server with the packaged model:
  * batch-create throughput (1,000 items per request) filling the project,
  * single-create throughput into the filled project: wrk (8 keep-alive connections, a fresh
    random record per request, ``bench/memory_create.lua``) when wrk is installed, and 2,000
    creates from 8 Python client threads (which spend ~0.3 ms of the two cores per request),
    each with the project's contradiction check on store off and on, alternating three times
    with the backfill idle before each run (medians; checks ÷ none),
  * search p50/p95 per mode (keyword, semantic, hybrid; one client, keep-alive), and hybrid
    again with the project's decay policy off and on, alternating (decay ÷ no decay),
  * the raw cost, in this process on the same SQLite file: one query embedding + numpy
    top-k over the project's vectors + one FTS5 bm25 query, and the ratio HTTP ÷ raw;
    for writes, the store alone on a fresh file: one create per transaction with what a
    create asks of the store besides (duplicate hint, contradiction check), and 1,000
    creates per transaction (SQLite + FTS5 + history rows).
Sizes above ``--embed-up-to`` (default 20,000) get random unit vectors written through the
store instead of waiting for the backfill (it embeds ~60 such records/s here): their search
latencies are real, their semantic results are not.
``--backend postgres`` runs every size twice, on a server whose stores are SQLite files and
on one whose stores are PostgreSQL (a schema of its own in the database ``--dsn`` names, else
in one the ``pgserver`` wheel starts), one after the other per size; each run fills, searches
(p50/p95 per mode) and creates (single and batch, checks on, no decay or checks-off rounds),
and the summary divides PostgreSQL's figures by SQLite's. Then two servers (two gunicorn
masters, 2 workers each) share the PostgreSQL database: creates/s from wrk on both at once
(into one project, and each into its own) ÷ on one alone (``--two-servers-only``: that alone).
The machine is shared with other work: compare ratios, not absolute figures.

``--writes`` measures creates only (:func:`main_writes`): per size, HTTP batch and single
creates each divided by the store alone doing the same records' store work at the same size,
paired run by run, and the CPU a batch record and a single create cost the store and the
server (less noisy than throughput on a shared machine).

``--real-text`` measures search at scale on real text instead (``bench/memory_corpus.py``:
records cut from the eval corpora, each with the normalised sum of its text units' real
embeddings): per size, search p50/p95 per mode for the eval sets' own queries (typical) and
for queries whose every word all records hold (worst), the raw costs of both, the build wait
of the ANN index (from 50,000 records), its leg's recall@10 against the exact scan, and the
RSS and PSS of the server and each worker. With ``--backend postgres`` the same on a server
whose store is PostgreSQL: filled through the store, the vectors COPYed and the HNSW index
built once, its leg's recall@10 against exact search in the database.

    python bench/memory.py [--sizes 1000,10000] [--queries 200] [--embed-up-to N] [--json]
    python bench/memory.py --real-text [--backend postgres] --sizes 100000,1000000 [--cache DIR]
    python bench/memory.py --backend postgres [--dsn postgresql://…] [--sizes 10000,100000]
    python bench/memory.py --writes [--sizes 1000,10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import have_wrk, need_wrk, positive_int, sizes, wrk_note  # noqa: E402
from tests.support import (EVERY_QUERY_EMBEDDED, KeepAlive, Server, fresh_pg_dsn,  # noqa: E402
                           pg_uri)

SYLLABLES = ("lo", "ka", "mi", "tor", "sel", "pra", "dun", "vek", "qui", "zan", "bel", "cor",
             "fen", "gil", "hus", "jor", "ta", "ron", "mis", "lek", "dor", "pan", "sul", "vin",
             "gar", "tex", "bo", "cy", "dra", "fu")
# ~28k pseudo-words drawn with a Zipf-like skew, so a few words are common and most are rare,
# as in real text (a tiny vocabulary would make every query word a stop-word-like term).
WORDS = [a + b for a in SYLLABLES for b in SYLLABLES] + \
        [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]
TECH = ("cache", "parser", "sqlite", "index", "retry", "token", "worker", "queue", "schema",
        "logging", "timeout", "vector", "thread", "config", "render", "client")


def word(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(TECH)
    return WORDS[int(len(WORDS) ** rng.random()) - 1]  # P(rank r) ∝ 1/r



def sentence(rng: random.Random, n: int) -> str:
    return " ".join(word(rng) for _ in range(n))


def record(rng: random.Random, i: int) -> dict:
    return {"title": f"{sentence(rng, 6)} {i}", "rationale": sentence(rng, 30),
            "files_affected": [f"src/m{rng.randrange(200)}.py"], "tags": [rng.choice(TECH)]}


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def fill_batches(client: KeepAlive, base: str, rng: random.Random, n: int,
                 make=None) -> float:
    """Batch-creates ``n`` records (``make(i)``, else synthetic ones); creates per second."""
    make = make or (lambda i: record(rng, i))
    started = time.perf_counter()
    for start in range(0, n, 1000):
        items = [{"op": "create", **make(i)} for i in range(start, min(n, start + 1000))]
        status, body = client.call("POST", base + "/batch", {"items": items})
        assert status == 200, body[:300]
    return n / (time.perf_counter() - started)


def fill_store(store, rng: random.Random | None, n: int, make=None) -> float:
    """Creates ``n`` records (``make(i)``, else synthetic ones) through the store, 1,000 per
    transaction (the bulk path of sizes from ``--load-from``: HTTP batches took ~15 min per
    million here); creates per second."""
    from neuralmind import now_iso
    from plugins.memory import records
    from plugins.memory.models import MemoryIn
    make = make or (lambda i: record(rng, i))
    started = time.perf_counter()
    for start in range(0, n, 1000):
        at = now_iso()
        built = [records.build(MemoryIn(**make(i)).model_dump(), root=None, now=at,
                               head="", errors=[]) for i in range(start, min(n, start + 1000))]
        store.apply_batch([("create", rec, records.content_sha(rec), {}, "bench")
                           for rec in built], at)
    return n / (time.perf_counter() - started)


RUNS = iter(range(1, 1_000_000))  # each timed run's seed: fresh records every time


def singles(port: int, token: str, base: str, total: int, threads: int = 8) -> float:
    per, run_seed = total // threads, next(RUNS)

    def run(t: int) -> None:
        rng, client = random.Random(run_seed * 1000 + t), KeepAlive(port, token)
        for i in range(per):
            status, body = client.call("POST", base, record(rng, 10_000_000 * run_seed + t * per + i))
            assert status == 201, body[:300]

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return per * threads / (time.perf_counter() - started)


def singles_wrk(port: int, token: str, base: str, seconds: int = 5) -> tuple[float, int] | None:
    """``(creates/s, answers other than 201)`` from wrk, or None without wrk."""
    if shutil.which("wrk") is None:
        return None
    out = subprocess.run(["wrk", "-t2", "-c8", f"-d{seconds}s", "-s",
                          str(ROOT / "bench" / "memory_create.lua"),
                          "-H", f"Authorization: Bearer {token}",
                          "-H", "Content-Type: application/json",
                          f"http://127.0.0.1:{port}{base}", "--", str(next(RUNS))],
                         capture_output=True, text=True, check=True).stdout
    rate = float(next(line for line in out.splitlines() if line.startswith("Requests/sec"))
                 .split()[1])
    bad = int(next(line for line in out.splitlines() if line.startswith("non201")).split()[1])
    return rate, bad


class Backend:
    """Where one server's memory stores live — SQLite files in each project's state folder,
    or a schema of their own in a PostgreSQL database (``uri``) — and the same stores opened
    in this process, to wait for the backfill, write random vectors and time the raw work."""

    def __init__(self, name: str, tmp: Path, uri: str | None = None):
        self.name, self.folder = name, tmp / name
        self.folder.mkdir()
        self.dsn, self.pool, self.shared = None, None, None
        self.stores: list = []  # each filled project's, for the backfill waits
        self.raw_writes: dict[str, float] = {}  # raw_writes(self), measured before the server
        if name == "postgres":
            from kernel.pg import PgBackend
            from plugins.memory.pgstore import PG_MIGRATIONS
            self.dsn = fresh_pg_dsn(uri or pg_uri())
            self.pool = PgBackend(self.dsn, 2)
            self.shared = self.pool.database("memory", PG_MIGRATIONS)

    def env(self) -> dict[str, str]:
        return {"NEURALMIND_DATABASE_URL": self.dsn} if self.dsn else {}

    def store(self, name: str, file: Path | None = None):
        """The store of the project ``name`` (on SQLite, in ``file``, else a fresh file)."""
        if self.shared is not None:
            from plugins.memory.pgstore import PgMemoryStore
            return PgMemoryStore(self.shared, name)
        return sqlite_store(file or self.folder / f"{name}.db")

    def close(self) -> None:
        for store in self.stores:
            store.db.close()
        if self.pool is not None:
            self.pool.close()


def raw_writes(backend: Backend, rng: random.Random, n: int = 2000) -> dict[str, float]:
    """The store alone on fresh files, records built beforehand: creates/s one per
    transaction with what a create asks of the store besides (the duplicate hint and the
    contradiction check, :class:`StoreCreate`), and 1,000 per transaction (SQLite + FTS5 + history rows)."""
    ops = built_ops(rng, 0, n, backend.folder)
    single, create = backend.store("raw-single"), StoreCreate()
    started = time.perf_counter()
    for op in ops:
        create(single, op)
    single_rate = n / (time.perf_counter() - started)
    batch = backend.store("raw-batch")
    started = time.perf_counter()
    for i in range(0, n, 1000):
        batch.apply_batch(ops[i:i + 1000], "2026-01-01T00:00:00.000Z")
    single.db.close()
    batch.db.close()
    return {"single_creates_per_s": round(single_rate),
            "batch_creates_per_s": round(n / (time.perf_counter() - started))}


def built_ops(rng: random.Random, start: int, n: int, root: Path) -> list[tuple]:
    """``n`` synthetic records as the service builds them, as store ops ``create``."""
    from plugins.memory import records
    from plugins.memory.models import MemoryIn
    built = [records.build(MemoryIn(**record(rng, i)).model_dump(), root=root,
                           now="2026-01-01T00:00:00.000Z", head="", errors=[])
             for i in range(start, start + n)]
    return [("create", rec, records.content_sha(rec), {}, "bench") for rec in built]


class StoreCreate:
    """What ``Memories.create`` asks of the store for one record, with the project's default
    settings, done without the service: the write (row, FTS5, history, stamp), the duplicate
    hint, and the contradiction check on the hint's neighbours (the detector included)."""

    def __init__(self):
        from plugins.memory.contradictions import Contradictions
        from plugins.memory.models import MemorySettings
        from plugins.memory.search import Searcher
        self.searcher = Searcher(MemorySettings(), kernel=None)  # the keyword leg only
        self.checks = Contradictions(self)  # needs only the three below

    @staticmethod
    def actor_for(actor, rec) -> str:
        return "bench"

    def emit(self, *args, **kw) -> None:
        """No kernel here: the event log is the kernel's work, not the store's."""

    def __call__(self, store, op: tuple) -> None:
        _, rec, sha, _, actor = op
        store.create(rec, sha, actor)
        near = self.searcher.similar_titles(store, rec["title"], {
            "status": "ACTIVE", "file": rec["files_affected"]}, "2026-01-01", 3, rec["id"])
        self.checks._on_store(None, store, rec, None, None, [r for r, _ in near])


def random_vectors(store, model_id: str, dim: int, vector_of=None) -> None:
    """A unit vector for every record, through the store (so the version moves): random, or
    ``vector_of(i)`` for the ``i``-th record created (SQLite's row order: --real-text runs
    there)."""
    import numpy as np
    order = " ORDER BY rowid" if vector_of is not None else ""
    rows = store.db.conn.execute("SELECT id, content_sha FROM memories" + order).fetchall()
    rng = np.random.default_rng(0)
    for i in range(0, len(rows), 5000):
        chunk = rows[i:i + 5000]
        if vector_of is None:
            vectors = rng.standard_normal((len(chunk), dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        else:
            vectors = np.stack([vector_of(i + k) for k in range(len(chunk))])
        store.put_vectors(model_id, dim, [(r[0], vectors[k].tobytes(), r[1])
                                          for k, r in enumerate(chunk)])


def bulk_vectors(backend: Backend, store, model_id: str, dim: int, index: bool,
                 vector_of=None) -> dict:
    """PostgreSQL's bulk path: a unit vector for every record of ``store``'s project (random,
    or ``vector_of(memory_id)``), COPYed (binary) through a temporary table (the server's
    backfill may have written some meanwhile), then the project's HNSW index built once over
    all of them with a large ``maintenance_work_mem`` — inserting 1M vectors one by one into a
    live index takes hours here. Seconds spent on each step."""
    import numpy as np

    columns = ("project_id", "memory_id", "model_id", "dim", "vector", "content_sha", "embedding")
    rows = store.db.conn.execute("SELECT id, content_sha FROM memories").fetchall()
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    with backend.pool.pool.connection() as conn, conn.transaction():
        conn.execute("CREATE TEMP TABLE loaded (LIKE all_memory_vectors) ON COMMIT DROP")
        with conn.cursor() as cur, cur.copy(f"COPY loaded ({', '.join(columns)}) FROM STDIN "
                                            "WITH (FORMAT BINARY)") as copy:
            # a binary COPY field is the column type's own receive format; pgvector's is
            # the dimension and a zero (two int16) and the floats, all big-endian
            copy.set_types(["text", "text", "text", "int4", "bytea", "text", "bytea"])
            head = struct.pack(">HH", dim, 0)
            for at in range(0, len(rows), 10_000):
                chunk = rows[at:at + 10_000]
                if vector_of is None:
                    vectors = rng.standard_normal((len(chunk), dim)).astype(np.float32)
                    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                else:
                    vectors = np.stack([vector_of(mid) for mid, _ in chunk])
                for (mid, sha), v in zip(chunk, vectors):
                    copy.write_row((store.project, mid, model_id, dim, v.tobytes(), sha,
                                    head + v.astype(">f4").tobytes()))
        conn.execute(f"INSERT INTO all_memory_vectors ({', '.join(columns)}) SELECT "
                     f"{', '.join(columns)} FROM loaded ON CONFLICT (project_id, memory_id) DO "
                     "UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in columns[2:]))
        conn.execute("UPDATE all_memory_meta SET value = value + 1 WHERE project_id = %s AND "
                     "key = 'version'", (store.project,))
    with backend.pool.pool.connection() as conn:
        # fresh statistics first: planned with the table's old size, the backfill's query for
        # missing vectors (an outer join) ran 17 min at 100k and held the index build back
        conn.execute("ANALYZE all_memory_vectors")
    loaded = time.perf_counter()
    if index:  # a project past ann_min_records (below, the workers scan its vectors)
        from plugins.memory.models import MemorySettings
        store.build_nearest(MemorySettings(ann_build_memory_mb=4_096))
    return {"copy_s": round(loaded - started, 1),
            "index_s": round(time.perf_counter() - loaded, 1)}


def pg_recall(store, embedder, queries: list[str], k: int = 10) -> dict:
    """The HNSW leg's recall@k against exact search in the database, over the project's
    own vectors (random ones: HNSW's hardest case), and each one's median time. The leg
    asks the index for ``ann_fetch × k`` candidates and keeps the ``k`` nearest."""
    from plugins.memory.models import MemorySettings
    settings = MemorySettings()
    ef = settings.ann_expansion_search
    recall, ms = [], {"hnsw": [], "exact": []}
    for q in queries:
        v = embedder.embed([q])[0]
        t0 = time.perf_counter()
        got = store.nearest(v, settings.ann_fetch * k, ef)[:k]
        t1 = time.perf_counter()
        want = store.nearest_exact(v, k, {}, "2000-01-01")
        t2 = time.perf_counter()
        assert got is not None, "the project has no HNSW index"
        recall.append(len(set(got) & set(want)) / max(1, len(want)))
        ms["hnsw"].append((t1 - t0) * 1000)
        ms["exact"].append((t2 - t1) * 1000)
    return {f"recall_at_{k}": round(statistics.mean(recall), 4), "ef_search": ef,
            "p50_ms": {name: round(pct(v, 50), 2) for name, v in ms.items()}}


def sqlite_store(db: Path):
    """A store over a server's ``memory.db``, to seed vectors and watch its backfill."""
    from kernel.storage import Database
    from plugins.memory.store import MIGRATIONS, MemoryStore
    return MemoryStore(Database(db, MIGRATIONS))


def wait_embedded(stores: list, model_id: str, timeout: float = 600) -> float:
    """Seconds until the backfill has embedded every record of ``stores``."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if not any(store.missing_vectors(model_id, 1) for store in stores):
            return time.perf_counter() - started
        time.sleep(0.5)
    raise RuntimeError("backfill did not finish")


def search_latency(client: KeepAlive, base: str, queries: list[str], mode: str) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        status, body = client.call("POST", base + "/search", {"query": q, "mode": mode, "limit": 10})
        out.append((time.perf_counter() - t0) * 1000)
        assert status == 200, body[:300]
    return out


def raw_cost(store, embedder, queries: list[str]) -> dict[str, float]:
    """The same work without HTTP, one leg after the other: embed the query, numpy top-k,
    the keyword leg's bm25 query (its words chosen as the server chooses them); and the
    load of the project's vector index, which a worker repeats after any write. A store
    that searches its vectors itself (PostgreSQL's HNSW, from ``ann_min_records``) is asked
    for its top 40 instead, and nothing is loaded."""
    import numpy as np

    from plugins.memory.models import MemorySettings
    from plugins.memory.search import Searcher, VectorIndex
    settings = MemorySettings()
    searcher = Searcher(settings, kernel=None)  # the keyword leg only
    native = searcher.native_covers(store)
    started = time.perf_counter()  # what each worker pays again after any server's write
    matrix = None if native else VectorIndex.from_rows(store.vectors(embedder.model_id), embedder.dim).matrix
    load_ms = (time.perf_counter() - started) * 1000
    embed_ms, topk_ms, fts_ms = [], [], []
    for q in queries:
        t0 = time.perf_counter()
        v = embedder.embed([q])[0]
        t1 = time.perf_counter()
        if native:
            store.nearest(v, 40, settings.ann_expansion_search)
        else:
            scores = matrix @ v
            top = np.argpartition(-scores, 40)[:40]
            top[np.argsort(-scores[top])]
        t2 = time.perf_counter()
        searcher.keyword(store, q, {"status": "ACTIVE"}, "2000-01-01", 40, full=False)
        t3 = time.perf_counter()
        embed_ms.append((t1 - t0) * 1000)
        topk_ms.append((t2 - t1) * 1000)
        fts_ms.append((t3 - t2) * 1000)
    med = statistics.median
    return {"embed_ms": med(embed_ms), "topk_ms": med(topk_ms), "fts_ms": med(fts_ms),
            "total_ms": med(embed_ms) + med(topk_ms) + med(fts_ms), "index_load_ms": load_ms}


def run_size(srv: Server, backend: Backend, n: int, queries: list[str], embedder,
             embed_up_to: int, full: bool = True, load_from: int = 500_000) -> dict:
    """Fill, wait for the vectors, time searches, then time single creates into the same
    project; the previous projects' creates are embedded first, so no backfill runs while
    anything is timed. ``full``: also decay off/on and contradiction checks off/on, three
    rounds (else one round of creates, checks on: the default)."""
    from plugins.memory.models import MemorySettings
    ann_min_records = MemorySettings().ann_min_records
    embed_wait = wait_embedded(backend.stores, embedder.model_id)
    project = backend.folder / f"proj-{n}"
    project.mkdir()
    pid = srv.register(project)
    store = backend.store(pid, project / ".neuralmind" / "memory.db")
    backend.stores.append(store)
    base = f"/v1/projects/{pid}/memories"
    client = KeepAlive(srv.port, srv.token)
    rng = random.Random(n)
    batch_rate = (fill_store(store, rng, n) if n >= load_from
                  else fill_batches(client, base, rng, n))
    bulk = None
    if n > embed_up_to and backend.shared is not None:
        bulk = bulk_vectors(backend, store, embedder.model_id, embedder.dim,
                            index=n >= ann_min_records)
    elif n > embed_up_to:
        random_vectors(store, embedder.model_id, embedder.dim)
    embed_wait += wait_embedded(backend.stores, embedder.model_id)
    out = {"backend": backend.name, "memories": n, "batch_creates_per_s": round(batch_rate),
           "filled": "store" if n >= load_from else "http",
           "random_vectors": n > embed_up_to, "backfill_wait_s": round(embed_wait, 1),
           "bulk_vectors": bulk, "load": Path("/proc/loadavg").read_text().split()[:3]}
    if backend.name == "sqlite" and n >= ann_min_records:  # searches time the index, not a scan
        out["ann_build_s"] = wait_ann(client, base, store.db.path, embedder, n)
    for mode in ("keyword", "semantic", "hybrid"):
        search_latency(client, base, queries[:10], mode)  # warm both workers' caches
        ms = search_latency(client, base, queries, mode)
        out[mode] = {"p50_ms": round(pct(ms, 50), 2), "p95_ms": round(pct(ms, 95), 2)}
    if full:
        out["decay"] = decay_latency(client, base, queries)
    out["processes"] = process_memory(srv)
    if bulk is not None and n >= ann_min_records:
        out["hnsw"] = pg_recall(store, embedder, queries)
    raw = raw_cost(store, embedder, queries)
    out["raw"] = {k: round(v, 3) for k, v in raw.items()}
    out["hybrid_over_raw"] = round(out["hybrid"]["p50_ms"] / raw["total_ms"], 2)
    runs: dict[str, list] = {"no_checks": [], "checks": []} if full else {"checks": []}
    for _ in range(3 if full else 1):  # alternating, so the project's growth weighs on both
        for key in runs:
            set_config(client, base.replace("/memories", "/contradictions/config"),
                       {"check_on_store": key == "checks"})
            # no backfill of the last run's records
            wait_embedded(backend.stores, embedder.model_id)
            wrk_rate = singles_wrk(srv.port, srv.token, base, seconds=3)
            wait_embedded(backend.stores, embedder.model_id)
            runs[key].append((singles(srv.port, srv.token, base, 800), wrk_rate))
    for key, got in runs.items():
        wrk = [w for _, w in got if w]
        out[key] = {"single_creates_per_s": round(statistics.median(r for r, _ in got)),
                    "single_creates_wrk_per_s": round(statistics.median(w[0] for w in wrk))
                    if wrk else None, "wrk_non_201": sum(w[1] for w in wrk) if wrk else None}
    out.update(out["checks"])  # the default: checks on
    if full:
        out["checks_over_none"] = {
            k: round(out["checks"][k] / out["no_checks"][k], 2) if out["no_checks"][k] else None
            for k in ("single_creates_per_s", "single_creates_wrk_per_s")}
    return out


def two_servers(backend: Backend, home: Path, model_id: str, rounds: int = 2,
                seconds: int = 5) -> dict:
    """Creates/s from wrk (8 connections per server): on one server alone, then on two
    servers (two gunicorn masters of 2 workers, one database) at once — into one project,
    whose writes take turns among all servers, and each server into a project of its own —
    alternating ``rounds`` times with the backfill idle before each run (medians; ÷ one)."""
    servers = [Server(home / f"machine-{i}", plugins=["auth", "memory"], workers=2,
                      config=f'[kernel]\nstate_dir = "{home / f"state-{i}"}"\n',
                      env={**backend.env(), "NEURALMIND_EMBEDDINGS_WARM": "1"})
               for i in (1, 2)]
    for server in servers:
        server.start()
    try:
        bases, stores = [], []  # (the size runs' servers are gone: their backfill too)
        for i in (1, 2):
            project = home / f"project-{i}"
            project.mkdir()
            pid = servers[0].register(project)
            stores.append(backend.store(pid))
            backend.stores.append(stores[-1])
            bases.append(f"/v1/projects/{pid}/memories")
        for server in servers:  # each worker's first requests open the stores and warm up
            for base in bases:
                fill_batches(KeepAlive(server.port, server.token), base,
                             random.Random(server.port), 500)

        def rate(pairs: list[tuple[Server, str]]) -> float:
            wait_embedded(stores, model_id)
            rates: list[float] = []
            threads = [threading.Thread(target=lambda s=s, b=b: rates.append(
                singles_wrk(s.port, s.token, b, seconds)[0])) for s, b in pairs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return sum(rates)

        runs: dict[str, list[float]] = {"one": [], "same_project": [], "own_projects": []}
        for _ in range(rounds):
            runs["one"].append(rate([(servers[0], bases[0])]))
            runs["same_project"].append(rate([(s, bases[0]) for s in servers]))
            runs["own_projects"].append(rate(list(zip(servers, bases))))
    finally:
        for server in servers:
            server.stop()
    out = {f"{k}_creates_per_s": round(statistics.median(v)) for k, v in runs.items()}
    for k in ("same_project", "own_projects"):
        out[f"{k}_over_one"] = round(out[f"{k}_creates_per_s"] / out["one_creates_per_s"], 2)
    return out


def run_real(srv: Server, tmp: Path, n: int, corpus, units, queries: list[str],
             worst: list[str], embedder) -> dict:
    """Real text (``bench/memory_corpus.py``): fill, write each record's vector (the normalised
    sum of its units' embeddings), wait for the ANN build, then time searches — typical: the
    eval sets' queries; worst: words every record holds — beside the raw costs, the ANN leg's
    recall@10 against the exact scan, and each server process's memory."""
    project = tmp / f"real-{n}"
    project.mkdir()
    base = f"/v1/projects/{srv.register(project)}/memories"
    client = KeepAlive(srv.port, srv.token)
    db = project / ".neuralmind" / "memory.db"
    out = {"memories": n, "text": "real",
           "batch_creates_per_s": round(fill_batches(client, base, None, n,
                                                     lambda i: corpus.record(i)[0]))}
    store = sqlite_store(db)
    random_vectors(store, embedder.model_id, embedder.dim,
                   lambda i: corpus.vector(units, corpus.record(i)[1]))
    wait_embedded([store], embedder.model_id)
    out["ann_build_s"] = wait_ann(client, base, db, embedder, n)
    out.update(real_searches(client, base, store, embedder, queries, worst))
    out["ann"] = ann_recall(db, embedder, queries) if out["ann_build_s"] is not None else None
    out["processes"] = process_memory(srv)
    store.db.close()
    return out


def run_real_pg(srv: Server, backend: Backend, n: int, corpus, units, queries: list[str],
                worst: list[str], embedder) -> dict:
    """:func:`run_real` on PostgreSQL: records filled through the store (1,000 per
    transaction: ~30 min per million here), their vectors COPYed and the project's HNSW index
    built once (:func:`bulk_vectors`), then the same searches and raw costs, the HNSW leg's
    recall@10 against exact search in the database, and each server process's memory."""
    from plugins.memory.models import MemorySettings
    project = backend.folder / f"real-{n}"
    project.mkdir()
    pid = srv.register(project)
    base = f"/v1/projects/{pid}/memories"
    store = backend.store(pid)
    backend.stores.append(store)
    # ids carry the record's number, so its vector is found by id
    rate = fill_store(store, None, n, lambda i: {**corpus.record(i)[0], "id": f"r{i}"})
    index = n >= MemorySettings().ann_min_records
    out = {"memories": n, "text": "real", "backend": "postgres",
           "batch_creates_per_s": round(rate),
           "bulk_vectors": bulk_vectors(
               backend, store, embedder.model_id, embedder.dim, index,
               lambda mid: corpus.vector(units, corpus.record(int(mid[1:]))[1]))}
    wait_embedded(backend.stores, embedder.model_id)
    out.update(real_searches(KeepAlive(srv.port, srv.token), base, store, embedder, queries,
                             worst))
    out["hnsw"] = pg_recall(store, embedder, queries) if index else None
    out["processes"] = process_memory(srv)
    return out


def real_searches(client: KeepAlive, base: str, store, embedder, queries: list[str],
                  worst: list[str]) -> dict:
    """Each mode's p50/p95 over HTTP for the typical and the worst queries, beside the raw
    cost of the same work in this process."""
    out: dict = {}
    for name, qs in (("typical", queries), ("worst", worst)):
        for mode in ("keyword", "semantic", "hybrid"):
            search_latency(client, base, qs[:10], mode)  # warm both workers
            ms = search_latency(client, base, qs, mode)
            out[f"{name}_{mode}"] = {"p50_ms": round(pct(ms, 50), 2),
                                     "p95_ms": round(pct(ms, 95), 2)}
        raw = raw_cost(store, embedder, qs)
        out[f"raw_{name}"] = {k: round(v, 3) for k, v in raw.items()}
    out["worst_over_typical"] = round(out["worst_hybrid"]["p50_ms"]
                                      / out["typical_hybrid"]["p50_ms"], 2)
    out["hybrid_over_raw"] = round(out["typical_hybrid"]["p50_ms"]
                                   / out["raw_typical"]["total_ms"], 2)
    return out


def wait_ann(client: KeepAlive, base: str, db: Path, embedder, n: int,
             timeout: float = 3600) -> float | None:
    """Seconds until the project's ANN index holds every vector (searches start its build);
    None below ``ann_min_records``."""
    import sqlite3

    from plugins.memory.ann import current, folder
    from plugins.memory.models import MemorySettings
    settings = MemorySettings()
    if n < settings.ann_min_records:
        return None
    store = type("Store", (), {"db": type("Db", (), {"path": db})})
    root = folder(store, embedder.model_id)
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        client.call("POST", base + "/search", {"query": "start the build", "mode": "semantic"})
        gen = current(root)
        if gen is not None and (gen / "meta.json").exists():
            conn = sqlite3.connect(db)
            top = conn.execute("SELECT MAX(rowid) FROM memory_vectors").fetchone()[0]
            conn.close()
            if json.loads((gen / "meta.json").read_text())["watermark"] >= top - 100:
                return round(time.perf_counter() - started, 1)
        time.sleep(2)
    raise RuntimeError("the ANN index was not built")


def ann_recall(db: Path, embedder, queries: list[str], k: int = 10) -> dict:
    """The ANN leg against the exact scan, in this process on the same files: recall@k of
    the top k (ACTIVE records) and each leg's median time (query embedding included)."""
    from kernel.clock import today
    from plugins.memory.ann import CandidateLeg
    from plugins.memory.models import MemorySettings
    from plugins.memory.search import Searcher
    store = sqlite_store(db)
    kernel = type("Kernel", (), {"embedder": embedder, "leases": None})
    on, off = Searcher(MemorySettings(), kernel), Searcher(MemorySettings(ann=False), kernel)
    recall, ms = [], {"ann": [], "exact": []}
    for q in queries:
        legs = {}
        for name, searcher in (("ann", on), ("exact", off)):
            t0 = time.perf_counter()
            legs[name] = searcher.semantic(store, q, {"status": "ACTIVE"}, today(), k)
            ms[name].append((time.perf_counter() - t0) * 1000)
        assert isinstance(legs["ann"], CandidateLeg), "the ANN leg was not used"
        want = {h[0] for h in legs["exact"].hits}
        recall.append(len(want & {h[0] for h in legs["ann"].hits}) / max(1, len(want)))
    store.db.close()
    return {f"recall_at_{k}": round(statistics.mean(recall), 4),
            "leg_p50_ms": {name: round(pct(v, 50), 2) for name, v in ms.items()}}


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a server and its workers)."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid] + [p for k in kids for p in tree(int(k))]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time these processes have spent."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def process_memory(srv: Server) -> list[dict]:
    """RSS and PSS (shared pages split among their users) of the server and its workers."""
    def mib(text: str, name: str) -> int:
        return int(next(line.split()[1] for line in text.splitlines()
                        if line.startswith(name + ":"))) // 1024

    out = []
    for pid in tree(srv.proc.pid):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        out.append({"pid": pid, "rss_mib": mib(status, "VmRSS"), "pss_mib": mib(rollup, "Pss")})
    return out


def set_config(client: KeepAlive, url: str, body: dict) -> None:
    status, answer = client.call("PUT", url, body)
    assert status == 200, answer[:300]


def decay_latency(client: KeepAlive, base: str, queries: list[str], rounds: int = 4) -> dict:
    """Hybrid p50 with the project's decay policy off and on, alternating (the same queries,
    ``rounds`` times each): what ranking by strength (and recording recalls) costs."""
    ms: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for state in ("off", "on"):
            set_config(client, base + "/decay-policy", {"enabled": state == "on"})
            ms[state] += search_latency(client, base, queries, "hybrid")
    out = {f"hybrid_p50_ms_decay_{k}": round(pct(v, 50), 2) for k, v in ms.items()}
    out["decay_over_none"] = round(out["hybrid_p50_ms_decay_on"] / out["hybrid_p50_ms_decay_off"],
                                   3)
    return out


def wrk_words(value, words: str, unit: str = "/s") -> str:
    """``value`` + ``unit`` and ``words`` (what the wrk figure is) when wrk ran, else nothing:
    a figure wrk did not measure is left out, never printed as None (the run's first line
    says wrk is missing)."""
    return "" if value is None else f"{value}{unit} {words}"


def report(res: dict) -> None:
    n = res["memories"]
    print(f"{n:>7} memories on {res['backend']}: batch {res['batch_creates_per_s']:>6}/s, single "
          + wrk_words(res['single_creates_wrk_per_s'],
                      f"(wrk, 8 connections; {res['wrk_non_201']} not 201), ")
          + f"{res['single_creates_per_s']}/s "
          f"(8 Python threads), backfill wait {res['backfill_wait_s']} s"
          + (" (random vectors)" if res["random_vectors"] else ""))
    for mode in ("keyword", "semantic", "hybrid"):
        print(f"         {mode:<8} p50 {res[mode]['p50_ms']:>7.2f} ms  "
              f"p95 {res[mode]['p95_ms']:>7.2f} ms")
    if "decay" in res:
        d = res["decay"]
        print(f"         hybrid p50 decay off {d['hybrid_p50_ms_decay_off']:.2f} ms, on "
              f"{d['hybrid_p50_ms_decay_on']:.2f} ms: {d['decay_over_none']}×")
    if "checks_over_none" in res:
        c, o, r = res["checks"], res["no_checks"], res["checks_over_none"]
        print("         single creates without contradiction checks "
              + wrk_words(o['single_creates_wrk_per_s'], "(wrk) ")
              + f"{o['single_creates_per_s']}/s (Python), with "
              + wrk_words(c['single_creates_wrk_per_s'], "(wrk) ")
              + f"{c['single_creates_per_s']}/s (Python): with ÷ without "
              + wrk_words(r['single_creates_wrk_per_s'], "(wrk) ", unit="×")
              + f"{r['single_creates_per_s']}× (Python)")
    if res.get("bulk_vectors"):
        b = res["bulk_vectors"]
        print(f"         vectors COPYed in {b['copy_s']} s, HNSW index built in {b['index_s']} s")
    if res.get("hnsw"):
        h = res["hnsw"]
        print(f"         HNSW leg recall@10 {h['recall_at_10']} of exact (ef_search "
              f"{h['ef_search']}; random vectors); p50 {h['p50_ms']['hnsw']} ms, exact "
              f"{h['p50_ms']['exact']} ms")
    print("         load " + " ".join(res["load"]) + "; processes: " + ", ".join(
        f"{p['pid']} RSS {p['rss_mib']} MiB PSS {p['pss_mib']} MiB" for p in res["processes"]))
    raw, w = res["raw"], res["raw_writes"]
    print(f"         raw: embed {raw['embed_ms']:.2f} + top-k {raw['topk_ms']:.3f} "
          f"+ keyword {raw['fts_ms']:.3f} = {raw['total_ms']:.2f} ms (vector index load "
          f"{raw['index_load_ms']:.0f} ms); hybrid/raw "
          f"{res['hybrid_over_raw']}×; store writes {w['single_creates_per_s']}/s one per "
          f"transaction, {w['batch_creates_per_s']}/s 1,000 per transaction")


def summary(results: list[dict]) -> str:
    last = results[-1]
    if last["backend"] == "sqlite":
        return (f"memory bench: {last['memories']} memories — hybrid p50 "
                f"{last['hybrid']['p50_ms']} ms ({last['hybrid_over_raw']}× raw "
                f"{last['raw']['total_ms']} ms; decay on ÷ off "
                f"{last['decay']['decay_over_none']}×), single creates "
                + wrk_words(last['single_creates_wrk_per_s'], "(wrk) ")
                + f"{last['single_creates_per_s']}/s (Python) with contradiction checks ("
                + wrk_words(last['checks_over_none']['single_creates_wrk_per_s'], "/ ", unit="×")
                + f"{last['checks_over_none']['single_creates_per_s']}× without), "
                f"batch creates {last['batch_creates_per_s']}/s")
    lines = []
    by = {(r["backend"], r["memories"]): r for r in results}
    for (backend, n), pg in by.items():
        lite = by.get(("sqlite", n))
        if backend != "postgres" or lite is None:
            continue
        ratio = {k: round(pg[k] / lite[k], 2) if lite[k] else None
                 for k in ("batch_creates_per_s", "single_creates_wrk_per_s",
                           "single_creates_per_s")}
        lines.append(f"memory bench: {n} memories, PostgreSQL ÷ SQLite — hybrid p50 "
                     f"{pg['hybrid']['p50_ms']} / {lite['hybrid']['p50_ms']} ms "
                     f"({round(pg['hybrid']['p50_ms'] / lite['hybrid']['p50_ms'], 2)}×), p95 "
                     f"{pg['hybrid']['p95_ms']} / {lite['hybrid']['p95_ms']} ms; single creates "
                     + wrk_words(ratio['single_creates_wrk_per_s'], "(wrk) ", unit="×")
                     + f"{ratio['single_creates_per_s']}× (Python), batch creates "
                     f"{ratio['batch_creates_per_s']}×")
    return "\n".join(lines)


def without_wrk(args) -> None:
    """Without wrk, one line first: ``--two-servers-only`` (its figure is wrk's alone) exits
    2; the other runs go on with the Python client's figures only and say so."""
    if args.real_text:  # no wrk figure
        return
    if args.backend == "postgres" and args.two_servers_only:
        need_wrk("memory.py", "--two-servers-only (creates/s under wrk, two servers ÷ one)")
    left_out = ("" if args.backend == "sqlite" or args.pg_only or args.writes
                else "; the two-servers figure (wrk's alone) is left out")
    wrk_note("memory.py", "single creates are measured by the Python client only, the wrk "
                          f"figures left out{left_out}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=sizes, default=[1000, 10000],
                    help="memories per project, comma-separated (default 1000,10000)")
    ap.add_argument("--queries", type=positive_int, default=200)
    ap.add_argument("--embed-up-to", type=int, default=20_000,
                    help="larger sizes get random vectors instead of waiting for the backfill")
    ap.add_argument("--real-text", action="store_true",
                    help="records and queries from the eval sets' text (bench/memory_corpus.py); "
                         "search figures, the ANN index and memory per process")
    ap.add_argument("--cache", default="/tmp/nm-scale-cache",
                    help="--real-text: where the units' embeddings are kept")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                    help="postgres: each size on PostgreSQL next to SQLite, then two servers")
    ap.add_argument("--dsn", help="the PostgreSQL (with pgvector) to use; default: pgserver's")
    ap.add_argument("--two-servers-only", action="store_true",
                    help="with --backend postgres: only the two-servers figure")
    ap.add_argument("--writes", action="store_true",
                    help="creates only: per size, HTTP single and batch creates ÷ the store's own "
                         "rates at the same size")
    ap.add_argument("--pg-only", action="store_true",
                    help="with --backend postgres: the sizes on PostgreSQL alone, no two servers")
    ap.add_argument("--load-from", type=int, default=500_000,
                    help="sizes from this one are filled through the store in this process "
                         "(1,000 per transaction), not over HTTP")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    without_wrk(args)
    if args.writes:
        return main_writes(args)
    if args.real_text:
        return main_real(args)
    from kernel.config import load_settings
    from kernel.embeddings import default_embedder
    embedder = default_embedder(load_settings(embeddings={"remember": 0}))  # raw: the model
    rng = random.Random(7)
    queries = [sentence(rng, rng.randint(3, 6)) for _ in range(args.queries)]
    names = (("sqlite",) if args.backend == "sqlite" else ("postgres",) if args.pg_only
             else ("sqlite", "postgres"))
    results, servers, backends = [], {}, {}
    extra: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name in names:
                backends[name] = backend = Backend(name, Path(tmp), args.dsn)
            if args.two_servers_only:
                names = ()
            for name in names:
                backend = backends[name]
                backend.raw_writes = raw_writes(backend, random.Random(3))
                srv = servers[name] = Server(backend.folder / "home", plugins=["auth", "memory"],
                                             workers=2, config=EVERY_QUERY_EMBEDDED,
                                             env={**backend.env(),
                                                             "NEURALMIND_EMBEDDINGS_WARM": "1"})
                srv.start()
                warm = backend.folder / "warm-up"  # first requests open files and import code
                warm.mkdir()
                warm_id = srv.register(warm)
                fill_batches(KeepAlive(srv.port, srv.token), f"/v1/projects/{warm_id}/memories",
                             random.Random(1), 2000)
                # its backfill must be idle before anything is timed (run_size waits for these)
                backend.stores.append(backend.store(warm_id, warm / ".neuralmind" / "memory.db"))
            for n in args.sizes if names else ():
                for name in names:  # one size on every backend before the next size
                    res = run_size(servers[name], backends[name], n, queries, embedder,
                                   args.embed_up_to, full=args.backend == "sqlite",
                                   load_from=args.load_from)
                    res["raw_writes"] = backends[name].raw_writes
                    results.append(res)
                    if not args.json:
                        report(res)
            for srv in servers.values():
                srv.stop()
            if args.backend == "postgres" and not args.pg_only and have_wrk():
                extra["two_servers"] = two_servers(backends["postgres"], Path(tmp) / "two",
                                                   embedder.model_id)
        finally:
            for srv in servers.values():
                srv.stop()
            for backend in backends.values():
                backend.close()
    if args.json:
        print(json.dumps({"sizes": results, **extra} if extra else results))
    if results:
        print(summary(results))
    if "two_servers" in extra:
        t = extra["two_servers"]
        print(f"memory bench: two servers on one PostgreSQL — creates/s (wrk, 8 connections "
              f"each): one server {t['one_creates_per_s']}; both into one project "
              f"{t['same_project_creates_per_s']} ({t['same_project_over_one']}×); each into "
              f"its own {t['own_projects_creates_per_s']} ({t['own_projects_over_one']}×)")
    return 0


def main_writes(args) -> int:
    """``--writes``: per size, a fresh project on a 2-worker server beside a fresh store opened
    in this process on a file of its own, filled in step — 1,000 records per transaction in
    the store, then 1,000 per batch request, alternating — then five rounds of single
    creates: 500 by the store alone (one per transaction, with what a create asks of the
    store: :class:`StoreCreate`), wrk for 2 s and 400 from the Python client over HTTP. Each figure is HTTP ÷ the
    store's, paired run by run; the backfill is held off (``backfill_delay_s``), as the
    store alone embeds nothing either."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        backend = Backend("sqlite", Path(tmp))
        srv = Server(backend.folder / "home", plugins=["auth", "memory"], workers=2,
                     config="[memory]\nbackfill_delay_s = 60\n")
        srv.start()
        try:
            warm = backend.folder / "warm-up"  # first requests open files and import code
            warm.mkdir()
            fill_batches(KeepAlive(srv.port, srv.token),
                         f"/v1/projects/{srv.register(warm)}/memories", random.Random(1), 2000)
            for n in args.sizes:
                results.append(run_writes(srv, backend, n))
                if not args.json:
                    print_writes(results[-1])
        finally:
            srv.stop()
            backend.close()
    if args.json:
        print(json.dumps(results))
    print(writes_summary(results[-1]))
    return 0


def writes_summary(res: dict) -> str:
    """The one-line summary of ``--writes`` (its largest size): HTTP ÷ the store alone."""
    b = res["cpu_us_per_batch_record"]
    return (f"memory bench, writes: {res['memories']} memories — batch creates "
            f"{res['batch_over_store']}× the store alone (CPU per record "
            f"{round(b['store'] / b['server'], 2)}×), single creates "
            + wrk_words(res['single_over_store']['wrk'], "(wrk) / ", unit="×")
            + f"{res['single_over_store']['python']}× (Python) the store alone; load "
            + " → ".join(res["load"]))


def run_writes(srv: Server, backend: Backend, n: int, rounds: int = 5) -> dict:
    """One size of ``--writes``; each ratio is the median of per-pair ratios (an HTTP run ÷
    the store's run just before it), so a load that changes between pairs weighs on both
    sides of each (the machine is shared)."""
    load = [Path("/proc/loadavg").read_text().split()[0]]
    store = backend.store(f"raw-{n}")
    project = backend.folder / f"proj-{n}"
    project.mkdir()
    base = f"/v1/projects/{srv.register(project)}/memories"
    client = KeepAlive(srv.port, srv.token)
    client.call("GET", base + "?limit=1")  # its worker opens (creates) the project's store
    rng, raw_rng = random.Random(n), random.Random(-n)
    server = tree(srv.proc.pid)
    spent: dict[str, list[float]] = {"store": [], "http": []}
    batch_cpu = {"store": 0.0, "server": 0.0}  # seconds, over every chunk
    for start in range(0, n, 1000):  # per chunk: the store's 1,000, then one batch request
        size = min(1000, n - start)
        ops = built_ops(raw_rng, start, size, backend.folder)
        items = [{"op": "create", **record(rng, i)} for i in range(start, start + size)]
        t0, c0 = time.perf_counter(), time.thread_time()
        store.apply_batch(ops, "2026-01-01T00:00:00.000Z")
        t1, c1, s0 = time.perf_counter(), time.thread_time(), cpu_seconds(server)
        status, body = client.call("POST", base + "/batch", {"items": items})
        spent["store"].append(t1 - t0)
        spent["http"].append(time.perf_counter() - t1)
        batch_cpu["store"] += c1 - c0
        batch_cpu["server"] += cpu_seconds(server) - s0
        assert status == 200, body[:300]
    create = StoreCreate()
    got: dict[str, list[float]] = {"store": [], "wrk": [], "python": []}
    cpu: dict[str, list[float]] = {"store": [], "server": []}  # ms per create
    for r in range(rounds):
        ops = built_ops(raw_rng, 10_000_000 * (r + 1), 500, backend.folder)
        t0, c0 = time.perf_counter(), time.process_time()
        for op in ops:
            create(store, op)
        got["store"].append(len(ops) / (time.perf_counter() - t0))
        cpu["store"].append((time.process_time() - c0) / len(ops) * 1000)
        wrk = singles_wrk(srv.port, srv.token, base, seconds=2)
        if wrk:
            got["wrk"].append(wrk[0])
        c0 = cpu_seconds(server)
        got["python"].append(singles(srv.port, srv.token, base, 400))
        cpu["server"].append((cpu_seconds(server) - c0) / 400 * 1000)
    store.db.close()
    load.append(Path("/proc/loadavg").read_text().split()[0])
    med = statistics.median
    out = {"memories": n, "load": load,
           "store_batch_creates_per_s": round(n / sum(spent["store"])),
           "batch_creates_per_s": round(n / sum(spent["http"])),
           "batch_over_store": round(med(a / b for a, b in zip(spent["store"], spent["http"])),
                                     2),
           "store_single_creates_per_s": round(med(got["store"])),
           "single_creates_wrk_per_s": round(med(got["wrk"])) if got["wrk"] else None,
           "single_creates_per_s": round(med(got["python"])),
           "rounds": {k: [round(v) for v in vs] for k, vs in got.items()},
           "cpu_ms_per_create": {k: round(med(v), 3) for k, v in cpu.items()},
           "cpu_us_per_batch_record": {k: round(v / n * 1e6, 1) for k, v in batch_cpu.items()}}
    out["single_over_store"] = {
        k: round(med(h / s for h, s in zip(got[k], got["store"])), 2) if got[k] else None
        for k in ("wrk", "python")}
    return out


def print_writes(res: dict) -> None:
    print(f"{res['memories']:>7} memories (load {' → '.join(res['load'])}): batch "
          f"{res['batch_creates_per_s']}/s over HTTP, {res['store_batch_creates_per_s']}/s the "
          f"store alone: {res['batch_over_store']}×")
    b = res["cpu_us_per_batch_record"]
    print(f"         CPU per batch record: store {b['store']} µs, server {b['server']} µs: "
          f"{round(b['store'] / b['server'], 2)}×")
    print("         single " + wrk_words(res['single_creates_wrk_per_s'], "(wrk) ")
          + f"{res['single_creates_per_s']}/s (Python), {res['store_single_creates_per_s']}/s the "
          f"store alone: " + wrk_words(res['single_over_store']['wrk'], "(wrk) / ", unit="×")
          + f"{res['single_over_store']['python']}× (Python) (rounds: " + "; ".join(
              f"{k} " + " ".join(map(str, vs)) for k, vs in res["rounds"].items() if vs) + ")")
    c = res["cpu_ms_per_create"]
    print(f"         CPU per single create: store {c['store']} ms, server {c['server']} ms "
          f"(Python client's runs): {round(c['store'] / c['server'], 2)}×")


def main_real(args) -> int:
    from bench.memory_corpus import SHARED, Corpus, unit_vectors
    from kernel.config import load_settings
    from kernel.embeddings import default_embedder
    from plugins.memory.search import terms
    embedder = default_embedder(load_settings(embeddings={"remember": 0}))  # raw: the model
    corpus = Corpus()
    units = unit_vectors(corpus, Path(args.cache), embedder)
    rng = random.Random(7)
    queries = rng.sample(corpus.queries, args.queries)
    shared = terms(SHARED)
    worst = [" ".join(rng.sample(shared, rng.randint(2, len(shared)))) for _ in range(50)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        # PostgreSQL: the server and this process share a fresh database (--pg-only implied)
        backend = Backend("postgres", Path(tmp), args.dsn) if args.backend == "postgres" else None
        srv = Server(Path(tmp) / "home", plugins=["auth", "memory"], workers=2,
                     config=EVERY_QUERY_EMBEDDED,
                     env={**(backend.env() if backend else {}), "NEURALMIND_EMBEDDINGS_WARM": "1"})
        srv.start()
        try:
            warm = Path(tmp) / "warm-up"
            warm.mkdir()
            warm_id = srv.register(warm)
            fill_batches(KeepAlive(srv.port, srv.token), f"/v1/projects/{warm_id}/memories",
                         random.Random(1), 2000)
            if backend:  # its backfill must be idle before anything is timed
                backend.stores.append(backend.store(warm_id))
            for n in args.sizes:
                res = (run_real_pg(srv, backend, n, corpus, units, queries, worst, embedder)
                       if backend else
                       run_real(srv, Path(tmp), n, corpus, units, queries, worst, embedder))
                res["load"] = Path("/proc/loadavg").read_text().split()[:3]
                results.append(res)
                if not args.json:
                    print_real(res)
        finally:
            srv.stop()
            if backend:
                backend.close()
    if args.json:
        print(json.dumps(results))
    print(real_summary(results[-1]))
    return 0


def real_summary(res: dict) -> str:
    """The one-line summary of ``--real-text`` (its largest size)."""
    leg = res.get("ann") or res.get("hnsw")
    return (f"memory bench, real text: {res['memories']} memories on "
            f"{res.get('backend', 'sqlite')} — hybrid p50 {res['typical_hybrid']['p50_ms']} ms "
            f"({res['hybrid_over_raw']}× raw), worst ÷ typical {res['worst_over_typical']}×"
            + (f", ANN leg recall@10 {leg['recall_at_10']}" if leg else "")
            + f"; load {' '.join(res['load'])}")


def print_real(res: dict) -> None:
    built = (f"vectors COPYed in {res['bulk_vectors']['copy_s']} s, HNSW index built in "
             f"{res['bulk_vectors']['index_s']} s" if "bulk_vectors" in res else
             f"ANN build wait {res['ann_build_s']} s")
    print(f"{res['memories']:>7} memories (real text, {res.get('backend', 'sqlite')}): batch "
          f"{res['batch_creates_per_s']}/s, {built}, load {' '.join(res['load'])}")
    for name in ("typical", "worst"):
        for mode in ("keyword", "semantic", "hybrid"):
            got = res[f"{name}_{mode}"]
            print(f"         {name:<7} {mode:<8} p50 {got['p50_ms']:>7.2f} ms  "
                  f"p95 {got['p95_ms']:>7.2f} ms")
        raw = res[f"raw_{name}"]
        print(f"         {name:<7} raw: embed {raw['embed_ms']:.2f} + exact top-k "
              f"{raw['topk_ms']:.3f} + FTS {raw['fts_ms']:.3f} = {raw['total_ms']:.2f} ms")
    print(f"         hybrid/raw {res['hybrid_over_raw']}×, worst/typical hybrid "
          f"{res['worst_over_typical']}×")
    if res.get("ann"):  # SQLite's ANN index; PostgreSQL's HNSW below
        a = res["ann"]
        print(f"         ANN leg recall@10 {a['recall_at_10']} of exact; leg p50 ANN "
              f"{a['leg_p50_ms']['ann']} ms, exact {a['leg_p50_ms']['exact']} ms (with embedding)")
    if res.get("hnsw"):
        h = res["hnsw"]
        print(f"         HNSW leg recall@10 {h['recall_at_10']} of exact (ef_search "
              f"{h['ef_search']}); p50 {h['p50_ms']['hnsw']} ms, exact {h['p50_ms']['exact']} ms")
    print("         processes: " + ", ".join(f"{p['pid']} RSS {p['rss_mib']} MiB PSS "
                                            f"{p['pss_mib']} MiB" for p in res["processes"]))


if __name__ == "__main__":
    sys.exit(main())
