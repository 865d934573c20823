"""Learned links between files (synapses, spec P7) and what an agent should open next.

Files that are used together are linked, at file granularity (a node counts as its file):

========================== ================================================== ============
what co-activates          which files                                        rate (default)
========================== ================================================== ============
``query``                  the files of its best hits (up to 5)               0.05
``search``                 the same                                           0.03
``POST activity`` read     the call's files, and each with the files its      0.05
                           session touched in the last 30 minutes (≤ 10)
``… edit`` / ``… test``    the same                                           0.2 / 0.1
``POST feedback`` helpful  the file with the files it was last activated      0.3
                           with (within an hour), or those named
``… unhelpful``            the same pairs, weakened                           0.5
========================== ================================================== ============

The update is Hebbian and bounded: a pair's weight ``w`` first decays to
``d = w · 2^(−Δt / half-life)`` (Δt since its last update; half-life 30 days), then
``w ← d + rate · (1 − d)`` when it co-activates, or ``w ← d · (1 − rate)`` when weakened. So
weights stay in [0, 1), repeated use saturates instead of growing without end, and a link
nobody uses fades to half in a month. An activation of more than ``learn_max_files`` files
(a sweeping change) links nothing.

Cheap on the request path: ``query`` and ``search`` only append to a buffer in this process;
one thread writes the buffer every ``learn_flush_s`` (1 s) in one transaction per project
(and reads in this process, and shutdown, write it first). Explicit writes (``activity``,
``feedback``) are written before they answer. Everything lives in the project's
``usage.db``, which every worker shares; a worker killed with ``kill -9`` loses at most its
last second of query learning, never an answered ``activity`` or ``feedback``."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from typing import Any

from neuralmind import APIError, ProjectStores, log_failure, today
from plugins.index.usage import MIGRATIONS, UsageStore, ordered

log = logging.getLogger("neuralmind.index.learning")
DAY_S = 86_400.0
FLOOR = 0.01  # a link weaker than this is no link (and is pruned)
SESSION_FILES = 10
FEEDBACK_WINDOW_S = 3_600.0
KEEP_ACTIVATIONS_S = 7 * DAY_S
PRUNE_EVERY_S = 600.0
QUERY_FILES = 5
# how much each kind of evidence weighs in `next`, for a candidate file
WEIGHTS = {"learned": 1.0, "structural": 0.1, "decision": 0.5, "task": 0.5}


class Learning:
    """One kernel's learning: the buffer, its writer thread, and the reads."""

    def __init__(self, kernel, settings):
        self.kernel, self.settings = kernel, settings
        self._stores = ProjectStores(lambda project: UsageStore(kernel.open_database(
            project.state_dir / "usage.db", MIGRATIONS)))
        self._pending: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pruned: dict[str, float] = {}

    @property
    def half_life_s(self) -> float:
        return self.settings.learn_half_life_days * DAY_S

    def store(self, project) -> UsageStore:
        return self._stores.get(project)

    # -- the request path ---------------------------------------------------------------------

    def observe(self, project, kind: str, files: list[str], served: int, whole: int) -> None:
        """What a ``query`` or ``search`` used: its hit files co-activate (when learning is
        on) and its tokens count toward the savings. Buffered: no I/O here."""
        files = list(dict.fromkeys(files))[:QUERY_FILES]
        with self._lock:
            entry = self._pending.setdefault(project.id, {
                "project": project, "acts": [], "savings": defaultdict(lambda: [0, 0, 0])})
            if self.settings.learning and files:
                entry["acts"].append((time.time(), kind, kind, files))
            tally = entry["savings"][(today(), kind)]
            tally[0] += 1
            tally[1] += served
            tally[2] += whole
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="index-learning",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.settings.learn_flush_s)
            self._wake.clear()
            try:
                self.flush()
            except Exception as ex:  # keep learning; the next flush tries again with new data
                log_failure(log, "writing learned links", ex)

    def flush(self, project=None) -> None:
        """Write what this process buffered (for one project, or all)."""
        with self._lock:
            if project is None:
                batch, self._pending = self._pending, {}
            else:
                found = self._pending.pop(project.id, None)
                batch = {project.id: found} if found else {}
        for entry in batch.values():
            acts = entry["acts"]
            strengthen = [pair for at, kind, _, files in acts
                          for pair in self._pairs(files, self._rate(kind), at)]
            counters = {f"activations.{kind}": n for kind, n in Counter(a[1] for a in acts).items()}
            counters["pairs_strengthened"] = len(strengthen)
            store = self.store(entry["project"])
            store.write(acts, strengthen, [], dict(entry["savings"]), counters, self.half_life_s)
            self._maybe_prune(entry["project"], store)

    def forget(self, project) -> None:
        """Write what was buffered for the project, where its folder still is, and let go of
        its store."""
        try:
            self.flush(project)
        except APIError:  # its folder is gone: what was buffered has nowhere to go
            pass
        except Exception as ex:
            log_failure(log, f"writing learned links of removed project {project.id}", ex)
        self._stores.forget(project)
        self._pruned.pop(project.id, None)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
        self.flush()

    def _maybe_prune(self, project, store: UsageStore) -> None:
        now = time.time()
        if now - self._pruned.get(project.id, 0.0) >= PRUNE_EVERY_S:
            self._pruned[project.id] = now
            store.prune(now, self.half_life_s, FLOOR, KEEP_ACTIVATIONS_S)

    def _rate(self, kind: str) -> float:
        return getattr(self.settings.learn_rates, kind)

    def _pairs(self, files: list[str], rate: float, at: float,
               others: list[str] = ()) -> list[tuple[str, str, float, float]]:
        """The pairs one activation links: among ``files``, and each with ``others``."""
        files = list(dict.fromkeys(files))
        if len(files) > self.settings.learn_max_files:
            return []
        found = {ordered(a, b) for a, b in itertools.combinations(files, 2)}
        found |= {ordered(a, b) for a in files for b in others if a != b}
        return [(a, b, rate, at) for a, b in sorted(found)]

    # -- explicit writes ----------------------------------------------------------------------

    def activity(self, project, files: list[str], kind: str, session: str,
                 at: float | None = None) -> dict[str, Any]:
        """Files an agent or editor read, edited or tested: linked with each other and with
        what the same session touched in the last ``learn_session_s``."""
        at = time.time() if at is None else at
        store = self.store(project)
        recent: list[str] = []
        for act in store.recent(at - self.settings.learn_session_s, session=session):
            recent += [f for f in act["files"] if f not in files and f not in recent]
        pairs = (self._pairs(files, self._rate(kind), at, recent[:SESSION_FILES])
                 if self.settings.learning else [])
        store.write([(at, kind, session, files)], pairs, [], {}, {
            f"activations.{kind}": 1, "pairs_strengthened": len(pairs)}, self.half_life_s)
        return {"files": len(files), "pairs": len(pairs), "session": session,
                "learning": self.settings.learning}

    def feedback(self, project, path: str, helpful: bool, related: list[str] | None
                 ) -> dict[str, Any]:
        """Strengthen (helpful) or weaken (unhelpful) the links between ``path`` and the
        files it was last activated with, or ``related``."""
        self.flush(project)
        store, at = self.store(project), time.time()
        if related is None:
            last = store.recent(at - FEEDBACK_WINDOW_S, containing=path, limit=1)
            related = [f for f in last[0]["files"] if f != path] if last else []
        related = [f for f in dict.fromkeys(related) if f != path]
        kind = "helpful" if helpful else "unhelpful"
        pairs = [(*ordered(path, other), self._rate(kind), at) for other in related] \
            if self.settings.learning else []
        store.write([], pairs if helpful else [], [] if helpful else pairs, {},
                    {f"feedback.{kind}": 1,
                     "pairs_strengthened" if helpful else "pairs_weakened": len(pairs)},
                    self.half_life_s)
        return {"file": path, "signal": kind, "pairs": len(pairs), "related": related,
                "learning": self.settings.learning}

    # -- reads (each writes this process's buffer first) --------------------------------------

    def linked(self, project, paths: list[str], limit: int, at: float | None = None
               ) -> list[tuple[str, str, float, int, float]]:
        self.flush(project)
        return self.store(project).linked(paths, time.time() if at is None else at,
                                          self.half_life_s, FLOOR, limit)

    def stats(self, project) -> dict[str, Any]:
        self.flush(project)
        now = time.time()
        found = self.store(project).stats(now, self.half_life_s, now - 7 * DAY_S, 10)
        rates = self.settings.learn_rates.model_dump()
        return {"learning": self.settings.learning, "half_life_days":
                self.settings.learn_half_life_days, "rates": rates,
                "synapses": found["synapses"], "files": found["files"],
                "mean_weight": round(found["mean_weight"], 4),
                "strongest": [{"a": a, "b": b, "weight": round(w, 4), "count": c,
                               "updated_at": iso(u)} for a, b, w, c, u in found["strongest"]],
                "activations_7d": found["activations"], "counters": found["counters"]}

    def savings(self, project, days: int) -> dict[str, Any]:
        self.flush(project)
        store = self.store(project)
        since = (datetime.now(timezone.utc) - timedelta(days=days - 1)).date().isoformat()
        per_day = [{"day": day, "kind": kind, **_tokens(calls, served, whole)}
                   for day, kind, calls, served, whole in store.savings(since)]
        kinds = {kind: _tokens(calls, served, whole)
                 for kind, calls, served, whole in store.savings_total()}
        total = _tokens(*(sum(k[f] for k in kinds.values()) for f in
                          ("calls", "tokens_served", "tokens_whole")))
        return {"project_id": project.id, "days": days, "total": total, "by_kind": kinds,
                "per_day": per_day}


def next_files(candidates: dict[str, dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Rank the candidates ``{path: {"learned", "structural", "decision", "task": score,
    "why": [...]}}`` by the weighted sum of their evidence (``WEIGHTS``)."""
    ranked = []
    for path, c in candidates.items():
        score = sum(WEIGHTS[k] * c.get(k, 0.0) for k in WEIGHTS)
        if score > 0:
            ranked.append({"path": path, "score": round(score, 4), "why": c["why"]})
    ranked.sort(key=lambda r: (-r["score"], r["path"]))
    return ranked[:limit]


def _tokens(calls: int, served: int, whole: int) -> dict[str, Any]:
    return {"calls": calls, "tokens_served": served, "tokens_whole": whole,
            "tokens_saved": max(0, whole - served),
            "ratio": round(whole / served, 2) if served else None}


def iso(epoch: float) -> str:
    """Epoch seconds as the API writes times (UTC, ISO 8601)."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds").replace(
        "+00:00", "Z")
