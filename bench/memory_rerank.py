"""What the second stage and the floor add to one hybrid memory search, in this process.

On the stores ``neuralmind eval memory --work DIR/<set>`` builds from ``../shared/eval``
(``$NEURALMIND_EVAL_DIR``): SciFact (5,183 abstracts, ~190 words, with passages) and one LoCoMo
conversation (dialogue turns with sessions). For each query the two legs run once; then
``Searcher.hybrid`` ranks their pools with ``[memory] rerank`` and ``floor`` off (the fusion
rule, as before the second stage) and on (the default), alternately, and the difference is
what the second stage adds. Its parts are timed on their own: ``rerank.gather`` (the
candidates' text, per-word counts, features) and the model. Medians of wall time and of this
thread's CPU time (the machine is shared: CPU time moves less with load).

    python bench/memory_rerank.py --work /tmp/nm-eval [--queries 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.train_ranker import sets  # noqa: E402
from neuralmind import today  # noqa: E402
from plugins.memory import eval as memeval  # noqa: E402
from plugins.memory import rerank  # noqa: E402
from plugins.memory.models import MemorySettings  # noqa: E402
from plugins.memory.search import Searcher, terms  # noqa: E402

CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def timed(fn, clock):
    t0 = clock()
    fn()
    return (clock() - t0) * 1000


def run(name: str, store, queries: list[str], kernel) -> dict:
    on = Searcher(MemorySettings(), kernel)
    off = Searcher(MemorySettings(rerank=False, floor=False), kernel)
    everything, when, pool = {"status": "ALL"}, today(), on.pool(10)
    ms: dict[str, list[float]] = {}
    candidates = []
    for text in queries:
        kw = on.keyword(store, text, everything, when, pool, full=False)
        leg = on.semantic(store, text, everything, when, pool)
        keyword = [(r["id"], s) for r, s in kw]
        for label, clock in CLOCKS.items():
            base = timed(lambda: off.hybrid(store, text, kw, leg, 10), clock)
            full = timed(lambda: on.hybrid(store, text, kw, leg, 10), clock)
            ms.setdefault(f"fusion {label}", []).append(base)
            ms.setdefault(f"second stage {label}", []).append(full)
            ms.setdefault(f"added {label}", []).append(full - base)
        t0 = time.thread_time()
        cands = rerank.gather(store, terms(text), keyword, leg.hits, leg, True)
        t1 = time.thread_time()
        rerank.shipped().score(cands.X)
        t2 = time.thread_time()
        ms.setdefault("gather cpu", []).append((t1 - t0) * 1000)
        ms.setdefault("model cpu", []).append((t2 - t1) * 1000)
        candidates.append(len(cands.ids))
    med = {k: round(statistics.median(v), 2) for k, v in ms.items()}
    p95 = {k: round(sorted(v)[int(0.95 * (len(v) - 1))], 2) for k, v in ms.items()}
    print(f"{name}: {len(queries)} queries, candidates median {statistics.median(candidates):.0f}")
    for label in CLOCKS:
        print(f"  {label:<4} hybrid p50: fusion {med[f'fusion {label}']:.2f} ms, second stage + "
              f"floor {med[f'second stage {label}']:.2f} ms; added p50 "
              f"{med[f'added {label}']:.2f} ms, p95 {p95[f'added {label}']:.2f} ms")
    print(f"  cpu  parts p50: gather (texts, counts, features) {med['gather cpu']:.2f} ms, "
          f"model {med['model cpu']:.2f} ms")
    return {"median_ms": med, "p95_ms": p95}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200)
    args = sets(ap)
    if args is None:
        return 2
    kernel = memeval.eval_kernel(args.work)
    try:
        (scifact,) = memeval.load(args.eval / "scifact", "train")
        locomo = memeval.load(args.eval / "locomo", "train")[-1]
        for name, dataset, col in (("SciFact abstracts", "scifact", scifact),
                                   ("LoCoMo turns (one conversation)", "locomo", locomo)):
            store = memeval.open_store(kernel, args.work / dataset, col)
            memeval.embed_all(Searcher(MemorySettings(), kernel), store, kernel.embedder, col.name)
            run(name, store, [q[0] for q in col.queries[: args.queries]], kernel)
            store.db.close()
    finally:
        kernel.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
