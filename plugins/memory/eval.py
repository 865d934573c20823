"""``neuralmind eval memory``: retrieval quality of keyword, semantic and hybrid search.

A dataset is loaded into a throwaway store through :class:`MemoryStore` (kept in ``--work``
so vectors are embedded once), every query runs through the same :class:`Searcher` the
server uses, and recall@1/5/10, MRR@10 and nDCG@10 are printed per mode and per query kind.
Two layouts are read: BEIR (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) and
LoCoMo (``*.json`` lists of conversations; each conversation is its own store, each dialogue
turn one record whose title carries the speaker and the session date).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from neuralmind import today
from plugins.memory import records
from plugins.memory.decay import policy_of
from plugins.memory.models import MemorySettings
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore

METRICS = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10")
LAYOUT_VERSION = "1"  # bump when the record text changes, so cached stores are rebuilt
MODES = ("keyword", "semantic", "hybrid")


@dataclass
class Collection:
    """Documents that share one store, and the queries asked of them."""

    name: str
    docs: list[tuple[str, str, str]]  # (id, title, text)
    queries: list[tuple[str, str, set[str]]] = field(default_factory=list)  # (text, kind, gold)


def load_beir(root: Path, split: str) -> list[Collection]:
    docs = []
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            text = d.get("text") or ""
            docs.append((str(d["_id"]), d.get("title") or text[:80] or str(d["_id"]), text or "-"))
    texts = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            texts[str(q["_id"])] = q["text"]
    gold: dict[str, set[str]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and not parts[-1].strip().lstrip("-").isdigit():
                continue  # header
            if len(parts) >= 3 and int(parts[2]) > 0:
                gold.setdefault(parts[0], set()).add(parts[1])
    col = Collection(root.name, docs)
    col.queries = [(texts[q], "all", rel) for q, rel in gold.items() if q in texts]
    return [col]


def load_locomo(root: Path) -> list[Collection]:
    out = []
    for path in sorted(root.glob("*.json")):
        for conv in json.loads(path.read_text(encoding="utf-8")):
            c = conv["conversation"]
            docs = []
            for key, turns in c.items():
                if not (key.startswith("session_") and isinstance(turns, list)):
                    continue
                date = c.get(f"{key}_date_time", "")
                for t in turns:
                    text = t.get("text") or "-"
                    if t.get("blip_caption"):
                        text += f" [shares a photo: {t['blip_caption']}]"
                    docs.append((t["dia_id"].strip(), f"{t['speaker']} on {date}", text))
            col = Collection(f"{path.stem}-{conv.get('sample_id', len(out))}", docs)
            ids = {d[0] for d in docs}
            for qa in conv["qa"]:
                cat = qa.get("category")
                gold = {e for ev in qa.get("evidence", []) for e in re.split(r"[;,\s]+", ev)
                        if e in ids}
                if cat == 5 or not gold or "question" not in qa:
                    continue  # category 5 is unanswerable by design
                col.queries.append((qa["question"], f"category {cat}", gold))
            out.append(col)
    return out


def load(root: Path, split: str) -> list[Collection]:
    if (root / "corpus.jsonl").is_file():
        return load_beir(root, split)
    if any(root.glob("*.json")):
        return load_locomo(root)
    raise SystemExit(f"neuralmind: {root} is neither a BEIR folder nor LoCoMo *.json files")


def open_store(kernel, work: Path, col: Collection) -> MemoryStore:
    """The collection's store in ``work``, loaded once; reused while its records match."""
    folder = work / re.sub(r"[^A-Za-z0-9_.-]", "_", col.name)
    marker = folder / "loaded.json"
    want = {"layout": LAYOUT_VERSION, "docs": len(col.docs),
            "sha": hashlib.sha1("".join(d[0] for d in col.docs).encode()).hexdigest()}
    if marker.is_file() and json.loads(marker.read_text()) == want:
        return MemoryStore(kernel.open_database(folder / "memory.db", MIGRATIONS))
    shutil.rmtree(folder, ignore_errors=True)
    store = MemoryStore(kernel.open_database(folder / "memory.db", MIGRATIONS))
    now = "2000-01-01T00:00:00.000Z"
    ops, seen = [], set()
    for mid, title, text in col.docs:
        if mid in seen:
            continue
        seen.add(mid)
        rec = records.build({"id": mid, "title": title, "rationale": text}, root=folder, now=now,
                            head="", errors=[])
        ops.append(("create", rec, records.content_sha(rec), {}, "eval"))
    for i in range(0, len(ops), 1000):
        store.apply_batch(ops[i:i + 1000], now)
    marker.write_text(json.dumps(want))
    return store


def embed_all(searcher: Searcher, store: MemoryStore, embedder, name: str) -> None:
    total = len(store.missing_vectors(embedder.model_id))
    if not total:
        return
    started, done = time.monotonic(), [0]

    def progress() -> bool:
        done[0] += 1
        print(f"\r  {name}: embedding {min(done[0] * 128, total)}/{total} "
              f"({time.monotonic() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        return False

    searcher.fill(store, embedder, batch=128, stop=progress)
    print(file=sys.stderr)


def score(ranked: list[str], gold: set[str]) -> dict[str, float]:
    top = ranked[:10]
    out = {f"recall@{k}": len(set(ranked[:k]) & gold) / len(gold) for k in (1, 5, 10)}
    first = next((i for i, mid in enumerate(top) if mid in gold), None)
    out["mrr@10"] = 0.0 if first is None else 1.0 / (first + 1)
    dcg = sum(1.0 / math.log2(i + 2) for i, mid in enumerate(top) if mid in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["ndcg@10"] = dcg / ideal
    return out


def variant(spec: str, base: MemorySettings) -> tuple[str, MemorySettings]:
    """``rrf:K``, ``blend:W`` (keyword weight), ``floor:C`` (hybrid floor); the legs' pools are
    the base settings' (variants re-fuse the same two legs)."""
    kind, _, value = spec.partition(":")
    make = {"rrf": lambda v: {"fusion": "rrf", "rrf_k": int(v or 60)},
            "blend": lambda v: {"fusion": "blend", "keyword_weight": float(v or 0.5)},
            "floor": lambda v: {"hybrid_floor": float(v or 0.3)}}.get(kind)
    try:
        updates = make(value) if make else None
    except ValueError:
        updates = None
    if updates is None:
        raise SystemExit(f"neuralmind: unknown fusion variant {spec!r} (rrf:K, blend:W, floor:C)")
    return f"hybrid[{spec}]", MemorySettings(**{**base.model_dump(), **updates})


def evaluate(collections: list[Collection], modes: list[str], settings: MemorySettings,
             variants: list[str], work: Path, kernel, semantic: bool, decay: bool = True) -> dict:
    """Every query of every collection in each mode; ``semantic=False`` never loads a model.
    Hybrid ranks with each store's decay policy (the default: on) unless ``decay`` is off."""
    searcher = Searcher(settings, kernel)
    extra = [(name, Searcher(s, kernel)) for name, s in
             (variant(v, settings) for v in variants)]
    embedder = kernel.embedder if semantic else None
    names = [*modes, *(name for name, _ in extra)]
    sums: dict[str, dict[str, dict[str, float]]] = {m: {} for m in names}
    counts: dict[str, int] = {}
    latency: dict[str, float] = {"keyword": 0.0, "semantic": 0.0}
    everything = {"status": "ALL"}
    on, limit = today(), 10
    for col in collections:
        store = open_store(kernel, work, col)
        policy = policy_of(store.config("decay")) if decay else None
        if embedder is not None:
            embed_all(searcher, store, embedder, col.name)
        for text, kind, gold in col.queries:
            counts[kind] = counts.get(kind, 0) + 1
            t0 = time.perf_counter()
            kw = searcher.keyword(store, text, everything, on, searcher.pool(limit), full=False)
            t1 = time.perf_counter()
            sem = (searcher.semantic(store, text, everything, on, searcher.pool(limit))
                   if embedder is not None else [])
            latency["keyword"] += t1 - t0
            latency["semantic"] += time.perf_counter() - t1
            ranked = {"keyword": [r["id"] for r, _ in kw][:limit],
                      "semantic": [h[0] for h in sem if h[1] >= settings.semantic_floor][:limit],
                      "hybrid": [r["id"] for r, _ in searcher.hybrid(store, kw, sem, limit,
                                                                     policy)]}
            for name, other in extra:
                ranked[name] = [r["id"] for r, _ in other.hybrid(store, kw, sem, limit, policy)]
            for name in names:
                for metric, value in score(ranked[name], gold).items():
                    bucket = sums[name].setdefault(kind, dict.fromkeys(METRICS, 0.0))
                    bucket[metric] += value
        store.db.close()
    total = sum(counts.values())
    result = {"queries": total, "by_kind": {}, "leg_ms": {k: round(v * 1000 / max(total, 1), 3)
                                                         for k, v in latency.items()}}
    for name in names:
        overall = {m: round(sum(b[m] for b in sums[name].values()) / max(total, 1), 4)
                   for m in METRICS}
        result[name] = overall
        result["by_kind"][name] = {k: {m: round(b[m] / counts[k], 4) for m in METRICS}
                                   for k, b in sorted(sums[name].items())}
    return result


def table(result: dict, names: list[str]) -> str:
    lines = [f"{'mode':<22}" + "".join(f"{m:>11}" for m in METRICS)]
    for name in names:
        lines.append(f"{name:<22}" + "".join(f"{result[name][m]:>11.4f}" for m in METRICS))
        for kind, values in result["by_kind"][name].items():
            if len(result["by_kind"][name]) > 1:
                lines.append(f"  {kind:<20}" + "".join(f"{values[m]:>11.4f}" for m in METRICS))
    return "\n".join(lines)


def main(args) -> int:
    from neuralmind import Kernel, load_settings
    settings = load_settings(args.config)
    msettings = settings.section("memory", MemorySettings)
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        print(f"neuralmind: --mode takes a comma-separated subset of {', '.join(MODES)}",
              file=sys.stderr)
        return 2
    root = Path(args.dataset).expanduser().resolve()
    if not root.is_dir():
        print(f"neuralmind: no dataset folder {root}", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.gettempdir()) / (
        "neuralmind-eval-memory/" + root.name + "-" + hashlib.sha1(str(root).encode()).hexdigest()[:8])
    collections = load(root, args.split)
    if args.limit_queries:
        for col in collections:
            col.queries = col.queries[: args.limit_queries]
    semantic = bool(set(modes) - {"keyword"} or args.fusion)
    # a kernel of no plugins, at home in the work folder: the embedder, its int8 model cached
    # there, and the side threads; nothing of the user's own home is touched
    kernel = Kernel(load_settings(args.config, kernel={"home": str(work / "home")},
                                  embeddings={"warm": False}), plugins=[], load_entrypoints=False)
    started = time.monotonic()
    try:
        result = evaluate(collections, modes, msettings, args.fusion, work, kernel, semantic,
                          not args.no_decay)
    finally:
        kernel.shutdown()
    result["seconds"] = round(time.monotonic() - started, 1)
    result["dataset"] = root.name
    result["decay"] = not args.no_decay
    if semantic:
        result["model_id"] = kernel.embedder.model_id
    names = [*modes, *(variant(v, msettings)[0] for v in args.fusion)]
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{root.name}: {result['queries']} queries, {sum(len(c.docs) for c in collections)} "
              f"records in {len(collections)} store(s); decay {'on' if result['decay'] else 'off'}"
              f"; store {work}")
        print(table(result, names))
        print(f"mean leg time per query: keyword {result['leg_ms']['keyword']} ms, semantic "
              f"{result['leg_ms']['semantic']} ms (in-process); {result['seconds']} s in all")
    return 0
