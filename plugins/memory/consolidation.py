"""Consolidation: clusters of near-duplicate ACTIVE records merged into one record.

Two records belong together when they are of the same kind, neither is pinned, the cosine of
their title + rationale vectors is at or above the threshold (0.85 by default: on the
labelled pairs of bench/data/contradictions, 8 of 32 paraphrases and 1 of 80 compatible
pairs reach it), they share a file or a tag (or neither has any), they do not contradict
each other — 6 of 85 contradicting pairs also reach 0.85, so the detector vetoes a merge —
and their titles are not about different numbered items ("Bug 191 is fixed in the parser" /
"Bug 221 …": ``detector.different_items``), which read alike but are not duplicates. Clusters
are stars: records in order of importance (then newest) each gather the unclaimed records
close to them that the detector finds no contradiction with and that are about no other
numbered items than, and have no open contradiction with, the seed or a member gathered
before: a chain of near-neighbours never merges end to end, nor two members about different
items through a third, and a pile of near-duplicates costs one detector call a record (the
detector judges each with the seed alone). A merge makes a new
record — the lead record's title (the most important, then the newest), every distinct
sentence of the cluster's texts in the order written (each text's lines kept), the union of
files, tags and lists, the highest importance and confidence, the earliest review date — and
gives each original a ``merged_into`` link to it (status MERGED, with history; restore brings
one back).

Each merge reads its members again in its own serial write transaction and merges only those
unchanged since the clusters were found, so an edit made meanwhile is never overwritten and
two consolidations of one project never merge one record twice.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from collections.abc import Callable

from neuralmind import gitinfo, now_iso, today
from plugins.memory import detector, records
from plugins.memory.contradictions import older_first

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
LIST_CAP = {"files_affected": 500, "tags": 50, "evidence": 200, "rejected_alternatives": 200,
            "dependency_constraints": 200}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(text) if s.strip()]


def _key(sentence: str) -> str:
    return " ".join(sentence.lower().split()).rstrip(".!?")


def merged_text(recs: list[dict[str, Any]]) -> str:
    """Each record's rationale without the sentences an earlier one holds (compared ignoring
    case, spacing and the final stop), its lines kept — a list or a procedure keeps its shape,
    and a step it repeats stays — the records' texts one after another (a paragraph each
    when any spans lines)."""
    seen: set[str] = set()
    parts = []
    for rec in recs:
        lines = [" ".join(s for s in sentences(line) if _key(s) not in seen)
                 for line in rec["rationale"].splitlines()]
        seen.update(_key(s) for s in sentences(rec["rationale"]))
        if text := "\n".join(line for line in lines if line):
            parts.append(text)
    return ("\n\n" if any("\n" in p for p in parts) else " ").join(parts)


def related(x: dict[str, Any], y: dict[str, Any]) -> bool:
    """Same subject by files and tags: one shared, or neither record names any."""
    xs = set(x["files_affected"]) | {"#" + t for t in x["tags"]}
    ys = set(y["files_affected"]) | {"#" + t for t in y["tags"]}
    return bool(xs & ys) or not (xs or ys)


def clusters(recs: list[dict[str, Any]], vectors: dict[str, Any], threshold: float,
             conflict: Callable[[dict[str, Any], dict[str, Any], float], bool],
             opposed: dict[str, set[str]], check: Callable[[], None] = lambda: None
             ) -> list[list[dict[str, Any]]]:
    """Star clusters of two or more (see the module docstring); records without a vector
    stay out. A record joins a seed unless its title is about other numbered items than the
    seed's or any member's gathered before it, or ``opposed`` (each record's open
    contradictions) pairs it with one of them, or ``conflict(seed, record, cosine)`` (the
    detector) refuses it. Each record's items are read once and the members' kept as a
    list, so a pile of near-duplicates costs one detector call per candidate, not one per
    member. ``check`` runs before each seed (a job's cancel)."""
    import numpy as np
    out = []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for rec in recs:
        if not rec["pinned"] and rec["id"] in vectors:
            by_kind.setdefault(rec["kind"], []).append(rec)
    for group in by_kind.values():
        group.sort(key=lambda r: (r["importance"], r["updated_at"], r["id"]), reverse=True)
        items = [detector.title_items(r) for r in group]  # the detector's own reading
        matrix = np.stack([vectors[r["id"]] for r in group])
        free = np.ones(len(group), dtype=bool)
        for i, seed in enumerate(group):
            if not free[i]:
                continue
            check()
            free[i] = False
            cosine = matrix @ matrix[i]
            gathered, numbered = {seed["id"]}, [items[i]] if items[i] else []
            members: list[int] = []
            for j in np.flatnonzero(free & (cosine >= threshold)):
                rec = group[j]
                other = items[j] and any(detector.other_items(x, items[j]) for x in numbered)
                if other or opposed.get(rec["id"], set()) & gathered or not related(seed, rec) \
                        or conflict(seed, rec, float(cosine[j])):
                    continue
                members.append(j)
                gathered.add(rec["id"])
                if items[j]:
                    numbered.append(items[j])
            if members:
                free[members] = False
                out.append([seed, *(group[j] for j in members)])
    return out


def open_pairs(store) -> dict[str, set[str]]:
    """Each record's open contradictions: the ids on their other side."""
    out: dict[str, set[str]] = {}
    page, before = 1000, None
    while True:
        found = store.contradictions("open", None, page, before)
        for c in found:
            out.setdefault(c["a"], set()).add(c["b"])
            out.setdefault(c["b"], set()).add(c["a"])
        if len(found) < page:
            return out
        before = (found[-1]["detected_at"], found[-1]["id"])


class Consolidation:
    def __init__(self, memories):
        self.m = memories

    def run(self, project, dry_run: bool, kinds: list[str], threshold: float, actor,
            ctx=None, before_write: Callable[[], None] | None = None) -> dict[str, Any]:
        """Find the clusters and merge each (``dry_run``: list them). ``before_write`` is called
        before each merge's write transaction (tests make a change land there)."""
        store = self.m.store(project)
        recs = store.active(kinds, today())
        index = self.m.searcher.complete_index(store, self.m.kernel.embedder)
        vectors = {mid: index.matrix[i] for i, mid in enumerate(index.ids)}
        def conflict(x: dict[str, Any], y: dict[str, Any], cosine: float) -> bool:
            return detector.detect(*older_first(x, y), cosine).is_contradiction

        found = clusters(recs, vectors, threshold, conflict, open_pairs(store),
                         ctx.check if ctx is not None else lambda: None)
        report, merged = [], 0
        for group in found:
            if ctx is not None:
                ctx.check()
            if before_write is not None and not dry_run:
                before_write()
            into, changed = (None, []) if dry_run else self.merge(project, store, group, actor)
            if into is not None:
                merged += len(group) - len(changed)
            report.append({"kind": group[0]["kind"], "ids": [r["id"] for r in group],
                           "titles": [r["title"] for r in group], "merged_into": into,
                           "skipped": changed})
        return {"dry_run": dry_run, "threshold": threshold, "checked": len(recs),
                "clusters": report, "merged": merged}

    def merge(self, project, store, group: list[dict[str, Any]], actor
              ) -> tuple[str | None, list[str]]:
        """One new record for the cluster; each original merged into it: ``(its id, the ids
        left out)``. The members are read again in the merge's (serial) transaction: one
        changed since it was read — edited, pinned, no longer ACTIVE (merged by another
        consolidation, say) or gone — is left out, as it now is; with the lead left out, or
        fewer than two members left, nothing is merged (``(None, …)``)."""
        at, head, on = now_iso(), gitinfo.head(project.path), today()
        with store.writing() as w:
            rows = w.get_many([r["id"] for r in group])
            kept = [rows[r["id"]] for r in group if unchanged(r, rows.get(r["id"]), on)]
            changed = [r["id"] for r in group if r["id"] not in {k["id"] for k in kept}]
            if len(kept) < 2 or kept[0]["id"] != group[0]["id"]:
                return None, changed
            lead = kept[0]
            ordered = sorted(kept, key=lambda r: (r["created_at"], r["id"]))
            body = {"title": lead["title"], "rationale": merged_text(ordered),
                    "kind": lead["kind"], "decision_type": lead["decision_type"],
                    "importance": max(r["importance"] for r in kept),
                    "confidence": max(r["confidence"] for r in kept),
                    **{f: lead[f] for f in ("author", "agent", "session_id")},
                    "review_by": earliest_review(kept),
                    **{f: list(dict.fromkeys(x for r in ordered for x in r[f]))[:cap]
                       for f, cap in LIST_CAP.items()}}
            new = records.build(body, root=project.path, now=at, head=head, errors=[])
            ids = [r["id"] for r in ordered]
            w.create([(new, records.content_sha(new), self.m.actor_for(actor, new))])
            w.event(new["id"], at, "merged", self.m.actor_for(actor, new), {"merged_from": ids})
            for rec in ordered:
                self.m.links.connect(w, rec, new, "merged_into", actor, at)
        self.m.written(store)
        self.m.emit("merged", project, actor, None, id=new["id"], merged_from=ids)
        return new["id"], changed


def earliest_review(recs: list[dict[str, Any]]) -> dt.date | None:
    """The soonest review date the records hold (each still ahead: they are ACTIVE)."""
    dates = [r["review_by"] for r in recs if r["review_by"]]
    return dt.date.fromisoformat(min(dates)) if dates else None


RECALL_FIELDS = ("last_accessed_at", "access_count")  # moved by searches, not by writes


def unchanged(read: dict[str, Any], now: dict[str, Any] | None, on: str) -> bool:
    """Whether a record is still as a consolidation read it: there, every field as read (a
    search's recall aside), not pinned and effectively ACTIVE."""
    return (now is not None and not now["pinned"] and records.effective_status(now, on) == "ACTIVE"
            and all(now[f] == read[f] for f in now if f not in RECALL_FIELDS))
