"""``neuralmind eval code``: CoSQA code search through the real index.

Each CoSQA function becomes a file of a throwaway project, which is built (walk, parse,
embed) and searched exactly as the routes do; a hit counts for the file it sits in.
Prints MRR@10 and recall@1/5/10 per mode."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _load(dataset: Path, split: str):
    """The corpus and ``(query, gold index)`` pairs; ValueError says what is missing or bad."""
    if not dataset.is_dir():
        raise ValueError(f"no dataset folder {dataset}")
    files = [dataset / "code_idx_map.txt", dataset / f"cosqa-retrieval-{split}-500.json"]
    if missing := [f.name for f in files if not f.is_file()]:
        raise ValueError(f"{dataset} is not a CoSQA set: it has no {' or '.join(missing)}")
    try:
        corpus, queries = (json.loads(f.read_text()) for f in files)
        return corpus, [(q["doc"], int(q["retrieval_idx"])) for q in queries]
    except (OSError, ValueError, KeyError, TypeError) as ex:
        raise ValueError(f"cannot read the CoSQA set in {dataset}: {ex!r}") from None


def _write_corpus(root: Path, corpus: dict[str, int]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for code, idx in corpus.items():
        path = root / f"f{idx}.py"
        if not path.exists() or path.read_text() != code:
            path.write_text(code)


def score(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {"mrr@10": round(sum(1 / r for r in ranks if r and r <= 10) / n, 4),
            **{f"recall@{k}": round(sum(1 for r in ranks if r and r <= k) / n, 4)
               for k in (1, 5, 10)}}


def main(args) -> int:
    dataset = Path(args.dataset)
    try:
        corpus, queries = _load(dataset, args.split)
    except ValueError as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="nm-eval-code-"))
    try:
        return _evaluate(args, work, corpus, queries)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def throwaway_kernel(work: Path, *, model: bool = True, plugins=("index",)):
    """A kernel in this process whose home (and, when the projects it indexes are not ours to
    write in, every project's state) lives under ``work``; ``model=False`` builds keyword
    and graph only, the fastest way to an index when no vector is needed."""
    from neuralmind import Kernel, load_settings
    embeddings: dict = {"warm": False}
    if not model:
        empty = work / "no-model"
        empty.mkdir(parents=True, exist_ok=True)
        embeddings["model_dir"] = str(empty)
    settings = load_settings(kernel={"home": str(work / "home"), "state_dir": str(work / "state")},
                             embeddings=embeddings)
    return Kernel(settings, plugins=list(plugins), load_entrypoints=False)


def _evaluate(args, work: Path, corpus, queries) -> int:
    from neuralmind import APIError
    from plugins.index import plugin, search
    _write_corpus(work / "cosqa", corpus)
    kernel = throwaway_kernel(work)
    service = plugin._service(kernel)
    overrides = {"embed_chars": args.embed_chars, "embed_mode": args.embed_mode,
                 "hub_weight": args.hub_weight}
    service.settings = service.settings.model_copy(
        update={k: v for k, v in overrides.items() if v is not None})
    project, _ = kernel.projects.register(str(work / "cosqa"))
    started = time.perf_counter()
    built = service.run_build(project, trigger="eval")
    build_s = time.perf_counter() - started
    store, key = service.store(project), service.db_path(project)
    paths = store.node_paths()
    report = {"dataset": "cosqa", "split": args.split, "queries": len(queries),
              "corpus": len(corpus), "embed_chars": service.settings.embed_chars,
              "embed_mode": service.settings.embed_mode,
              "hub_weight": service.settings.hub_weight,
              "build_s": round(build_s, 2), "chunks_embedded": built["chunks_embedded"],
              "modes": {}}
    weights = args.keyword_weights or [service.settings.keyword_weight]
    runs = [("keyword", 0.0), ("semantic", 0.0)] + [
        ("hybrid" if len(weights) == 1 else f"hybrid@{w:g}", w) for w in weights]
    for mode, weight in runs:
        ranks, t0 = [], time.perf_counter()
        try:
            for text, gold in queries:
                ranked, _ = search.search(kernel, service.matrices, store, key, text, 50,
                                          mode.split("@")[0], None, weight,
                                          service.settings.hub_weight)
                files: list[str] = []
                for nid, _ in ranked:
                    if paths[nid] not in files:
                        files.append(paths[nid])
                want = f"f{gold}.py"
                ranks.append(files.index(want) + 1 if want in files else None)
        except APIError as ex:
            report["modes"][mode] = {"error": ex.message}
            continue
        report["modes"][mode] = {**score(ranks), "ms_per_query": round(
            (time.perf_counter() - t0) * 1000 / max(1, len(queries)), 2)}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"CoSQA {args.split}: {len(queries)} queries over {len(corpus)} functions; "
              f"embed {report['embed_mode']} ≤ {report['embed_chars']} chars; hub weight "
              f"{report['hub_weight']:g}; build "
              f"{report['build_s']} s ({report['chunks_embedded']} embedded)")
        print(f"{'mode':<10}{'MRR@10':>8}{'R@1':>8}{'R@5':>8}{'R@10':>8}{'ms/q':>8}")
        for mode, m in report["modes"].items():
            if "error" in m:
                print(f"{mode:<10} unavailable: {m['error']}")
            else:
                print(f"{mode:<10}{m['mrr@10']:>8.3f}{m['recall@1']:>8.3f}{m['recall@5']:>8.3f}"
                      f"{m['recall@10']:>8.3f}{m['ms_per_query']:>8.2f}")
    return 0
