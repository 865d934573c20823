"""What the second stage of hybrid search knows about each candidate record.

A candidate is a record of either leg's pool. Its row holds both legs' scores and ranks, how
much of the query it holds (words weighted by rarity, title matches, query words side by
side, the shortest window holding them), its length, what the query is like, how it sits
among the other candidates' vectors, and how close in meaning its neighbours of the same
session are (dialogue turns answer each other). Numpy and the standard library only: the
model that weighs these columns is trained offline (``bench/train_ranker.py``).

Text matching works on bytes: each text is folded as the keyword index folds it (case,
accents, Chinese and Japanese pairs: :func:`plugins.memory.text.plain`), every non-word
character made a space, then searched with ``bytes.find``/``count`` for ``b" " + stem`` (a word
starting with a query word's light stem, as the keyword leg's prefix match does; the query's
words come folded alike from :func:`plugins.memory.search.terms`); Python only walks the hits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from plugins.memory.text import as_prefix, plain

K1, B = 1.2, 0.75  # bm25's usual constants, for the record's own bm25 over its text

FEATURES = (
    # the legs' own scores and ranks
    "cos", "cos_gap", "cos_topk_z", "cos_rank", "in_sem",
    "bm25", "bm25_norm", "kw_rank", "in_kw", "blend",
    # what of the query the record holds, weighted by rarity
    "cover", "cover_idf", "title_cover", "title_cover_idf", "bigram", "span", "cover_idf_rank",
    "bm25_own", "bm25_own_norm", "doc_len",
    # the query
    "q_terms", "q_idf_max", "q_idf_mean", "kw_hits", "top_cos", "top_bm25",
    # vectors among the candidates
    "prf_cos", "prf_gap", "density", "cos_cand_rank",
    # the record's session neighbours (-1 when records carry no session)
    "nb_prev_cos", "nb_next_cos", "nb_max_cos_gap", "nb_max_blend",
)
F = {name: i for i, name in enumerate(FEATURES)}

# neighbours(ids) -> (previous cosines, next cosines, previous ids, next ids); -1 / None at a
# session's ends and for records without a session
Neighbours = Callable[[list[str]], tuple[np.ndarray, np.ndarray, list, list]]


@dataclass
class Candidates:
    """One query's candidate records, best-first by neither leg, and their feature rows."""

    ids: list[str]
    X: np.ndarray  # float32 [len(ids), len(FEATURES)]
    top_cos: float  # the semantic leg's best cosine (the floor's first test)
    coverage: float  # the best candidate's share of the query's idf mass (its second)


@lru_cache(maxsize=100_000)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match plural and verb forms in the match features
    (FTS5's porter stemmer decides what the keyword leg itself matches)."""
    if len(word) > 4:
        for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("edly", ""), ("ed", ""),
                             ("ly", ""), ("es", ""), ("s", "")):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                return word[: len(word) - len(suffix)] + repl
    return word


def idf(df: int, n: int) -> float:
    """bm25's idf, never negative (FTS5 clamps it near zero, which hides rarity in small stores)."""
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


class Query:
    """A query's distinct stems with their idf: a stem weighs as its rarest spelling (record
    counts come from FTS5's stemmer, by word). A record holds a stem where one of its words
    starts with it — the whole word for a single letter, as the keyword leg matches it
    (:func:`plugins.memory.text.as_prefix`), unless ``letter_prefix``."""

    def __init__(self, words: list[str], df: dict[str, int], n_records: int,
                 letter_prefix: bool = False):
        weights: dict[str, float] = {}
        for w in words:
            s = stem(w)
            weights[s] = max(weights.get(s, 0.0), idf(df.get(w, 0), max(n_records, 1)))
        self.stems = list(weights)
        self.idf = np.array(list(weights.values()), np.float32)
        self.mass = float(self.idf.sum()) or 1.0
        self.needles = [b" " + s.encode("utf-8", "replace")
                        + (b"" if letter_prefix or as_prefix(s) else b" ") for s in self.stems]

    def coverage(self, texts: list[str]) -> np.ndarray:
        """Each text's share of the query's idf mass (1.0: it holds every query word)."""
        if not self.stems:
            return np.zeros(len(texts), np.float32)
        held = np.array([[nd in t for nd in self.needles] for t in map(plain, texts)], bool)
        return (held.reshape(len(texts), len(self.stems)) @ self.idf) / self.mass


def candidates(q: Query, keyword: list[tuple[str, float]], semantic: list[tuple[str, float]],
               cosine: Callable[[list[str]], np.ndarray], texts: dict[str, tuple[str, str]],
               vectors: Callable[[list[str]], np.ndarray] | None = None,
               neighbours: Neighbours | None = None) -> Candidates:
    """The keyword leg's ids, then the semantic leg's others, one feature row each.

    ``keyword``: ``[(id, -bm25)]`` best first; ``semantic``: ``[(id, cosine)]`` best first;
    ``cosine(ids)``: the query's cosine for any record (a keyword-only hit has none yet);
    ``texts``: ``{id: (title, body)}``; ``vectors(ids)``: the records' own unit vectors."""
    ids = list(dict.fromkeys([m for m, _ in keyword] + [m for m, _ in semantic]))
    n = len(ids)
    X = np.zeros((n, len(FEATURES)), np.float32)
    if n == 0:
        return Candidates(ids, X, 0.0, 0.0)
    col = X.T  # column views
    blend = _leg_features(col, ids, keyword, semantic, np.asarray(cosine(ids), np.float32))
    sem_scores = [s for _, s in semantic]
    top_cos = max(sem_scores) if sem_scores else float(col[F["cos"]].max())
    _text_features(X, q, ids, texts)
    col[F["q_terms"]] = len(q.stems)
    col[F["q_idf_max"]] = float(q.idf.max()) if len(q.idf) else 0.0
    col[F["q_idf_mean"]] = float(q.idf.mean()) if len(q.idf) else 0.0
    col[F["kw_hits"]] = math.log1p(len(keyword))
    col[F["top_cos"]] = top_cos
    col[F["top_bm25"]] = max((s for _, s in keyword), default=0.0)
    if vectors is not None:
        V = np.asarray(vectors(ids), np.float32)
        by_blend = np.argsort(-blend, kind="stable")
        centre = V[by_blend[:3]].mean(0)
        centre /= np.linalg.norm(centre) + 1e-9
        prf = V @ centre
        col[F["prf_cos"]] = prf
        col[F["prf_gap"]] = prf - prf.max()
        col[F["density"]] = (V @ V[by_blend[:5]].T).mean(1)
    col[F["cos_cand_rank"]] = np.log1p(_ranks(-col[F["cos"]]))
    col[F["nb_prev_cos"]] = col[F["nb_next_cos"]] = col[F["nb_max_cos_gap"]] = -1.0
    if neighbours is not None:
        prev_cos, next_cos, prev_ids, next_ids = neighbours(ids)
        col[F["nb_prev_cos"]] = prev_cos
        col[F["nb_next_cos"]] = next_cos
        has = (np.asarray(prev_cos) > -1) | (np.asarray(next_cos) > -1)
        col[F["nb_max_cos_gap"]] = np.where(has, np.maximum(prev_cos, next_cos) - top_cos, -1.0)
        fused = dict(zip(ids, blend))
        col[F["nb_max_blend"]] = [max(fused.get(p, 0.0), fused.get(x, 0.0))
                                  for p, x in zip(prev_ids, next_ids)]
    return Candidates(ids, X, top_cos, float(col[F["cover_idf"]].max()))


def _ranks(keys: np.ndarray) -> np.ndarray:
    """0 for the smallest key; equal keys share the lower rank."""
    return np.searchsorted(np.sort(keys), keys, side="left").astype(np.float32)


def _leg_ranks(leg: list[tuple[str, float]]) -> dict[str, int]:
    """Each id's place in a best-first leg; equal scores share the better place (two copies
    of one text are one candidate to the model)."""
    ranks: dict[str, int] = {}
    for i, (mid, score) in enumerate(leg):
        ranks[mid] = ranks[leg[i - 1][0]] if i and score == leg[i - 1][1] else i
    return ranks


def _minmax_half(values: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Half of a leg's min-max scaled score for its own records, 0 elsewhere (today's blend)."""
    if not inside.any():
        return np.zeros(len(values), np.float32)
    lo, hi = float(values[inside].min()), float(values[inside].max())
    scaled = (values - lo) / (hi - lo) if hi != lo else np.ones_like(values)
    return np.where(inside, 0.5 * scaled, 0.0)


def _leg_features(col, ids, keyword, semantic, cos) -> np.ndarray:
    """Both legs' scores and ranks; returns the plain 0.5/0.5 min-max blend."""
    k = max(len(keyword), len(semantic), 1)
    sem_rank = _leg_ranks(semantic)
    kw_rank = _leg_ranks(keyword)
    kw_score = dict(keyword)
    in_sem = np.array([m in sem_rank for m in ids])
    in_kw = np.array([m in kw_score for m in ids])
    sem_scores = cos[in_sem]
    top_cos = float(sem_scores.max()) if len(sem_scores) else float(cos.max())
    mu = float(sem_scores.mean()) if len(sem_scores) else 0.0
    sd = float(sem_scores.std()) + 1e-6 if len(sem_scores) else 1.0
    bm = np.array([kw_score.get(m, 0.0) for m in ids], np.float32)
    top_bm25 = float(bm[in_kw].max()) if in_kw.any() else 0.0
    col[F["cos"]] = cos
    col[F["cos_gap"]] = cos - top_cos
    col[F["cos_topk_z"]] = (cos - mu) / sd
    col[F["cos_rank"]] = np.log1p([sem_rank.get(m, k) for m in ids])
    col[F["in_sem"]] = in_sem
    col[F["bm25"]] = bm
    col[F["bm25_norm"]] = bm / top_bm25 if top_bm25 else 0.0
    col[F["kw_rank"]] = np.log1p([kw_rank.get(m, k) for m in ids])
    col[F["in_kw"]] = in_kw
    blend = _minmax_half(bm, in_kw) + _minmax_half(cos, in_sem)
    col[F["blend"]] = blend
    return blend


def _text_features(X: np.ndarray, q: Query, ids: list[str],
                   texts: dict[str, tuple[str, str]]) -> None:
    """Coverage, title coverage, adjacency, span, the record's own bm25 and its length."""
    n, nq = len(ids), len(q.stems)
    lengths = np.zeros(n, np.float32)
    TF = np.zeros((n, nq), np.float32)
    TITLE = np.zeros((n, nq), bool)
    for i, mid in enumerate(ids):
        title, text = texts.get(mid, ("", ""))
        title, body = plain(title), plain(text)
        lengths[i] = len(title.split()) + len(body.split())
        hits = []  # (position, query stem) in the body
        for j, needle in enumerate(q.needles):
            t = title.count(needle)
            TITLE[i, j] = t > 0
            at = body.find(needle)
            while at >= 0:
                hits.append((at, j))
                at = body.find(needle, at + 1)
            TF[i, j] = t
        for _, j in hits:
            TF[i, j] += 1
        if len(hits) < 2 or nq < 2:
            continue
        hits.sort()
        # query words next to each other, in the query's order
        pairs = {j for (a, j), (b, k) in zip(hits, hits[1:])
                 if k == j + 1 and b" " not in body[a + 1:b].strip()}
        X[i, F["bigram"]] = len(pairs) / (nq - 1)
        distinct = len({j for _, j in hits})
        if distinct >= 2:
            X[i, F["span"]] = _min_span(hits, distinct) / distinct
    col = X.T
    if nq:
        held = TF > 0
        col[F["cover"]] = held.mean(1)
        col[F["cover_idf"]] = (held @ q.idf) / q.mass
        col[F["title_cover"]] = TITLE.mean(1)
        col[F["title_cover_idf"]] = (TITLE @ q.idf) / q.mass
        norm = K1 * (1 - B + B * lengths / (float(lengths.mean()) or 1.0))
        own = (q.idf[None, :] * TF * (K1 + 1) / (TF + norm[:, None])).sum(1)
        col[F["bm25_own"]] = own
        col[F["bm25_own_norm"]] = own / (own.max() or 1.0)
    col[F["doc_len"]] = np.log1p(lengths)
    col[F["cover_idf_rank"]] = np.log1p(_ranks(-col[F["cover_idf"]]))


def _min_span(hits: list[tuple[int, int]], distinct: int) -> int:
    """The shortest character window of the record holding every matched query word."""
    have: dict[int, int] = {}
    best, left = 1 << 30, 0
    for at, j in hits:
        have[j] = have.get(j, 0) + 1
        while len(have) == distinct:
            best = min(best, at - hits[left][0] + 1)
            lj = hits[left][1]
            have[lj] -= 1
            if not have[lj]:
                del have[lj]
            left += 1
    return best
