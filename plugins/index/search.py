"""Keyword (FTS5, porter, identifiers split: plugins/index/keywords.py), semantic (cosine
over a per-process matrix checked against the index's version stamp, less each node's
hubness) and hybrid search over a project's nodes.

Hybrid is a score blend, not RRF: on code the semantic leg carries most of the signal, and
a small keyword weight over the union of both legs' candidates lifts exact-name matches
without pulling the ranking below semantic alone (CoSQA dev figures in docs/index.md).

Hybrid runs the FTS leg on a pool thread while the calling thread embeds the query: sqlite3
and onnxruntime both release the GIL, so the keyword leg costs no wall time."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Hashable

import numpy as np

from neuralmind import Unavailable, VersionedCache, top_k
from plugins.index.keywords import fts_query

# a Python identifier (PEP 3131: any script's letters), dotted; digits never first — as a
# query may wrap it: `class Name`, `def name`, `async def name`, `name()`, `name(args)`,
# `Name:`, each also in backticks (the backticks are taken off first)
_NAME = re.compile(r"(?:(?:async\s+)?def\s+|class\s+)?"
                   r"(?P<name>[^\W\d]\w*(?:\.[^\W\d]\w*)*)\s*(?:\([^()]*\))?\s*:?")
CANDIDATES = 100  # per leg, before the blend
NAMED = 50  # the most definitions of one name put first
HUB_NEIGHBOURS = 10  # a vector's hubness: its mean cosine to this many nearest others …
HUB_REFERENCE = 4_096  # … among at most this many of the index's vectors


class Matrix:
    """One index's vectors in this process: node ids, file types, the float32 rows and each
    row's hubness (0 until a build measured it)."""

    __slots__ = ("nids", "types", "matrix", "hubs", "row")

    def __init__(self, rows):
        self.nids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        self.types = np.array([r[1] for r in rows], dtype=object)
        self.matrix = _rows([r[2] for r in rows])
        self.hubs = np.fromiter((r[3] or 0.0 for r in rows), dtype=np.float32, count=len(rows))
        self.row = {int(n): i for i, n in enumerate(self.nids)}


def _rows(blobs: list[bytes]) -> np.ndarray:
    return (np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
            if blobs else np.zeros((0, 1), np.float32))


def hubness(rows: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each row's mean cosine to its ``HUB_NEIGHBOURS`` nearest reference vectors, itself left
    out. A vector near everything (a short helper, boilerplate) tops many queries' semantic
    lists without answering them; scoring ``cosine − w · hubness`` (CSLS) takes that back."""
    k = min(HUB_NEIGHBOURS, len(reference))
    out = np.zeros(len(rows), np.float32)
    if k < 1:
        return out
    for start in range(0, len(rows), 1024):
        sims = rows[start:start + 1024] @ reference.T
        sims[sims > 0.99999] = -np.inf  # itself (and a text the model reads as the same)
        near = np.partition(sims, -k, axis=1)[:, -k:]
        kept = np.isfinite(near)
        out[start:start + 1024] = (np.where(kept, near, 0.0).sum(1)
                                   / np.maximum(kept.sum(1), 1))
    return out


def measure_hubs(store, every: bool = False) -> None:
    """Give each vector without a hubness its own (``every``: each vector anew), against a
    fixed sample of the index's vectors; what a build ends with."""
    todo = store.hubless(every)
    if todo:
        reference = _rows(store.reference_vectors(HUB_REFERENCE))
        found = hubness(_rows([vec for _, vec in todo]), reference)
        store.put_hubs(zip(map(float, found), (h for h, _ in todo)))


def _matrix(matrices: VersionedCache[Matrix], store, key: Hashable, model_id: str
            ) -> Matrix:
    """This process's copy of the project's vectors, reloaded when the index changed."""
    def load():
        version = store.version()
        return (version, model_id), Matrix(store.vectors())

    return matrices.get(key, lambda: (store.version(), model_id), load)


def name_in(query: str) -> str | None:
    """The identifier a query is, as written or wrapped as code names one (``CompiledRouter()``,
    ```` `url_for` ````, ``class Flask:``, ``def url_for``), in NFKC as Python reads it; None
    for a query of words."""
    query = unicodedata.normalize("NFKC", query).strip().strip("`").strip()
    match = _NAME.fullmatch(query)
    return match["name"] if match else None


def named(store, query: str, file_type: str | None) -> list[int]:
    """The definitions a query that is one identifier names (``url_for``, ``IndexStore``,
    ``Flask.url_for``: those under the rest, else any of its last part; ``name_in``); none for
    any other query. The keyword leg splits an identifier into its parts (``url OR for``), and
    a long class loses on BM25 to whatever repeats them, so a name alone rarely ranked its own
    definition first. The name is looked up in NFD too: a module is named after its file,
    which macOS names in NFD."""
    query = name_in(query)
    if query is None:
        return []
    found = [row for form in dict.fromkeys((query, unicodedata.normalize("NFD", query)))
             for row in store.named(form, file_type, NAMED)]
    under = [nid for nid, qualname in found
             if (name := unicodedata.normalize("NFKC", qualname)) == query
             or name.endswith("." + query)]
    return under or [nid for nid, _ in found]


def keyword(store, query: str, n: int, file_type: str | None) -> list[tuple[int, float]]:
    match = fts_query(query)
    return store.keyword(match, n, file_type) if match else []


def _semantic_scores(kernel, matrices, store, key: Hashable, query: str, hub_weight: float):
    embedder = kernel.embedder  # Unavailable (503 semantic_unavailable) without a model
    model_id = embedder.model_id
    vector = embedder.embed([query])[0]
    mat = _matrix(matrices, store, key, model_id)
    if store.meta().get("model_id") not in (None, model_id):
        raise Unavailable("the index was embedded with another model; rebuild it",
                          code="semantic_unavailable")
    if not len(mat.nids):
        return mat, np.zeros(0, np.float32)
    # einsum, not `@`: right after an onnxruntime run, OpenBLAS's threads wake slowly and a
    # 6k × 384 product took 10 ms instead of 0.5 ms (einsum stays on this thread)
    scores = np.einsum("ij,j->i", mat.matrix, vector)
    return mat, scores - hub_weight * mat.hubs if hub_weight else scores


def search(kernel, matrices: VersionedCache[Matrix], store, key: Hashable, query: str,
           n: int, mode: str, file_type: str | None, keyword_weight: float,
           hub_weight: float = 0.0) -> tuple[list[tuple[int, float]], str | None]:
    """``([(node id, score)], notice)`` best first; notice says why hybrid fell back. The
    semantic score is the cosine less ``hub_weight`` × the node's hubness."""
    if mode == "keyword":
        lexical = keyword(store, query, n, file_type)
        return _first(lexical, _lifted(store, query, file_type, lexical), n), None
    pending = (kernel.beside(keyword, store, query, CANDIDATES, file_type)
               if mode == "hybrid" else None)
    try:
        mat, scores = _semantic_scores(kernel, matrices, store, key, query, hub_weight)
    except Unavailable as ex:
        if mode == "semantic":
            raise
        lexical = pending.result()
        return (_first(lexical, _lifted(store, query, file_type, lexical), n),
                f"keyword results only: {ex.message}")
    mask = (mat.types == file_type) if file_type else None
    if mode == "semantic":
        return [(int(mat.nids[i]), float(scores[i])) for i in top_k(scores, n, mask)], None
    lexical = pending.result()
    top_kw = max((s for _, s in lexical), default=0.0) or 1.0
    kw = {nid: s / top_kw for nid, s in lexical}

    def blend(nid: int) -> float:
        row = mat.row.get(nid)
        cosine = float(scores[row]) if row is not None else 0.0
        return (1 - keyword_weight) * cosine + keyword_weight * kw.get(nid, 0.0)

    candidates = {int(mat.nids[i]) for i in top_k(scores, CANDIDATES, mask)} | set(kw)
    ranked = sorted(((nid, blend(nid)) for nid in candidates),
                    key=lambda kv: (-kv[1], kv[0]))
    # a blended score is at most 1: a definition the query names scores above every other
    return _first(ranked, {nid: 1.0 + blend(nid) for nid in named(store, query, file_type)},
                  n), None


def _lifted(store, query: str, file_type: str | None, lexical: list[tuple[int, float]]
            ) -> dict[int, float]:
    """The definitions the query names, scored above every keyword hit: the best keyword
    score + their own."""
    own = dict(lexical)
    top = lexical[0][1] if lexical else 0.0
    return {nid: top + own.get(nid, 0.0) for nid in named(store, query, file_type)}


def _first(ranked: list[tuple[int, float]], named: dict[int, float], n: int
           ) -> list[tuple[int, float]]:
    """The ``named`` definitions with their lifted scores, then the rest of ``ranked``:
    the best ``n``, scores rounded."""
    rest = [(nid, score) for nid, score in ranked if nid not in named]
    ordered = sorted(named.items(), key=lambda kv: -kv[1]) + rest
    return [(nid, round(score, 6)) for nid, score in ordered[:n]]


def hits(store, ranked: list[tuple[int, float]]) -> list[dict]:
    rows = store.nodes(nid for nid, _ in ranked)
    out = []
    for nid, score in ranked:
        row = rows.get(nid)
        if row is not None:
            out.append({"id": row["id"], "label": row["qualname"], "kind": row["kind"],
                        "file_type": row["file_type"], "source_file": row["path"],
                        "line": row["line"], "score": round(float(score), 6), "nid": nid,
                        "source": "ingested" if row["path"].startswith("ingested:") else "repo"})
    return out
