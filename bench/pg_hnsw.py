"""Recall@10 of pgvector's HNSW index (the memory store's, on PostgreSQL) against exact search.

The eval sets' documents (``$NEURALMIND_EVAL_DIR``, else ``../shared/eval`` beside this
checkout: SciFact abstracts, LoCoMo turns, optionally CoSQA functions) are loaded as
``neuralmind eval memory --backend postgres`` loads them — each collection a project of one
database, as a team server's projects share its tables — and embedded with the packaged model
(each record's own vector, which is what the pgvector column holds); each project then gets
its own HNSW index, as a project past ``ann_min_records`` does
(``PgMemoryStore.build_nearest``). Each collection's queries are asked twice: through the
store's ``nearest`` under each ``hnsw.ef_search`` (``--fetch`` candidates, the 10 nearest
kept, as the semantic leg keeps the best of ``ann_fetch × n``), and exactly, numpy's top-10
over the same vectors. Recall@10 is the share of the exact top-10 the index returns; the p50
is the query's time in the database (the embedding of the query is not counted); "short"
counts queries that got fewer than 10 rows.
The PostgreSQL is the one ``--dsn`` names, else one the ``pgserver`` wheel starts; with a
``--dsn`` that persists and a ``--work`` folder kept, a second run reuses the loaded, embedded
collections. Without ``--work`` the temp work folder (~22 MB: the derived model) is removed at
the end.

    python bench/pg_hnsw.py [--sets scifact,locomo] [--ef 40,100,200] [--fetch 10] [--dsn URI]
                            [--dataset ../shared/eval] [--work DIR] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import choices, eval_dir, positive_int, sizes  # noqa: E402
from tests.support import fresh_pg_dsn, pg_uri  # noqa: E402

SPLITS = {"scifact": "train", "locomo": "dev", "cosqa": "dev"}


def work_folder(given: str | None):
    """``--work`` as given (kept: it holds what a second run reuses), else a temp folder
    removed when the run ends."""
    if given:
        return contextlib.nullcontext(given)
    return tempfile.TemporaryDirectory(prefix="pg-hnsw-")


def top10(store, vector, ef: int, fetch: int) -> tuple[list[str], float]:
    """The leg's top 10 through the project's index (``fetch`` candidates, the 10 nearest of
    them kept): ids and milliseconds."""
    started = time.perf_counter()
    got = store.nearest(vector, fetch, ef)[:10]
    return got, (time.perf_counter() - started) * 1000


def uses_index(store, vector) -> bool:
    """Whether the plan of :meth:`~plugins.memory.pgstore.PgMemoryStore.nearest`'s query
    scans the project's HNSW index."""
    from plugins.memory.pgstore import _literal
    q = "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
    plan = store.db.conn.execute(
        "EXPLAIN SELECT memory_id FROM all_memory_vectors WHERE project_id = "
        f"{_literal(store.project)} ORDER BY embedding <=> CAST(? AS vector) LIMIT 10", (q,))
    return store._hnsw() in " ".join(r[0] for r in plan)


def exact10(ids: list[str], matrix, vector) -> list[str]:
    scores = matrix @ vector
    top = np.argpartition(-scores, 10)[:10] if len(scores) > 10 else np.arange(len(scores))
    return [ids[i] for i in top[np.argsort(-scores[top])]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=choices(tuple(SPLITS)), default=["scifact", "locomo"],
                    help="of scifact, locomo, cosqa (default scifact,locomo)")
    ap.add_argument("--ef", type=sizes, default=[40, 100, 200],
                    help="hnsw.ef_search values (default 40,100,200)")
    ap.add_argument("--fetch", type=positive_int, default=10,
                    help="candidates asked of the index, the 10 nearest kept (the leg asks "
                         "ann_fetch × its n: 40 for a top 10)")
    ap.add_argument("--dsn", help="a PostgreSQL with pgvector; default: pgserver's")
    ap.add_argument("--work", help="the eval work folder (model cache); default: a temp folder")
    ap.add_argument("--dataset", type=Path, default=eval_dir(), help="the eval sets' folder")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with work_folder(args.work) as work:
        return run(args, Path(work))


def run(args, work: Path) -> int:
    """Load, embed and index each set in ``work``, then time and score its queries."""
    from plugins.memory.eval import eval_kernel, load, open_store
    from plugins.memory.models import MemorySettings
    from plugins.memory.search import Searcher
    efs = args.ef
    dsn = args.dsn or fresh_pg_dsn(pg_uri())
    kernel = eval_kernel(work, dsn=dsn)
    searcher = Searcher(MemorySettings(passages=False), kernel)  # own vectors only
    embedder = kernel.embedder
    collections = []
    for name in args.sets:
        for col in load(args.dataset / name, SPLITS[name]):
            store = open_store(kernel, work / name, col)
            started = time.perf_counter()
            searcher.fill(store, embedder, batch=128)
            print(f"{col.name}: {len(col.docs)} records, embedded in "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
            started = time.perf_counter()
            store.build_nearest(searcher.settings)
            print(f"{col.name}: its HNSW index built in {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
            collections.append((col, store))
    total = sum(len(col.docs) for col, _ in collections)
    results = {}
    for col, store in collections:
        rows = store.vectors(embedder.model_id)
        ids = [r["memory_id"] for r in rows]
        matrix = np.stack([np.frombuffer(r["vector"], np.float32, count=embedder.dim)
                           for r in rows])
        queries = embedder.embed([text for text, _, _ in col.queries]).astype(np.float32)
        exact = [exact10(ids, matrix, q) for q in queries]
        per_ef = {}
        indexed = uses_index(store, queries[0])
        for ef in efs:
            recall, ms, short = [], [], 0
            for q, want in zip(queries, exact):
                got, took = top10(store, q, ef, args.fetch)
                recall.append(len(set(got) & set(want)) / len(want))
                ms.append(took)
                short += len(got) < 10
            per_ef[ef] = {"recall@10": round(statistics.mean(recall), 4),
                          "p50_ms": round(statistics.median(ms), 2), "short": short,
                          "index_used": indexed}
        results[col.name] = {"records": len(ids), "queries": len(queries), "ef": per_ef}
    # every collection's queries weigh as many times as they are
    overall = {ef: round(sum(r["ef"][ef]["recall@10"] * r["queries"] for r in results.values())
                         / sum(r["queries"] for r in results.values()), 4) for ef in efs}
    kernel.shutdown()
    if args.json:
        print(json.dumps({"table_rows": total, "collections": results, "recall@10": overall}))
        return 0
    print(f"{total} vectors, an HNSW index per project (m 16, ef_construction 64), "
          f"{len(results)} projects, {args.fetch} candidates per query")
    for name, r in results.items():
        cells = ", ".join(f"ef {ef}: {v['recall@10']:.3f} ({v['p50_ms']:.2f} ms, "
                          f"{v['short']} short{'' if v['index_used'] else ', NO INDEX'})"
                          for ef, v in r["ef"].items())
        print(f"  {name:<24} {r['records']:>5} records {r['queries']:>4} queries — {cells}")
    print("pg hnsw bench: recall@10 vs exact — " + ", ".join(
        f"ef_search {ef} {v:.3f}" for ef, v in overall.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
