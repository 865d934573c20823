"""``neuralmind eval contradictions``: precision and recall of the contradiction detector on
labelled pairs of records (bench/data/contradictions, PROVENANCE.md there).

Each line of a pairs file holds ``a`` and ``b`` (title, rationale, files_affected, tags), a
``label`` (contradicting, compatible, paraphrase, unrelated) and a ``split``; a positive is a
pair labelled contradicting. The detector sees each pair as the server does at an explicit
check: with the cosine of the two records' title + rationale vectors from the packaged model
(``--no-cosine``: word overlap instead, as on a write). Figures are printed per split, for the
labelled splits together, and for everything; the ``fresh`` split was written after the
detector's rules were frozen and was never used to tune them — it is the honest figure.
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
from pathlib import Path

from plugins.memory import detector

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "contradictions"
DEFAULT_PAIRS = ("pairs.jsonl", "pairs_fresh.jsonl")
SPLIT_ORDER = ("dev", "check", "fresh")


class BadPairs(ValueError):
    """A pairs file holds a line that is not a labelled pair."""


def load(paths: list[Path]) -> list[dict]:
    """The pairs of the JSONL files ``paths``, each read past a leading byte-order mark (as
    ``eval memory`` reads its datasets); :class:`BadPairs` naming the first file or line that
    is not UTF-8 text or not a labelled pair."""
    pairs = []
    for path in paths:
        with open(path, encoding="utf-8-sig") as fh:
            try:
                lines = list(enumerate(fh, start=1))
            except UnicodeDecodeError:
                raise BadPairs(f"{path} is not UTF-8 text") from None
        for n, line in lines:
            if not line.strip():
                continue
            try:
                pair = json.loads(line)
            except ValueError:
                pair = None
            if not (isinstance(pair, dict) and isinstance(pair.get("label"), str) and all(
                    isinstance(pair.get(side), dict) and isinstance(pair[side].get(f), str)
                    for side in "ab" for f in ("title", "rationale"))):
                raise BadPairs(f"{path} line {n} is not a labelled pair: a JSON object "
                               "with a, b ({title, rationale, …}), label")
            pair.setdefault("split", path.stem)
            pairs.append(pair)
    return pairs


def text(rec: dict) -> str:
    return f"{rec['title']}\n{rec['rationale']}"


def cosines(pairs: list[dict], embedder) -> list[float]:
    texts = sorted({text(r) for p in pairs for r in (p["a"], p["b"])})
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    return [float(vectors[text(p["a"])] @ vectors[text(p["b"])]) for p in pairs]


def figures(rows: list[tuple[dict, detector.Verdict]]) -> dict:
    tp = sum(1 for p, v in rows if v.is_contradiction and p["label"] == "contradicting")
    fp = sum(1 for p, v in rows if v.is_contradiction and p["label"] != "contradicting")
    fn = sum(1 for p, v in rows if not v.is_contradiction and p["label"] == "contradicting")
    return {"pairs": len(rows), "positives": tp + fn, "precision": round(tp / (tp + fp), 3)
            if tp + fp else 0.0, "recall": round(tp / (tp + fn), 3) if tp + fn else 0.0,
            "tp": tp, "fp": fp, "fn": fn, "tn": len(rows) - tp - fp - fn}


def evaluate(pairs: list[dict], cos: list[float] | None, threshold: float) -> dict:
    rows = [(p, detector.detect(p["a"], p["b"], None if cos is None else cos[i], threshold))
            for i, p in enumerate(pairs)]
    splits = sorted({p["split"] for p in pairs},
                    key=lambda s: (SPLIT_ORDER.index(s) if s in SPLIT_ORDER else 9, s))
    out = {"threshold": threshold, "cosine": cos is not None,
           "splits": {s: figures([r for r in rows if r[0]["split"] == s]) for s in splits}}
    labelled = [r for r in rows if r[0]["split"] != "fresh"]
    if len(splits) > 1 and labelled and len(labelled) < len(rows):
        out["splits"]["labelled (not fresh)"] = figures(labelled)
    out["splits"]["all"] = figures(rows)
    by_kind: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for p, v in rows:
        if p["label"] == "contradicting":
            by_kind[p.get("kind_of_conflict") or "?"][1] += 1
            by_kind[p.get("kind_of_conflict") or "?"][0] += v.is_contradiction
    out["recall_by_kind"] = {k: f"{a}/{n}" for k, (a, n) in sorted(by_kind.items())}
    out["false_positives_by_label"] = dict(collections.Counter(
        p["label"] for p, v in rows if v.is_contradiction and p["label"] != "contradicting"))
    out["errors"] = [{"id": p.get("id"), "split": p["split"], "label": p["label"],
                      "confidence": v.confidence, "explanation": v.explanation}
                     for p, v in rows if v.is_contradiction != (p["label"] == "contradicting")]
    return out


def main(args) -> int:
    from neuralmind import ConfigError, Kernel, load_settings
    paths = [Path(p).expanduser() for p in args.pairs] or [DATA / name for name in DEFAULT_PAIRS]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"neuralmind: no pairs file {', '.join(missing)}"
              + ("" if args.pairs else " (pass --pairs FILE)"), file=sys.stderr)
        return 2
    work = Path(tempfile.gettempdir()) / "neuralmind-eval-contradictions"
    try:  # read even when --no-cosine leaves the model out: a bad --config is still named
        settings = load_settings(args.config, kernel={"home": str(work / "home")},
                                 embeddings={"warm": False})
    except ConfigError as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    if not 0.0 <= args.threshold <= 1.0:
        print("neuralmind: --threshold is a confidence between 0 and 1", file=sys.stderr)
        return 2
    try:
        pairs = load(paths)
    except BadPairs as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    cos = None
    if not args.no_cosine:
        kernel = Kernel(settings, plugins=[], load_entrypoints=False)
        try:
            cos = cosines(pairs, kernel.embedder)
        finally:
            kernel.shutdown()
    result = evaluate(pairs, cos, args.threshold)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{len(pairs)} pairs from {', '.join(str(p) for p in paths)}; threshold "
          f"{args.threshold}; subject from {'MiniLM cosine' if cos else 'word overlap'}")
    print(f"{'split':22}{'pairs':>6}{'contra.':>8}{'precision':>10}{'recall':>8}"
          f"{'tp':>5}{'fp':>5}{'fn':>5}{'tn':>5}")
    for name, f in result["splits"].items():
        blind = "  (blind: never used to tune)" if name == "fresh" else ""
        print(f"{name:22}{f['pairs']:>6}{f['positives']:>8}{f['precision']:>10.3f}"
              f"{f['recall']:>8.3f}{f['tp']:>5}{f['fp']:>5}{f['fn']:>5}{f['tn']:>5}{blind}")
    print("recall by kind of conflict:", ", ".join(f"{k} {v}" for k, v in
                                                   result["recall_by_kind"].items()))
    print("false positives by label:", result["false_positives_by_label"] or "none")
    if args.errors:
        for e in result["errors"]:
            print(f"  {'FP' if e['label'] != 'contradicting' else 'FN'} {e['split']} {e['id']} "
                  f"({e['label']}, {e['confidence']}): {e['explanation']}")
    return 0
