"""How often the extractive answer (`ask` with no provider configured) cites the evidence, on
LoCoMo dev (../shared/eval/locomo): each conversation is a project, each dialogue turn a memory
(``plugins/memory/eval.py``'s layout: "Speaker on <session date>" as title, the turn as text),
each question of categories 1–4 asked through ``POST /v1/projects/{id}/ask`` with
``sources: ["memories"]``, in this process (the kernel's WSGI app, the packaged model).

Figures, per category and overall:
  * cited ∋ gold — at least one cited source is a gold evidence turn (the issue's figure);
  * first cited is gold; precision of the citations; sources cited per answer;
  * sources ∋ gold — a gold turn is among the sources the answer was given (its ceiling);
and, in the same run, the baseline an answer without sentence selection would have: citing
the first 1 (or 3) sources as retrieved. The last line is a one-line summary. The kernel's home
(with the int8 model it derives, ~31 MB) is a temp folder removed at the end.

    nice python bench/ask_locomo.py [--dataset ../shared/eval/locomo] [--limit-queries N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import eval_dir, positive_int  # noqa: E402
from bench.memory import pct, wait_embedded  # noqa: E402
from plugins.memory.eval import load_locomo  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", type=Path, default=eval_dir() / "locomo")
    ap.add_argument("--limit-queries", type=positive_int, default=None, help="per conversation")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.dataset.is_dir():
        raise SystemExit(f"no LoCoMo folder at {args.dataset}: pass --dataset (see "
                         "../shared/eval/README.md)")
    with tempfile.TemporaryDirectory(prefix="nm-bench-ask-") as tmp:
        counts, latency = ask_all(args, Path(tmp))
    return report(args, counts, latency)


def ask_all(args, tmp: Path) -> tuple[dict, list[float]]:
    """Every conversation a project in a kernel homed in ``tmp``, every question asked:
    the counts per category (and "all") and each ask's milliseconds."""
    import falcon.testing

    from kernel.app import Kernel
    from kernel.config import load_settings
    settings = load_settings(None, kernel={"home": str(tmp / "home"), "state_dir": str(tmp / "state"),
                                           "plugins": ["auth", "memory", "ask"]})
    kernel = Kernel(settings)
    token = (kernel.home / "token").read_text().strip()
    http = falcon.testing.TestClient(kernel.app, headers={"Host": "127.0.0.1",
                                                          "Authorization": f"Bearer {token}"})
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    latency: list[float] = []
    try:
        for col in load_locomo(args.dataset):
            folder = tmp / col.name
            folder.mkdir()
            pid = http.simulate_post("/v1/projects", json={"path": str(folder)}).json["id"]
            items = [{"op": "create", "id": mid, "title": title, "rationale": text}
                     for mid, title, text in dict((d[0], d) for d in col.docs).values()]
            for i in range(0, len(items), 1000):
                r = http.simulate_post(f"/v1/projects/{pid}/memories/batch",
                                       json={"items": items[i:i + 1000]})
                assert r.status_code == 200, r.text[:300]
            wait_embedded([kernel.state("memory").store(kernel.projects.get(pid))],
                          kernel.embedder.model_id)
            for question, kind, gold in col.queries[: args.limit_queries]:
                started = time.perf_counter()
                r = http.simulate_post(f"/v1/projects/{pid}/ask", json={
                    "question": question, "sources": ["memories"]})
                latency.append((time.perf_counter() - started) * 1000)
                assert r.status_code == 200, r.text[:300]
                out = r.json
                ids = {s["n"]: s["memory_id"] for s in out["sources"]}
                cited = [ids[n] for n in out["cited"]]
                ranked = [s["memory_id"] for s in out["sources"]]
                for key in (kind, "all"):
                    c = counts[key]
                    c["questions"] += 1
                    c["cited ∋ gold"] += bool(set(cited) & gold)
                    c["first cited is gold"] += bool(cited and cited[0] in gold)
                    c["citation precision"] += (len(set(cited) & gold) / len(cited)) if cited else 0
                    c["sources cited"] += len(cited)
                    c["sources ∋ gold"] += bool(set(ranked) & gold)
                    c["baseline: first source ∋ gold"] += bool(set(ranked[:1]) & gold)
                    c["baseline: first 3 sources ∋ gold"] += bool(set(ranked[:3]) & gold)
            print(f"  {col.name}: {len(col.queries[: args.limit_queries])} questions",
                  file=sys.stderr)
    finally:
        kernel.shutdown()
    return counts, latency


def report(args, counts: dict, latency: list[float]) -> int:
    """The table per category, the latency, and the summary line (or the JSON)."""
    table = {kind: {k: (round(v / c["questions"], 4) if k != "questions" else int(v))
                    for k, v in c.items()} for kind, c in sorted(counts.items())}
    result = {"dataset": str(args.dataset), "by_category": table,
              "ask_ms": {"p50": round(statistics.median(latency), 1),
                         "p95": round(pct(latency, 95), 1)}}
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    names = [k for k in table["all"] if k != "questions"]
    print(f"{'category':<12} {'n':>5}  " + "  ".join(f"{n:>{len(n)}}" for n in names))
    for kind, row in table.items():
        print(f"{kind:<12} {row['questions']:>5}  "
              + "  ".join(f"{row[n]:>{len(n)}}" for n in names))
    print(f"ask latency in process: p50 {result['ask_ms']['p50']} ms, p95 {result['ask_ms']['p95']} ms")
    every = table["all"]
    print(f"ask bench: {every['questions']} LoCoMo questions — cited ∋ gold "
          f"{every['cited ∋ gold']} ({every['sources cited']} citations per answer) vs the "
          f"first 3 retrieved {every['baseline: first 3 sources ∋ gold']}; first cited gold "
          f"{every['first cited is gold']} vs first retrieved "
          f"{every['baseline: first source ∋ gold']}; ask p50 {result['ask_ms']['p50']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
