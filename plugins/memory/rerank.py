"""The second stage of hybrid search, and the relevance floor of every mode.

Hybrid search hands its two pools (the keyword leg's and the semantic leg's best records) to
:func:`gather`, which reads what the features need (the candidates' text, per-word record
counts, cosines, vectors, session neighbours) and builds their rows
(:mod:`plugins.memory.features`). :func:`nothing_found` is the floor: no record is close to
the query in meaning and none holds most of its rare words. The shipped :class:`Model`
(``data/ranker.json``, a LambdaMART ensemble trained by ``bench/train_ranker.py`` on the
eval sets' train/dev splits) orders the candidates; its calibration turns a score into the
probability that the record is relevant, which is what hybrid search publishes.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from plugins.memory.features import F, Candidates, Query, candidates
from plugins.memory.text import as_prefix

RANKER = "ranker.json"


class Model:
    """A ranking model from its JSON: ``{"kind": "trees", "features": [...], "trees":
    {"feature", "threshold", "left", "right", "value": [trees × nodes], "depth"},
    "calibration": [a, b]}`` or ``{"kind": "linear", "weights", "bias", ...}``.

    Trees are evaluated for all rows and trees at once: one flat node array where a leaf
    points at itself, so every row takes ``depth`` vectorised steps."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.kind = spec["kind"]
        self.columns = np.array([F[f] for f in spec["features"]])
        self.a, self.b = spec.get("calibration", (1.0, 0.0))
        if self.kind == "linear":
            self.w = np.array(spec["weights"], np.float64)
            self.bias = float(spec["bias"])
            return
        t = spec["trees"]
        feature = np.array(t["feature"], np.int64)  # [trees, nodes]; -1 marks a leaf
        trees, width = feature.shape
        leaf = feature < 0
        offset = (np.arange(trees) * width)[:, None]
        own = offset + np.arange(width)[None, :]
        self.feature = np.where(leaf, 0, feature).ravel()
        self.threshold = np.where(leaf, np.inf, np.array(t["threshold"], np.float64)).ravel()
        self.left = np.where(leaf, own, offset + np.array(t["left"], np.int64)).ravel()
        self.right = np.where(leaf, own, offset + np.array(t["right"], np.int64)).ravel()
        self.value = np.array(t["value"], np.float64).ravel()
        self.roots = offset.ravel()
        self.depth = int(t["depth"])

    def score(self, X: np.ndarray) -> np.ndarray:
        """One raw score per row (higher is better; comparable within a query)."""
        Z = np.asarray(X[:, self.columns], np.float64)
        if self.kind == "linear":
            return Z @ self.w + self.bias
        n, d = Z.shape
        flat = np.ascontiguousarray(Z).ravel()
        base = (np.arange(n) * d)[:, None]
        node = np.broadcast_to(self.roots, (n, len(self.roots)))
        for _ in range(self.depth):
            go_left = flat[base + self.feature[node]] <= self.threshold[node]
            node = np.where(go_left, self.left[node], self.right[node])
        return self.value[node].sum(1)

    def probability(self, scores: np.ndarray) -> np.ndarray:
        """The calibrated chance that a record is relevant (Platt scaling on out-of-fold
        scores of the training queries): comparable across queries, unlike raw scores."""
        return 1.0 / (1.0 + np.exp(-(self.a * scores + self.b)))


@lru_cache(maxsize=4)
def shipped(name: str = RANKER) -> Model:
    """The model packaged with the plugin (read once per process)."""
    text = resources.files("plugins.memory").joinpath("data", name).read_text(encoding="utf-8")
    return Model(json.loads(text))


def gather(store, words: list[str], keyword: list[tuple[str, float]],
           semantic: list[tuple[str, float, float]], leg, sessions: bool) -> Candidates:
    """The candidates of one hybrid search: the legs' pools as they found them, ``keyword``
    ``[(id, -bm25)]`` and ``semantic`` ``[(id, cosine, confidence)]``, with ``leg`` (a
    :class:`plugins.memory.search.SemanticLeg`) for any record's cosine, vector and session
    neighbours (``sessions``)."""
    pool = [(mid, cos) for mid, cos, _ in semantic]
    ids = list(dict.fromkeys([m for m, _ in keyword] + [m for m, _ in pool]))
    total = store.size_estimate()
    df, texts = store.doc_counts(words, total), store.texts(ids)
    # the model was trained reading a single letter as a prefix (bench/train_ranker.py) and
    # reads the query so until it is trained again; the floor reads it as the keyword leg
    # matches it, so a letter no record holds as a word (``é``) does not pass it
    cands = candidates(Query(words, df, total, letter_prefix=True), keyword, pool, leg.cosine,
                       texts, leg.vectors, leg.neighbours if sessions else None)
    if not all(map(as_prefix, words)):
        held = Query(words, df, total).coverage([" ".join(texts.get(m, ("", "")))
                                                 for m in cands.ids])
        cands.coverage = float(held.max(initial=0.0))
    return cands


def nothing_found(top_cos: float, coverage: float, settings,
                  best_probability: float | None = None) -> bool:
    """The relevance floor: no record is close to the query in meaning (best cosine below
    ``floor_cosine``) and none holds most of its rare words (best idf-weighted coverage below
    ``floor_coverage``) — and, where the second stage ranked the candidates, none is even
    ``floor_probability`` likely to be relevant (it reads more than both tests, which idf
    from a small store can mislead)."""
    return (top_cos < settings.floor_cosine and coverage < settings.floor_coverage
            and (best_probability is None or best_probability < settings.floor_probability))
