"""Memory plugin figures over HTTP, next to the raw cost of the same work in the same run.

For each size (default 1,000 and 10,000 memories) in a fresh project on a real 2-worker
gunicorn server with the packaged model:
  * batch-create throughput (1,000 items per request) filling the project,
  * single-create throughput (2,000 creates from 8 client threads, keep-alive connections,
    into a second project),
  * search p50/p95 per mode (keyword, semantic, hybrid; one client, keep-alive),
  * the raw cost, in this process on the same SQLite file: one query embedding + numpy
    top-k over the project's vectors + one FTS5 bm25 query, and the ratio HTTP ÷ raw.
The machine is shared with other work: compare ratios, not absolute figures.

    python bench/memory.py [--sizes 1000,10000] [--queries 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import KeepAlive, Server  # noqa: E402

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


def fill_batches(client: KeepAlive, base: str, rng: random.Random, n: int) -> float:
    started = time.perf_counter()
    for start in range(0, n, 1000):
        items = [{"op": "create", **record(rng, i)} for i in range(start, min(n, start + 1000))]
        status, body = client.call("POST", base + "/batch", {"items": items})
        assert status == 200, body[:300]
    return n / (time.perf_counter() - started)


def singles(port: int, token: str, base: str, total: int, threads: int = 8) -> float:
    per = total // threads

    def run(t: int) -> None:
        rng, client = random.Random(1000 + t), KeepAlive(port, token)
        for i in range(per):
            status, body = client.call("POST", base, record(rng, 10_000_000 + t * per + i))
            assert status == 201, body[:300]

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return per * threads / (time.perf_counter() - started)


def wait_embedded(db: Path, model_id: str, timeout: float = 600) -> float:
    import sqlite3
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        conn = sqlite3.connect(db)
        missing = conn.execute("SELECT COUNT(*) FROM memories m LEFT JOIN memory_vectors v ON "
                               "v.memory_id = m.id AND v.model_id = ? AND v.content_sha = "
                               "m.content_sha WHERE v.memory_id IS NULL", (model_id,)).fetchone()[0]
        conn.close()
        if missing == 0:
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


def raw_cost(db: Path, embedder, queries: list[str]) -> dict[str, float]:
    """The same work without HTTP: embed the query, numpy top-k, one FTS5 bm25 query."""
    import numpy as np

    from kernel.storage import Database
    from plugins.memory.search import match_expression, terms
    from plugins.memory.store import MIGRATIONS, MemoryStore
    store = MemoryStore(Database(db, MIGRATIONS))
    rows = store.vectors(embedder.model_id)
    matrix = np.frombuffer(b"".join(r["vector"] for r in rows), np.float32).reshape(len(rows), -1)
    embed_ms, topk_ms, fts_ms = [], [], []
    for q in queries:
        t0 = time.perf_counter()
        v = embedder.embed([q])[0]
        t1 = time.perf_counter()
        scores = matrix @ v
        top = np.argpartition(-scores, 40)[:40]
        top[np.argsort(-scores[top])]
        t2 = time.perf_counter()
        store.db.conn.execute("SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE "
                              "memories_fts MATCH ? ORDER BY bm25(memories_fts) LIMIT 40",
                              (match_expression(terms(q)),)).fetchall()
        t3 = time.perf_counter()
        embed_ms.append((t1 - t0) * 1000)
        topk_ms.append((t2 - t1) * 1000)
        fts_ms.append((t3 - t2) * 1000)
    store.db.close()
    med = statistics.median
    return {"embed_ms": med(embed_ms), "topk_ms": med(topk_ms), "fts_ms": med(fts_ms),
            "total_ms": med(embed_ms) + med(topk_ms) + med(fts_ms)}


def run_size(srv: Server, tmp: Path, n: int, queries: list[str], embedder) -> dict:
    project = tmp / f"proj-{n}"
    project.mkdir()
    pid = srv.register(project)
    base = f"/v1/projects/{pid}/memories"
    client = KeepAlive(srv.port, srv.token)
    rng = random.Random(n)
    scratch = tmp / f"singles-{n}"
    scratch.mkdir()
    single_rate = singles(srv.port, srv.token, f"/v1/projects/{srv.register(scratch)}/memories",
                          2000)
    batch_rate = fill_batches(client, base, rng, n)
    embed_wait = sum(wait_embedded(p / ".neuralmind" / "memory.db", embedder.model_id)
                     for p in (project, scratch))
    out = {"memories": n, "batch_creates_per_s": round(batch_rate),
           "single_creates_per_s": round(single_rate), "backfill_wait_s": round(embed_wait, 1)}
    for mode in ("keyword", "semantic", "hybrid"):
        search_latency(client, base, queries[:10], mode)  # warm both workers' caches
        ms = search_latency(client, base, queries, mode)
        out[mode] = {"p50_ms": round(pct(ms, 50), 2), "p95_ms": round(pct(ms, 95), 2)}
    raw = raw_cost(project / ".neuralmind" / "memory.db", embedder, queries)
    out["raw"] = {k: round(v, 3) for k, v in raw.items()}
    out["hybrid_over_raw"] = round(out["hybrid"]["p50_ms"] / raw["total_ms"], 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from kernel.config import load_settings
    from kernel.embeddings import default_embedder
    embedder = default_embedder(load_settings())
    rng = random.Random(7)
    queries = [sentence(rng, rng.randint(3, 6)) for _ in range(args.queries)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(Path(tmp) / "home", plugins=["auth", "memory"], workers=2,
                     env={"NEURALMIND_EMBEDDINGS_WARM": "1"})
        srv.start()
        try:
            for n in (int(s) for s in args.sizes.split(",")):
                res = run_size(srv, Path(tmp), n, queries, embedder)
                results.append(res)
                if not args.json:
                    print(f"{n:>7} memories: batch {res['batch_creates_per_s']:>6}/s, single "
                          f"{res['single_creates_per_s']:>5}/s (8 threads), backfill wait "
                          f"{res['backfill_wait_s']} s")
                    for mode in ("keyword", "semantic", "hybrid"):
                        print(f"         {mode:<8} p50 {res[mode]['p50_ms']:>7.2f} ms  "
                              f"p95 {res[mode]['p95_ms']:>7.2f} ms")
                    raw = res["raw"]
                    print(f"         raw: embed {raw['embed_ms']:.2f} + top-k {raw['topk_ms']:.3f} "
                          f"+ FTS {raw['fts_ms']:.3f} = {raw['total_ms']:.2f} ms; hybrid/raw "
                          f"{res['hybrid_over_raw']}×")
        finally:
            srv.stop()
    if args.json:
        print(json.dumps(results))
    last = results[-1]
    print(f"memory bench: {last['memories']} memories — hybrid p50 {last['hybrid']['p50_ms']} ms "
          f"({last['hybrid_over_raw']}× raw {last['raw']['total_ms']} ms), single creates "
          f"{last['single_creates_per_s']}/s, batch creates {last['batch_creates_per_s']}/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
