"""Keyword, semantic and hybrid search over one project's memories.

Keyword is FTS5 bm25 over title, rationale, evidence and tags (stopwords dropped but in a name
such as ``falcon.before``, words and names ORed with prefix match: :func:`terms`). Semantic is
brute-force cosine over the stored vectors of title + rationale (and a long record's
passages), held per process in a :class:`VectorIndex` that
reloads when the store's version stamp moves (a write in another worker); a large project's
goes through an HNSW index instead — usearch files beside a SQLite store
(:mod:`plugins.memory.ann`), or the store's own (``nearest``: PostgreSQL's). Hybrid ranks both
legs' pools with the learned second stage (:mod:`plugins.memory.rerank`; or fuses them with
the rule the ``[memory]`` settings name), then multiplies by ``0.5 + 0.5 × confidence`` so
feedback moves ranking, and by the decay factor of the record's strength
(:mod:`plugins.memory.decay`). Every mode answers nothing when the relevance floor says no record
fits the query.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from neuralmind import STOPWORDS, APIError, VersionedCache, log_failure, now_iso, top_k
from plugins.memory.ann import AnnIndexes, CandidateLeg
from plugins.memory.decay import parse_time, rank_factor, strengths
from plugins.memory.legs import SemanticLeg, session_neighbours
from plugins.memory.models import MemorySettings
from plugins.memory.text import as_prefix, latin_share, query_names, query_words

log = logging.getLogger("neuralmind.memory")
TITLE = "keyword_title"  # the keyword index's title column (plugins.memory.store)


def terms(text: str) -> list[str]:
    """The query's distinct words, folded as the index folds its text (a Chinese or Japanese
    word: the phrase of its character pairs), stopwords dropped (all kept if all are) but for
    the words of a name (``falcon.before``), then each name as the phrase of its words: a
    record holding the name as written holds one more term than one holding its words."""
    words, names = query_words(text), query_names(text)
    named = {w for name in names for w in name.split()}
    kept = [w for w in words if w not in STOPWORDS or w in named]
    return list(dict.fromkeys((kept or words) + names))


def match_expression(words: list[str], column: str | None = None, prefix: bool = True) -> str:
    expr = " OR ".join(f'"{w}"{"*" if prefix and as_prefix(w) else ""}' for w in words)
    return f"{{{column}}} : ({expr})" if column else expr


def confidence_factor(confidence: float) -> float:
    return 0.5 + 0.5 * confidence


def _minmax(scores: list[float]) -> list[float]:
    lo, hi = min(scores), max(scores)
    return [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]


def fuse(keyword: list[tuple[str, float]], semantic: list[tuple[str, float]],
         settings: MemorySettings) -> dict[str, float]:
    """Fused relevance by id, from two best-first legs of ``(id, score)``."""
    wk, ws = settings.keyword_weight, 1.0 - settings.keyword_weight
    fused: dict[str, float] = {}
    if settings.fusion == "rrf":
        for weight, leg in ((wk, keyword), (ws, semantic)):
            for rank, (mid, _) in enumerate(leg, start=1):
                fused[mid] = fused.get(mid, 0.0) + 2 * weight / (settings.rrf_k + rank)
        return fused
    for weight, leg in ((wk, keyword), (ws, semantic)):
        if leg:
            for (mid, _), norm in zip(leg, _minmax([s for _, s in leg])):
                fused[mid] = fused.get(mid, 0.0) + weight * norm
    return fused


@dataclass
class VectorIndex:
    """One project's vectors of one model in this process, valid for one store version.

    ``matrix`` holds every vector: each record's own, then its passages'; ``starts`` is the
    first row of each record (None when every record has one vector). ``prev`` and ``next``
    are each record's neighbours in its session (``session_id``, then ``created_at`` order;
    -1 at a session's ends and for records without one)."""

    ids: Any  # numpy array of str
    matrix: Any  # float32 (vectors, dim)
    status: Any
    review_by: Any
    confidence: Any
    kind: Any
    starts: Any = None
    prev: Any = None
    next: Any = None
    row: dict[str, int] = field(default_factory=dict)
    _masks: dict = field(default_factory=dict)
    pending: int = 0  # records left out: not embedded yet, past what a search embeds itself

    @classmethod
    def from_rows(cls, rows, dim: int, passages: bool = True) -> VectorIndex:
        """From rows of ``MemoryStore.vectors`` (or of any subset of them)."""
        import numpy as np
        size = 4 * dim
        blobs = [r["vector"] if passages else r["vector"][:size] for r in rows]
        counts = np.fromiter((len(b) // size for b in blobs), dtype=np.int64, count=len(rows))
        matrix = (np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, dim) if rows
                  else np.zeros((0, dim), np.float32))
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if (counts > 1).any() else None
        ids = np.array([r["memory_id"] for r in rows], dtype=object)
        prev, nxt = session_neighbours([r["session_id"] for r in rows],
                                       [r["created_at"] for r in rows], ids)
        return cls(ids, matrix, np.array([r["status"] for r in rows], dtype="U11"),
                   np.array([r["review_by"] or "" for r in rows], dtype="U10"),
                   np.array([r["confidence"] for r in rows], dtype=np.float32),
                   np.array([r["kind"] for r in rows], dtype="U10"), starts, prev, nxt, {mid: i for i, mid in enumerate(ids)})

    def scores(self, vector):
        """The query's cosine per record: its best vector's."""
        import numpy as np
        # einsum, not `@`: right after an onnxruntime run OpenBLAS's threads wake slowly
        each = np.einsum("ij,j->i", self.matrix, vector)
        return each if self.starts is None else np.maximum.reduceat(each, self.starts)

    def own(self, rows):
        """The records' own vectors (not their passages')."""
        return self.matrix[rows if self.starts is None else self.starts[rows]]

    def status_mask(self, status: str, today: str):
        """Rows whose effective status is ``status``; cached, as the index lives one version."""
        key = (status, today)
        cached = self._masks.get(key)
        if cached is None:
            import numpy as np
            overdue = (self.review_by != "") & (self.review_by < today)
            effective = np.where((self.status == "ACTIVE") & overdue, "STALE", self.status)
            cached = self._masks[key] = effective == status
        return cached

    def mask(self, filters: dict[str, Any], today: str, allowed: set[str] | None):
        import numpy as np
        keep = np.ones(len(self.ids), dtype=bool)
        status = filters.get("status")
        if status and status != "ALL":
            keep &= self.status_mask(status, today)
        if filters.get("min_confidence") is not None:
            keep &= self.confidence >= filters["min_confidence"]
        if filters.get("kind"):
            keep &= np.isin(self.kind, filters["kind"])
        if allowed is not None:
            keep &= np.fromiter((i in allowed for i in self.ids), dtype=bool, count=len(self.ids))
        return keep


RECORD_COLUMNS = ("status", "review_by", "confidence", "kind", "session_id", "created_at")


def with_fresh(store, stored: list, fresh: list[tuple[str, bytes, str]]) -> list:
    """``stored`` vector rows (``MemoryStore.vectors``) with ``fresh`` ``(id, blob, sha)``
    in place of any row of the same record, each with its record's columns."""
    if not fresh:
        return stored
    ids = {mid for mid, _, _ in fresh}
    recs = store.get_many(list(ids))
    return [*(r for r in stored if r["memory_id"] not in ids),
            *({"memory_id": mid, "vector": blob, **{k: recs[mid][k] for k in RECORD_COLUMNS}}
              for mid, blob, _ in fresh if mid in recs)]


def left_out(leg: SemanticLeg, what: str) -> str | None:
    """A search's notice of the records its semantic leg left out (``VectorIndex.pending``),
    saying ``what`` became of them; None when it left none out."""
    n = leg.index.pending
    if not n:
        return None
    return f"{n:,} record{'s' if n > 1 else ''} written lately not embedded yet: {what}"


def nothing_found(store, filters: dict[str, Any], today: str, notice: str | None) -> str:
    """The notice of a search that answers nothing, before ``notice`` (the search's own,
    which may say why): no record passes the filters — each one applied named, since any may
    be the one that excludes all — or none is relevant (the floor)."""
    if store.list(filters, today, 1, None):
        why = "nothing relevant found: no record is close enough to the query in meaning or words"
    else:
        applied = ", ".join(f"{name} {_shown(value)}" for name, value in filters.items()
                            if value not in (None, []))
        why = f"nothing to search: no record matches the filters ({applied})"
    return f"{why}; {notice}" if notice else why


def _shown(value: Any) -> str:
    """A filter's value in a notice: a list's values as alternatives (any of them matches),
    an empty text (``author=``, which matches records holding "") as ``""``."""
    if isinstance(value, list):
        return " or ".join(map(_shown, value))
    return str(value) if value != "" else '""'


# Keyword pruning (see Searcher.keyword and Searcher.similar_titles): from these sizes on,
# common words cost more than the rest of the query (at 1k records a whole keyword leg takes
# ~1 ms; at 10k, 7–9 ms, mostly common words).
CORPUS_STOPWORD_SHARE = 0.5
CORPUS_STOPWORD_MIN_RECORDS = 5_000
KEYWORD_POOL = 5  # matches ranked by bm25 per result wanted, before the filters join
HINT_WORD_SHARE = 0.02
HINT_MIN_RECORDS = 500

# texts per embedding call of a fill: ~0.5 s of long texts with the packaged model on 2 cores,
# so a shutdown's wait for the backfill (plugins.memory.backfill.stop) ends within about that
EMBED_STEP = 16
HNSW_FETCH = 1_000  # the most candidates asked of a store's own index (pgvector's ef bound)
NATIVE_RETRY_S = 30.0  # between a process's attempts to build a store's index

# Filters the vector index applies itself; any other needs the store's id set.
INDEX_FILTERS = frozenset({"status", "min_confidence", "kind"})


def steps(records: list[tuple[Any, list[str]]]) -> Iterator[list[tuple[Any, list[str]]]]:
    """Runs of whole ``(key, texts)`` records holding ``EMBED_STEP`` texts or more (the last
    and a single long record aside): how much one embedding call takes between two looks at
    a shutdown."""
    step: list[tuple[Any, list[str]]] = []
    count = 0
    for rec in records:
        step.append(rec)
        count += len(rec[1])
        if count >= EMBED_STEP:
            yield step
            step, count = [], 0
    if step:
        yield step


class Searcher:
    """Search for every project of one kernel; vector indexes are cached per store path."""

    def __init__(self, settings: MemorySettings, kernel):
        self.settings = settings
        self.kernel = kernel
        self._indexes: VersionedCache[VectorIndex] = VersionedCache()
        self.ann = AnnIndexes(settings, kernel, lambda rows, dim: VectorIndex.from_rows(
            rows, dim, settings.passages))
        self.ranker = None  # the second stage's model; None: the shipped one
        self._native_tried: dict[str, float] = {}  # when each store's index build last began
        self._native_lock = threading.Lock()
        # vectors a search embedded that no write stored yet: (store, model) → {(id, sha): blob}
        self._held: dict[tuple[str, str], dict[tuple[str, str], bytes]] = {}
        # called with a store whose index holds such vectors (Memories: the backfill's)
        self.on_held: Callable[[Any], None] = lambda store: None

    def forget(self, key: str) -> None:
        """Let go of what this process keeps of the store ``key`` names (its project was
        removed): its vectors, held and indexed, and its ANN index's mapped files."""
        self._indexes.forget(key)
        self.ann.forget(key)
        with self._native_lock:
            self._native_tried.pop(key, None)
        for held in list(self._held):
            if held[0] == key:
                self._held.pop(held, None)

    def pool(self, limit: int) -> int:
        return max(self.settings.pool_factor * limit, self.settings.pool_min)

    # -- legs ----------------------------------------------------------------------------

    def keyword(self, store, query: str, filters: dict[str, Any], today: str, n: int,
                full: bool = True) -> list[tuple[dict[str, Any], float]]:
        """The keyword leg. From 5,000 records on, without the words held by over half of
        them: bm25 weighs those at ~0 (log((N − n + ½)/(n + ½)) ≤ 0, clamped) but they cost
        the most to score — the corpus's own stopwords."""
        words = self.informative(store, terms(query), CORPUS_STOPWORD_SHARE,
                                 CORPUS_STOPWORD_MIN_RECORDS)
        match = self.budgeted(store, words, keep_one=full) if words else None
        if match is None:
            return []
        if not self.bounded(store):
            return store.keyword(match, words, filters, today, n, full=full)
        # bm25 first, over the matches alone; filters then join the best few to their records
        # (joining every match cost more than scoring it), unless they pass too few of them
        hits = store.keyword(match, words, filters, today, n, full=full, pool=KEYWORD_POOL * n)
        return hits if len(hits) >= n else store.keyword(match, words, filters, today, n,
                                                         full=full)

    def budgeted(self, store, words: list[str], keep_one: bool) -> str | None:
        """The keyword leg's match expression, its bm25 scoring bounded (:meth:`bounded`):
        words are taken rarest first while the records they match (a prefix's, else the
        whole word's; a single letter's are the whole word's) stay within
        ``keyword_postings`` — the rare words carry bm25's weight, the common ones its cost.
        When even the rarest word matches more, it alone (``keep_one``: keyword mode) or
        nothing (hybrid: the semantic leg and the second stage's coverage features weigh such
        words; their bm25 weight is small)."""
        if not self.bounded(store):
            return match_expression(words)
        total, budget = store.size_estimate(), self.settings.keyword_postings
        exact, prefix = store.doc_counts(words, total), store.prefix_counts(words, total)
        used, parts = 0, []
        for w in sorted(words, key=lambda w: (exact[w], w)):
            whole = (exact[w], "")
            for cost, star in ((prefix[w], "*"), whole) if as_prefix(w) else (whole,):
                if used + cost <= budget:
                    parts.append(f'"{w}"{star}')
                    used += cost
                    break
        if parts:
            return " OR ".join(parts)
        return f'"{min(words, key=exact.__getitem__)}"' if keep_one else None

    def similar_titles(self, store, title: str, filters: dict[str, Any], today: str, n: int,
                       exclude: str, column: str | None = TITLE
                       ) -> list[tuple[dict[str, Any], float]]:
        """Records whose titles (``column=None``: any indexed text) share ``title``'s rare
        words: duplicate hints and contradiction candidates on the write path, where scoring
        a common word's whole posting list would cost more than the write. The rare words are
        what a duplicate shares; the 50 best matches are ranked (bm25) before the filters
        apply. Each is scored by its title's share of the title's idf mass. A Chinese or
        Japanese word counts as its character pairs, each on its own: a title one character
        apart from another is a duplicate, where the phrase of its pairs would not match."""
        from plugins.memory.features import Query
        every = list(dict.fromkeys(pair for w in terms(title) for pair in w.split()))
        words = self.informative(store, every, HINT_WORD_SHARE, HINT_MIN_RECORDS)
        if not words:
            return []
        hits = store.keyword(match_expression(words, column, prefix=False), words,
                             {**filters, "exclude": exclude}, today, n, pool=50)
        if not hits:
            return []
        # scored by the share of the title's idf mass the other title holds (1.0: all of it)
        total = store.size_estimate()
        share = Query(every, store.doc_counts(every, total), total).coverage(
            [rec["title"] for rec, _ in hits])
        return [(rec, round(float(c), 4)) for (rec, _), c in zip(hits, share)]

    def bounded(self, store) -> bool:
        """Whether the keyword leg's cost is bounded: from twice ``keyword_postings`` records
        on (20,000; below, a whole leg costs under ~10 ms here, and no eval set — SciFact 5k,
        CoSQA 6k, LoCoMo 3k records — is that large)."""
        return store.size_estimate() >= 2 * self.settings.keyword_postings

    def informative(self, store, words: list[str], max_share: float, min_records: int
                    ) -> list[str]:
        """``words`` held by at most ``max_share`` of the records (at least the rarest one);
        all of them in a store of fewer than ``min_records``."""
        total = store.size_estimate() if words else 0
        if total < min_records:
            return words
        counts = store.doc_counts(words, total)
        kept = [w for w in words if counts[w] <= max_share * total]
        return kept or [min(words, key=counts.__getitem__)]

    def fill(self, store, embedder, batch: int | None = None,
             stop: Callable[[], bool] = lambda: False,
             halt: Callable[[], bool] = lambda: False) -> int:
        """Embed and store every record whose vectors are missing or stale, ``batch`` records
        at a time (with their passages when ``[memory] passages`` is on). ``stop`` is asked
        before each batch; ``halt`` (a shutdown) also between a batch's steps of
        ``EMBED_STEP`` texts: the records embedded by then are stored and the fill ends."""
        size = batch or self.settings.backfill_batch
        done = 0
        while not stop():
            todo = store.missing_vectors(embedder.model_id, size, self.passages_over())
            if not todo:
                break
            rows = self.embedded(store, embedder, todo, halt)
            written = store.put_vectors(embedder.model_id, embedder.dim, rows) if rows else 0
            held = self._held.get((str(store.db.path), embedder.model_id), {})
            for mid, _, sha in rows:  # stored now, or changed under us: held no longer
                held.pop((mid, sha), None)
            done += written
            if len(rows) < len(todo) or written == 0:  # halted; or every record changed
                break  # under us, and the next round picks them up
        return done

    def passages_over(self) -> int | None:
        """The rationale length from which a record is embedded with its passages."""
        return self.settings.passage_min_chars if self.settings.passages else None

    def embedded(self, store, embedder, todo: list[tuple[str, str, str, str]],
                 halt: Callable[[], bool] = lambda: False) -> list[tuple[str, bytes, str]]:
        """``(id, vectors blob, content_sha)`` of ``todo`` (rows of ``missing_vectors``): a
        search's vectors not stored yet are reused, the others embedded now, whole records
        of about ``EMBED_STEP`` texts at a time; once ``halt()`` says so between two such
        steps, those of the records done by then."""
        import numpy as np

        from plugins.memory.passages import embed_texts
        blobs = dict(self._held.get((str(store.db.path), embedder.model_id), {}))
        over, chars = self.passages_over(), self.settings.passage_chars
        new = [((mid, sha), embed_texts(title, rationale, over, chars))
               for mid, title, rationale, sha in todo if (mid, sha) not in blobs]
        for step in steps(new):
            if halt():
                break
            flat = [t for _, texts in step for t in texts]
            order = sorted(range(len(flat)), key=lambda i: len(flat[i]))  # pads less
            vectors = np.empty((len(flat), embedder.dim), np.float32)
            vectors[order] = embedder.embed([flat[i] for i in order])
            at = 0
            for key, texts in step:
                blobs[key] = vectors[at:at + len(texts)].tobytes()
                at += len(texts)
        return [(mid, blobs[mid, sha], sha) for mid, _, _, sha in todo if (mid, sha) in blobs]

    def index(self, store, embedder) -> VectorIndex:
        """The current vectors, with up to ``search_embed_max`` of those still missing
        embedded into this index alone; its ``pending`` counts the others, left out until the
        backfill embeds them (a search embedding thousands would take a minute). A read never
        writes, so it never waits on the file's write lock nor fails on a full disk. The
        backfill stores these vectors (without embedding them again); its write moves the
        version, and the next search loads them from the store."""
        return self._indexes.get(
            str(store.db.path), lambda: (store.version(), embedder.model_id),
            lambda: self.load(store, embedder, self.settings.search_embed_max))

    def complete_index(self, store, embedder) -> VectorIndex:
        """Every record's vectors: :meth:`index` when it leaves none out, else one with every
        missing vector embedded now, not cached — for a job that compares every record
        (consolidation), which may take the time."""
        index = self.index(store, embedder)
        return self.load(store, embedder, None)[1] if index.pending else index

    def load(self, store, embedder, most: int | None) -> tuple[tuple[int, str], VectorIndex]:
        """``(stamp, index)``: the stored vectors, those a search embedded before that are still
        missing, and up to ``most`` (None: all) of the other missing ones embedded now."""
        key = (str(store.db.path), embedder.model_id)
        version = store.version()
        todo = store.missing_vectors(embedder.model_id, None, self.passages_over())
        held = self._held.get(key, {})
        new = [row for row in todo if (row[0], row[3]) not in held]
        embed = new if most is None else new[:most]
        fresh = self.embedded(store, embedder,
                              [row for row in todo if (row[0], row[3]) in held] + embed)
        self._held[key] = {(mid, sha): blob for mid, blob, sha in fresh}
        if fresh:
            self.on_held(store)
        index = VectorIndex.from_rows(with_fresh(store, store.vectors(embedder.model_id), fresh),
                                      embedder.dim, self.settings.passages)
        index.pending = len(new) - len(embed)
        return (version, embedder.model_id), index

    def semantic(self, store, query: str, filters: dict[str, Any], today: str, n: int
                 ) -> SemanticLeg:
        """The ``n`` records closest to ``query`` in meaning; raises Unavailable without a model.
        From ``ann_min_records`` records on, through the ANN index (:mod:`plugins.memory.ann`)."""
        import numpy as np
        embedder = self.kernel.embedder
        # the filters the store reads as it reads them: "" is an author (agent, session) too
        extra = {k: v for k, v in filters.items()
                 if k not in INDEX_FILTERS and v not in (None, [])}
        if self.ann.covers(store):
            vector = embedder.embed([query])[0].astype(np.float32)
            return self.ann.leg(store, embedder, vector, filters, today, n, extra)
        if self.native_covers(store):
            vector = embedder.embed([query])[0].astype(np.float32)
            return self.native_leg(store, embedder, vector, filters, today, n, extra)
        index = self.index(store, embedder)
        if not len(index.ids):
            return SemanticLeg(index, np.zeros(0, np.float32), [])
        scores = index.scores(embedder.embed([query])[0].astype(np.float32))
        allowed = store.filter_ids(extra, today) if extra else None
        top = top_k(scores, n, index.mask(filters, today, allowed))
        return SemanticLeg(index, scores, [(index.ids[i], float(scores[i]),
                                            float(index.confidence[i])) for i in top])

    def native_covers(self, store) -> bool:
        """Whether ``store`` finds a large project's nearest vectors itself (``nearest``:
        PostgreSQL's HNSW index, which every server shares) from ``ann_min_records`` on."""
        return (self.settings.ann and hasattr(store, "nearest")
                and store.size_estimate() >= self.settings.ann_min_records)

    def native_leg(self, store, embedder, vector, filters: dict[str, Any], today: str, n: int,
                   extra: dict[str, Any]) -> CandidateLeg:
        """The semantic leg through the store's own index: ``ann_fetch × n`` candidates (more
        while filters pass too few), their vectors and session neighbours read by id and
        ranked exactly, as the ANN leg ranks its graph's. Scored in the database instead
        while the index is not built (its build starts) or when the index's candidates run
        out before the filters pass ``n``."""
        def make(rows: list):
            return self.ann.make_index(rows, embedder.dim)

        def fetch(ids: list[str]) -> list:
            return store.vectors_of(embedder.model_id, ids + store.session_neighbours(ids))

        import numpy as np
        k = self.settings.ann_fetch * n
        while True:
            found = store.nearest(vector, k, self.settings.ann_expansion_search)
            if found is None:
                self.build_native(store)
                break
            leg = CandidateLeg(fetch, make, vector, found)
            allowed = store.filter_ids(extra, today, among=found) if extra else None
            # the candidates alone (not their session neighbours): when n of the k nearest
            # pass the filters, they are the n nearest that pass
            keep = leg.index.mask(filters, today, allowed) & np.isin(leg.index.ids, found)
            leg.hits = leg.best(n, keep)
            if len(leg.hits) >= n:
                return leg
            if len(found) < k or k >= HNSW_FETCH:  # the index has no more candidates
                break
            k = min(HNSW_FETCH, 4 * k)
        leg = CandidateLeg(fetch, make, vector, store.nearest_exact(vector, n, filters, today))
        allowed = store.filter_ids(extra, today, among=list(leg.index.ids)) if extra else None
        leg.hits = leg.best(n, leg.index.mask(filters, today, allowed))
        return leg

    def build_native(self, store) -> None:
        """Build ``store``'s index in a background thread, unless this process is building
        it or tried within ``NATIVE_RETRY_S`` (another server may be building it)."""
        key = str(store.db.path)
        with self._native_lock:
            if time.monotonic() - self._native_tried.get(key, -NATIVE_RETRY_S) < NATIVE_RETRY_S:
                return
            self._native_tried[key] = time.monotonic()

        def build() -> None:
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)  # serving first
                started = time.perf_counter()
                if store.build_nearest(self.settings):
                    log.info("memory vector index of %s built in %.1f s", key,
                             time.perf_counter() - started)
            except Exception as ex:
                log_failure(log, f"memory vector index build for {key}", ex)

        threading.Thread(target=build, name="memory-hnsw", daemon=True).start()

    # -- modes ---------------------------------------------------------------------------

    def search(self, store, query: str, mode: str, filters: dict[str, Any], today: str,
               limit: int, policy: dict[str, Any] | None = None
               ) -> tuple[list[tuple[dict[str, Any], float]], str | None]:
        """``([(record, score)], notice)``, best first; nothing when the floor says so.
        ``policy`` is the project's decay policy (hybrid ranks by strength while it is on)."""
        blind = self.blind(query)
        if mode == "keyword":
            hits = self.keyword(store, query, filters, today, limit)
            return self.keyword_results(store, query, hits, (lambda: None) if blind else (
                lambda: self.best_cosine(store, query, filters, today))), None
        if mode == "semantic":
            leg = self.semantic(store, query, filters, today, limit)
            found = self.semantic_results(leg)
            if blind:
                held = {rec["id"] for rec, _ in self.keyword(store, query, filters, today,
                                                             self.pool(limit), full=False)}
                found = [h for h in found if h[0] in held]
            records = store.get_many([h[0] for h in found])
            return ([(records[m], round(c, 4)) for m, c, _ in found if m in records],
                    left_out(leg, "left out of semantic search until the backfill embeds them "
                             "(keyword and hybrid search find them by their words)"))
        n = self.pool(limit)
        # The keyword leg runs beside the query's embedding: SQLite and onnxruntime both
        # release the GIL, so hybrid costs about its slower leg instead of their sum.
        keyword = self.kernel.beside(self.keyword, store, query, filters, today, n, False)
        try:
            leg = self.semantic(store, query, filters, today, n)
        except APIError as ex:
            kw = keyword.result()
            if ex.code != "semantic_unavailable":
                raise
            records = store.get_many([rec["id"] for rec, _ in kw[:limit]])
            hits = [(records[rec["id"]], s) for rec, s in kw[:limit] if rec["id"] in records]
            return (self.keyword_results(store, query, hits, lambda: None),
                    f"semantic search is unavailable ({ex.message}); keyword results only")
        return (self.hybrid(store, query, keyword.result(), leg, limit, policy, blind=blind),
                left_out(leg, "searched by their words alone until the backfill embeds them"))

    def blind(self, query: str) -> bool:
        """Whether the embedding model cannot read ``query``: most of its letters are in
        scripts it was not trained on (``model_scripts``). Its cosine then says nothing —
        the packaged English model gives any two Chinese texts 0.4–0.6, above the floor —
        so a record needs a keyword hit: the semantic leg alone passes no floor and brings
        no candidate. Every query of the English eval sets is read (docs/memory.md)."""
        return self.settings.model_scripts == "latin" and latin_share(query) < 0.5

    def best_cosine(self, store, query: str, filters: dict[str, Any], today: str
                    ) -> float | None:
        """The best cosine among the records ``filters`` allow (-1 for none); None without
        a model."""
        try:
            hits = self.semantic(store, query, filters, today, 1).hits
        except APIError as ex:
            if ex.code != "semantic_unavailable":
                raise
            return None
        return hits[0][1] if hits else -1.0

    def keyword_results(self, store, query: str, hits: list[tuple[dict[str, Any], float]],
                        best_cosine: Callable[[], float | None]
                        ) -> list[tuple[dict[str, Any], float]]:
        """Keyword hits in bm25 order, each scored by its share of the query's idf mass.
        The floor asks ``best_cosine()`` only when no hit holds most of the query; without
        a model (None) the share alone decides (``floor_keyword_alone``)."""
        from plugins.memory.features import Query
        if not hits:
            return []
        words = terms(query)
        total = store.size_estimate()
        texts = store.texts([rec["id"] for rec, _ in hits])
        share = Query(words, store.doc_counts(words, total), total).coverage(
            [" ".join(texts.get(rec["id"], ("", ""))) for rec, _ in hits])
        best = float(share.max())
        if self.settings.floor and best < self.settings.floor_coverage:
            cosine = best_cosine()
            if (best < self.settings.floor_keyword_alone if cosine is None
                    else cosine < self.settings.floor_cosine):
                return []
        return [(rec, round(float(c), 4)) for (rec, _), c in zip(hits, share)]

    def semantic_results(self, leg: SemanticLeg) -> list[tuple[str, float, float]]:
        """The leg's hits down to ``semantic_floor``; none when the best is below the floor."""
        hits = [h for h in leg.hits if h[1] >= self.settings.semantic_floor]
        if self.settings.floor and (not hits or hits[0][1] < self.settings.floor_cosine):
            return []
        return hits

    def hybrid(self, store, query: str, kw: list[tuple[dict[str, Any], float]],
               leg: SemanticLeg, limit: int, policy: dict[str, Any] | None = None,
               now: str | None = None, blind: bool = False
               ) -> list[tuple[dict[str, Any], float]]:
        """The legs' pools ranked by the second stage (its calibrated probability of
        relevance) or fused by the ``fusion`` rule, × ``0.5 + 0.5 × confidence`` × the decay
        factor of the record's strength (while ``policy`` is on). ``blind``: the model cannot
        read the query (:meth:`blind`) — keyword hits alone are candidates, and the floor
        does not read their cosines."""
        from plugins.memory import rerank
        kw_ids = {rec["id"] for rec, _ in kw}
        sem = [h for h in leg.hits
               if h[0] in kw_ids or (not blind and h[1] >= self.settings.hybrid_floor)]
        keyword = [(rec["id"], s) for rec, s in kw]
        confidence = {h[0]: h[2] for h in sem}
        confidence.update({rec["id"]: rec["confidence"] for rec, _ in kw})
        if self.settings.rerank or self.settings.floor:
            cands = rerank.gather(store, terms(query), keyword, sem, leg,
                                  self.settings.session_context)
        if self.settings.rerank:
            model = self.ranker or rerank.shipped()
            relevance = dict(zip(cands.ids, model.probability(model.score(cands.X)).tolist()))
        else:
            relevance = fuse(keyword, [(h[0], h[1]) for h in sem], self.settings)
        if self.settings.floor and rerank.nothing_found(
                -1.0 if blind else cands.top_cos, cands.coverage, self.settings,
                max(relevance.values(), default=0.0) if self.settings.rerank else None):
            return []
        base = {m: r * confidence_factor(confidence[m]) for m, r in relevance.items()}
        weight = self.settings.decay_weight
        strength: dict[str, float] = {}
        if policy is not None and policy["enabled"] and weight:
            # a decay factor lies in [1 − weight, 1]: a candidate below (1 − weight) × the
            # limit-th best score cannot reach the top, and needs no strength
            cut = (sorted(base.values(), reverse=True)[limit - 1] * (1 - weight)
                   if len(base) > limit else float("-inf"))
            strength = strengths(store.decay_inputs([m for m in base if base[m] >= cut]),
                                 policy, parse_time(now or now_iso()))
        score = {m: b * rank_factor(strength.get(m, 1.0), weight) for m, b in base.items()}
        top = sorted(score, key=lambda m: -score[m])[:limit]
        if top and self.settings.hybrid_tail:
            top = [m for m in top if score[m] >= self.settings.hybrid_tail * score[top[0]]]
        records = store.get_many(top)
        return [(records[m], round(score[m], 4)) for m in top if m in records]
