"""Embedding speed and memory: our OnnxEmbedder against a bare onnxruntime session on the same
model file, in the same run.

    python bench/embed.py [--threads N] [--queries 100] [--short 400] [--chunks 60] [--rounds 3]

Every figure comes from its own subprocess (clean RSS, no warm caches shared between the two).
Texts: short sentences are SciFact claims (the eval set, else falcon's docstring first lines);
code chunks are ~200-token runs of lines from falcon's installed source. The bare session is
what a plain script does: batches of 32 in input order, padded to each batch's longest text.
Figures are from a shared 2-core machine: compare the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import eval_dir, model_cache, positive_int  # noqa: E402

BARE_BATCH = 32


def status_mb(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- texts -------------------------------------------------------------------------------

def short_sentences(n: int) -> list[str]:
    claims = eval_dir() / "scifact" / "queries.jsonl"
    if claims.is_file():
        texts = [json.loads(line)["text"] for line in claims.read_text().splitlines() if line]
    else:
        import ast
        texts = [doc.strip().splitlines()[0] for path in falcon_files()
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                 and (doc := ast.get_docstring(node))]
    return (texts * (n // len(texts) + 1))[:n]


def falcon_files() -> list[Path]:
    import importlib.util
    spec = importlib.util.find_spec("falcon")
    root = Path(spec.submodule_search_locations[0])
    return sorted(p for p in root.rglob("*.py") if "test" not in p.name)


def code_chunks(n: int, tokenizer) -> list[str]:
    """Consecutive source lines gathered until they reach ~200 tokens."""
    chunks: list[str] = []
    for path in falcon_files():
        lines: list[str] = []
        for line in path.read_text().splitlines():
            lines.append(line)
            if len(lines) % 4 == 0 and len(tokenizer.encode("\n".join(lines)).ids) >= 200:
                chunks.append("\n".join(lines))
                lines = []
                if len(chunks) == n:
                    return chunks
    return chunks


# -- the two contenders ------------------------------------------------------------------

class Bare:
    """A plain onnxruntime session on the same file with the same thread count."""

    def __init__(self, threads: int):
        import onnxruntime as ort
        from kernel.embeddings import locate_model, _tokenizer
        files = locate_model(None)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(files.model), options,
                                            providers=["CPUExecutionProvider"])
        self.tokenizer = _tokenizer(files.tokenizer, 256)
        self.tokenizer.enable_padding()

    def embed(self, texts: list[str]):
        import numpy as np
        out = []
        for start in range(0, len(texts), BARE_BATCH):
            encs = self.tokenizer.encode_batch(texts[start:start + BARE_BATCH])
            ids = np.array([e.ids for e in encs], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
            hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.vstack(out).astype(np.float32)


def contender(kind: str, threads: int, cache: str):
    """``cache``: where ours keeps its derived int8 model (the parent's folder, removed when
    the run ends; the first part derives it, so "load + first" still counts the derivation)."""
    if kind == "bare":
        return Bare(threads)
    from kernel.embeddings import OnnxEmbedder
    embedder = OnnxEmbedder(threads=threads, remember=0,  # each round runs the model
                            cache_dir=Path(cache))
    embedder.load()
    return embedder


# -- parts, each run in its own process --------------------------------------------------

def measure(model, shorts: list[str], chunks: list[str], queries: int) -> dict:
    import numpy as np
    laps = []
    for text in shorts[:queries]:
        t = time.perf_counter()
        model.embed([text])
        laps.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    model.embed(shorts)
    short_rate = len(shorts) / (time.perf_counter() - t)
    t = time.perf_counter()
    model.embed(chunks)
    code_rate = len(chunks) / (time.perf_counter() - t)
    return {"p50_ms": float(np.percentile(laps, 50)), "p95_ms": float(np.percentile(laps, 95)),
            "short_per_s": short_rate, "code_per_s": code_rate}


def part_speed(args) -> dict:
    """Both contenders in one process, measured in alternating rounds so that the load other
    work puts on the machine falls on both alike; each figure is the median over the rounds."""
    import numpy as np
    from kernel.embeddings import locate_model, _tokenizer
    shorts = short_sentences(args.short)
    chunks = code_chunks(args.chunks, _tokenizer(locate_model(None).tokenizer, 256))
    models, rounds = {}, {"bare": [], "ours": []}
    for kind in rounds:
        started = time.perf_counter()
        models[kind] = contender(kind, args.threads, args.model_cache)
        models[kind].embed(["warm up"])
        rounds[kind].append({"load_s": time.perf_counter() - started})
    mine, theirs = models["ours"].embed(chunks[:16]), models["bare"].embed(chunks[:16])
    for _ in range(args.rounds):
        for kind, model in models.items():
            rounds[kind].append(measure(model, shorts, chunks, args.queries))
    out = {kind: {key: float(np.median([r[key] for r in runs if key in r]))
                  for key in runs[-1] | runs[0]} for kind, runs in rounds.items()}
    out["chunks"] = len(chunks)
    out["cosine_min"] = float((mine * theirs).sum(axis=1).min())
    return out


def part_memory(kind: str, args) -> dict:
    """RSS with the model loaded, then the peak and the resting RSS over an index-sized run
    (every code chunk plus the short sentences, as one call)."""
    from kernel.embeddings import locate_model, _tokenizer
    texts = code_chunks(args.chunks, _tokenizer(locate_model(None).tokenizer, 256))
    texts += short_sentences(args.short)
    base = status_mb("VmRSS")
    model = contender(kind, args.threads, args.model_cache)
    model.embed(["warm up"])
    loaded = status_mb("VmRSS")
    model.embed(texts)
    return {"before_mb": base, "loaded_mb": loaded, "peak_mb": status_mb("VmHWM"),
            "rest_mb": status_mb("VmRSS"), "texts": len(texts)}


def run_part(part: str, kind: str, args) -> dict:
    cmd = [sys.executable, __file__, "--part", part, "--kind", kind, "--threads", str(args.threads),
           "--queries", str(args.queries), "--short", str(args.short), "--chunks", str(args.chunks),
           "--rounds", str(args.rounds), "--model-cache", args.model_cache]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=positive_int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--queries", type=positive_int, default=100)
    parser.add_argument("--short", type=positive_int, default=400)
    parser.add_argument("--chunks", type=positive_int, default=60)
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--part", choices=["speed", "memory"], help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=["ours", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--model-cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        result = part_speed(args) if args.part == "speed" else part_memory(args.kind, args)
        print(json.dumps(result))
        return

    with model_cache() as args.model_cache:
        speed = run_part("speed", "ours", args)
        memory = {kind: run_part("memory", kind, args) for kind in ("bare", "ours")}
    ours, bare = speed["ours"], speed["bare"]
    print(f"embeddings bench: {args.threads} onnxruntime threads, {os.cpu_count()} cores (shared "
          f"machine); {args.queries} single queries, {args.short} short sentences, "
          f"{speed['chunks']} code chunks of ~200 tokens; medians of {args.rounds} alternating rounds")
    print(f"{'':22}{'bare session':>14}{'ours':>10}{'ours/bare':>11}")
    for key, label, better in (("p50_ms", "query p50 ms", "low"), ("p95_ms", "query p95 ms", "low"),
                               ("short_per_s", "short sentences/s", "high"),
                               ("code_per_s", "code chunks/s", "high"),
                               ("load_s", "load + first s", "low")):
        ratio = ours[key] / bare[key] if better == "high" else bare[key] / ours[key]
        print(f"{label:22}{bare[key]:>14.2f}{ours[key]:>10.2f}{ratio:>10.2f}×")
    for key, label in (("loaded_mb", "RSS loaded MB"), ("peak_mb", "RSS peak MB"),
                       ("rest_mb", "RSS after run MB")):
        print(f"{label:22}{memory['bare'][key]:>14.0f}{memory['ours'][key]:>10.0f}")
    print(f"(memory run: {memory['ours']['texts']} texts in one call; ratios: speed ours/bare, "
          "latency bare/ours, so > 1 means ours is better; least cosine ours vs bare on 16 "
          f"chunks {speed['cosine_min']:.6f})")
    print(f"SUMMARY embed: query p50 {ours['p50_ms']:.1f} ms, "
          f"short {ours['short_per_s']:.0f}/s ({ours['short_per_s'] / bare['short_per_s']:.2f}× bare), "
          f"code {ours['code_per_s']:.1f}/s ({ours['code_per_s'] / bare['code_per_s']:.2f}× bare), "
          f"RSS loaded {memory['ours']['loaded_mb']:.0f} MB, peak {memory['ours']['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
