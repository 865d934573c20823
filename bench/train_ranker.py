"""Train the second stage of hybrid memory search: plugins/memory/data/ranker.json.

Data (nothing else): the eval sets in ``../shared/eval`` (``$NEURALMIND_EVAL_DIR``) —
SciFact's corpus with its **train** qrels (809 claims over 5,183 abstracts, CC BY-NC 2.0) and
LoCoMo's ``locomo_dev5.json`` (5 conversations, 760 questions of categories 1–4, CC BY-NC
4.0). Neither set ships: the model holds tree thresholds learned from them, not their text.
Other splits of both sets are kept aside by the project to check the figures.

Every input comes from the product's own code, exactly as a search makes it: the stores
``neuralmind eval memory --work DIR/<set>`` builds (plugins.memory.eval.open_store; passages
and sessions as the default settings make them), the legs of ``Searcher.keyword`` and
``Searcher.semantic`` (pools of 40), and ``rerank.gather`` — the call hybrid search makes.
Labels: a candidate is relevant when the set's gold names it.

Model: LambdaMART (LightGBM ``lambdarank``), 150 trees of at most 7 leaves, monotone in the
similarity, keyword and coverage features; exported as arrays numpy evaluates
(rerank.Model), checked against LightGBM's own predictions. Calibration: Platt scaling of
the out-of-fold scores, so a score reads as the chance the record is relevant.

Folds: SciFact's claims in 5 seeded folds; LoCoMo one fold per conversation (a held-out
conversation's records are never seen). Fold ``f``'s model is trained on every other fold of
both sets; the figures printed are out-of-fold only, and the fold models go to
``bench/data/ranker_folds.json`` so ``neuralmind eval memory --folds`` reproduces them.

LightGBM and scikit-learn are needed here only (never by the product):

    nice /path/to/venv-with-lightgbm/bin/python bench/train_ranker.py --work /tmp/nm-eval
    # then: neuralmind eval memory --dataset ../shared/eval/scifact --work /tmp/nm-eval/scifact \\
    #           --folds bench/data/ranker_folds.json
The JSON files change only when this script is run on purpose; commit them with the figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from neuralmind import today  # noqa: E402
from plugins.memory import eval as memeval  # noqa: E402
from plugins.memory import rerank  # noqa: E402
from plugins.memory.features import FEATURES, F  # noqa: E402
from plugins.memory.models import MemorySettings  # noqa: E402
from plugins.memory.search import Searcher, terms  # noqa: E402

FOLDS, SEED = 5, 16
MONOTONE_UP = {"cos", "cos_gap", "cos_topk_z", "bm25", "bm25_norm", "blend", "cover", "cover_idf",
               "title_cover", "title_cover_idf", "bigram", "bm25_own", "bm25_own_norm", "prf_cos",
               "prf_gap"}
MONOTONE_DOWN = {"cos_rank", "kw_rank", "cover_idf_rank", "cos_cand_rank"}
LGB = dict(objective="lambdarank", n_estimators=150, learning_rate=0.1, num_leaves=7,
           min_child_samples=30, subsample=0.8, subsample_freq=1, colsample_bytree=0.8,
           verbose=-1, n_jobs=1, random_state=SEED, lambdarank_truncation_level=20,
           monotone_constraints_method="advanced")
HEAD = {"scifact": "ndcg@10", "locomo": "recall@10"}


class Example:
    """One training query: its candidates' rows, labels, fold and gold."""

    def __init__(self, dataset, collection, text, fold, cands, gold):
        self.dataset, self.collection, self.text, self.fold = dataset, collection, text, fold
        self.ids, self.X = cands.ids, cands.X
        self.y = np.array([m in gold for m in cands.ids], np.int32)
        self.gold = gold


def examples(eval_dir: Path, work: Path, kernel) -> tuple[list[Example], list[dict]]:
    """Every training query through the product's code, and what was trained on."""
    settings = MemorySettings()
    searcher = Searcher(settings, kernel)
    on, pool, everything = today(), searcher.pool(10), {"status": "ALL"}
    out, trained_on = [], []
    for dataset in HEAD:
        collections = memeval.load(eval_dir / dataset, "train")
        trained_on.append({"dataset": dataset, "split": "train" if dataset == "scifact" else
                           "locomo_dev5", "queries": sum(len(c.queries) for c in collections),
                           "digest": memeval.digest(collections)})
        rng = np.random.default_rng(SEED)
        for ci, col in enumerate(collections):
            store = memeval.open_store(kernel, work / dataset, col)
            memeval.embed_all(searcher, store, kernel.embedder, col.name)
            folds = (rng.permutation(len(col.queries)) % FOLDS if dataset == "scifact"
                     else np.full(len(col.queries), ci % FOLDS))
            for (text, _, gold), fold in zip(col.queries, folds):
                kw = searcher.keyword(store, text, everything, on, pool, full=False)
                leg = searcher.semantic(store, text, everything, on, pool)
                cands = rerank.gather(store, terms(text), [(r["id"], s) for r, s in kw],
                                      leg.hits, leg, settings.session_context)
                out.append(Example(dataset, col.name, text, int(fold), cands, gold))
            store.db.close()
            print(f"  {dataset} {col.name}: {len(col.queries)} queries", file=sys.stderr)
    return out, trained_on


def export(booster) -> dict:
    """LightGBM's trees as padded arrays for rerank.Model."""
    trees = []
    for info in booster.dump_model()["tree_info"]:
        nodes: list = []

        def walk(n):
            i = len(nodes)
            nodes.append(None)
            if "leaf_value" in n:
                nodes[i] = (-1, 0.0, -1, -1, n["leaf_value"])
                return 0
            assert n["decision_type"] == "<=", n["decision_type"]
            left = len(nodes)
            dl = walk(n["left_child"])
            right = len(nodes)
            dr = walk(n["right_child"])
            nodes[i] = (n["split_feature"], n["threshold"], left, right, 0.0)
            return 1 + max(dl, dr)

        depth = walk(info["tree_structure"])
        trees.append((nodes, depth))
    width = max(len(n) for n, _ in trees)

    def pad(k, fill):
        return [[node[k] for node in n] + [fill] * (width - len(n)) for n, _ in trees]

    return {"kind": "trees", "features": list(FEATURES),
            "trees": {"feature": pad(0, -1), "threshold": pad(1, 0.0), "left": pad(2, -1),
                      "right": pad(3, -1), "value": pad(4, 0.0),
                      "depth": max(d for _, d in trees)}}


def fit(train: list[Example]) -> dict:
    import lightgbm as lgb
    X = np.concatenate([e.X for e in train])
    y = np.concatenate([e.y for e in train])
    ranker = lgb.LGBMRanker(**LGB, monotone_constraints=[
        1 if f in MONOTONE_UP else -1 if f in MONOTONE_DOWN else 0 for f in FEATURES])
    ranker.fit(X, y, group=[len(e.ids) for e in train])
    spec = export(ranker.booster_)
    check = X[:500]
    assert np.allclose(rerank.Model(spec).score(check), ranker.predict(check), atol=1e-4), \
        "numpy inference differs from LightGBM's"
    return spec


def calibration(scores: np.ndarray, labels: np.ndarray) -> list[float]:
    """Platt scaling: P(relevant) = 1 / (1 + exp(-(a·score + b)))."""
    from sklearn.linear_model import LogisticRegression
    m = LogisticRegression(C=100.0).fit(scores[:, None], labels)
    return [float(m.coef_[0][0]), float(m.intercept_[0])]


def figures(data: list[Example], scores: dict[int, np.ndarray]) -> dict[str, dict[str, float]]:
    by: dict[str, list] = {}
    for i, e in enumerate(data):
        ranked = [e.ids[j] for j in np.argsort(-scores[i], kind="stable")]
        by.setdefault(e.dataset, []).append(memeval.score(ranked, e.gold))
    return {d: {k: round(float(np.mean([r[k] for r in rows])), 4) for k in rows[0]}
            for d, rows in by.items()}


def sets(ap: argparse.ArgumentParser) -> argparse.Namespace | None:
    """``--eval`` (the eval sets' folder) and ``--work`` (DIR/scifact, DIR/locomo: the stores
    ``neuralmind eval memory --work`` builds), parsed; None when the sets are missing."""
    ap.add_argument("--eval", type=Path, default=Path(os.environ.get(
        "NEURALMIND_EVAL_DIR", ROOT.parent / "shared" / "eval")), help="the eval sets' folder")
    ap.add_argument("--work", type=Path, required=True,
                    help="stores folder: DIR/scifact and DIR/locomo (shared with eval --work)")
    args = ap.parse_args()
    if not (args.eval / "scifact").is_dir() or not (args.eval / "locomo").is_dir():
        print(f"{ap.prog}: no SciFact/LoCoMo under {args.eval} (set NEURALMIND_EVAL_DIR)",
              file=sys.stderr)
        return None
    return args


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "plugins/memory/data/ranker.json")
    ap.add_argument("--folds-out", type=Path, default=ROOT / "bench/data/ranker_folds.json")
    args = sets(ap)
    if args is None:
        return 2
    kernel = memeval.eval_kernel(args.work)
    started = time.monotonic()
    try:
        data, trained_on = examples(args.eval, args.work, kernel)
    finally:
        kernel.shutdown()
    print(f"{len(data)} queries, {sum(len(e.ids) for e in data)} candidates "
          f"({time.monotonic() - started:.0f} s)", file=sys.stderr)

    specs, oof = [], {}
    for f in range(FOLDS):
        spec = fit([e for e in data if e.fold != f])
        model = rerank.Model(spec)
        specs.append(spec)
        for i, e in enumerate(data):
            if e.fold == f:
                oof[i] = model.score(e.X)
    platt = calibration(np.concatenate([oof[i] for i in range(len(data))]),
                        np.concatenate([e.y for e in data]))
    blend = figures(data, {i: e.X[:, F["blend"]] for i, e in enumerate(data)})
    out_of_fold = figures(data, oof)
    for spec in specs:
        spec["calibration"] = platt
    full = fit(data)
    full.update(calibration=platt, trained_on=trained_on, out_of_fold=out_of_fold,
                trained=dt.date.today().isoformat(),
                about="LambdaMART over both legs' pools (bench/train_ranker.py)")
    args.out.write_text(json.dumps(full, separators=(",", ":")) + "\n")
    args.folds_out.parent.mkdir(parents=True, exist_ok=True)
    args.folds_out.write_text(json.dumps({
        "about": "out-of-fold models of plugins/memory/data/ranker.json (bench/train_ranker.py)",
        "folds": {memeval.query_key(e.collection, e.text): e.fold for e in data},
        "models": specs}, separators=(",", ":")) + "\n")
    for d, head in HEAD.items():
        print(f"{d:<8} {head}: blend (0.5/0.5 min-max, today) {blend[d][head]:.4f}  "
              f"second stage out-of-fold {out_of_fold[d][head]:.4f}  "
              f"(recall@10 {blend[d]['recall@10']:.4f} → {out_of_fold[d]['recall@10']:.4f})")
    print(f"calibration a {platt[0]:.3f} b {platt[1]:.3f}; wrote {args.out} and {args.folds_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
