"""Typed links between records, the graph they make, and search's expansion along them.

``supersedes`` makes its target SUPERSEDED, ``merged_into`` (written by consolidation) makes
its source MERGED — in favour of the other end, which must be in force (ACTIVE or STALE), as
a resolution keeps only a record in force; ``depends_on``, ``relates_to`` and ``contradicts``
change no status. Every link added or removed is an event (``linked`` / ``unlinked``) in both
records' history, in the same transaction as the link. A link is not a field: it moves no
``updated_at`` unless it changes a status.
"""

from __future__ import annotations

from typing import Any

from neuralmind import Conflict, NotFound, now_iso, today
from plugins.memory import records

# what a link makes of a record that is ACTIVE or STALE: (which end, status, event kind, note)
STATUS_OF = {"supersedes": ("target", "SUPERSEDED", "superseded", "superseded by {source}"),
             "merged_into": ("source", "MERGED", "merged", "merged into {target}")}
LIVE = ("ACTIVE", "STALE")


def in_force(rec: dict[str, Any] | None) -> bool:
    return rec is not None and rec["status"] in LIVE


def link_change(link: dict[str, Any]) -> dict[str, Any]:
    return {"link": {k: link[k] for k in ("source", "target", "type")}}


def retired_for(link_type: str, retired: str, kept: dict[str, Any]) -> Conflict:
    """409: a link would retire the record ``retired`` in favour of ``kept``, no longer in
    force: nothing in force would hold what it says."""
    return Conflict(f"a {link_type} link would retire {retired} in favour of {kept['id']}, "
                    f"which is {kept['status']}, no longer in force (ACTIVE or STALE): restore "
                    f"{kept['id']} first, or link {retired} with a record in force",
                    code="invalid_transition",
                    details={"memory_id": kept["id"], "status": kept["status"], "type": link_type})


class Links:
    def __init__(self, memories):
        self.m = memories

    # -- inside a write ------------------------------------------------------------------

    def connect(self, w, source: dict[str, Any], target: dict[str, Any], link_type: str, actor,
                at: str, note: str | None = None) -> dict[str, Any] | None:
        """Add a link with its events and the status it implies; None when it exists. A
        ``supersedes`` link that would close a cycle is 409 ``link_cycle``: judged on the links
        as this serial transaction reads them, so of two opposite links racing, one wins. One
        that would retire a record in force for one that is not is 409 ``invalid_transition``
        (:func:`retired_for`); ``source`` and ``target`` are rows as this transaction reads
        them (or makes them)."""
        if link_type == "supersedes" and self.reaches(w, target["id"], source["id"]):
            raise Conflict(f"{target['id']} already supersedes {source['id']} (directly or "
                           "through others)", code="link_cycle")
        end, status, kind, why = STATUS_OF.get(link_type, (None, None, None, None))
        changed, kept = (source, target) if end == "source" else (target, source)
        if status and in_force(changed) and not in_force(kept):
            raise retired_for(link_type, changed["id"], kept)
        link = {"source": source["id"], "target": target["id"], "type": link_type,
                "created_at": at, "actor": actor.id, "note": note}
        if not w.link(link):
            return None
        for rec in (source, target):
            w.event(rec["id"], at, "linked", self.m.actor_for(actor, rec), link_change(link),
                    note)
        if status:  # judged on the row as this transaction reads it, not on ``changed``
            self.m.change_status(w, changed, status, kind=kind, at=at,
                                 actor=self.m.actor_for(actor, changed), note=why.format(**link),
                                 only_from=LIVE)
        return link

    def supersede(self, w, rec: dict[str, Any], old_ids: list[str], actor, at: str) -> list[str]:
        """``rec`` supersedes each of ``old_ids``: the ids it newly superseded."""
        done = []
        for oid in old_ids:
            old = w.get(oid)
            if old is not None and self.connect(w, rec, old, "supersedes", actor, at):
                done.append(oid)
        return done

    @staticmethod
    def reaches(w, start: str, goal: str) -> bool:
        """Whether ``goal`` is reachable from ``start`` along ``supersedes`` links, inside
        the write ``w``."""
        seen, frontier = {start}, [start]
        while frontier:
            nxt = w.targets(frontier, "supersedes")
            if goal in nxt:
                return True
            frontier = [t for t in dict.fromkeys(nxt) if t not in seen]
            seen.update(frontier)
        return False

    # -- routes --------------------------------------------------------------------------

    def add(self, project, mid: str, target: str, link_type: str, note: str | None, actor,
            request_id) -> dict[str, Any]:
        store = self.m.store(project)
        self.m.get_record(store, mid)
        errors = self.m.check_ids(store, [target], mid, "target")
        if errors:
            raise records.fail([{**e, "loc": ("target",)} for e in errors])
        with store.writing() as w:
            found = w.get_many([mid, target])
            gone = [m for m in (mid, target) if m not in found]  # deleted since checked
            if gone:
                raise NotFound(f"no memory with id {gone[0]}", code="memory_not_found")
            link = self.connect(w, found[mid], found[target], link_type, actor, now_iso(), note)
        if link is None:
            raise Conflict(f"{mid} already {link_type} {target}", code="link_exists")
        self.m.written(store)
        self.m.emit("linked", project, actor, request_id, **link_change(link)["link"])
        return link

    def remove(self, project, mid: str, target: str, link_type: str | None, actor,
               request_id) -> None:
        """Remove links from ``mid`` to ``target``; statuses they set stay (restore undoes)."""
        store = self.m.store(project)
        source = self.m.get_record(store, mid)
        at = now_iso()
        with store.writing() as w:
            gone = w.unlink(mid, target, link_type)
            other = w.get(target)
            for link in gone:
                for rec in (source, other):
                    if rec is not None:
                        w.event(rec["id"], at, "unlinked", self.m.actor_for(actor, rec),
                                link_change(link), link.get("note"))
        if not gone:
            raise NotFound(f"no {link_type or ''} link from {mid} to {target}".replace("  ", " "),
                           code="link_not_found")
        for link in gone:
            self.m.emit("unlinked", project, actor, request_id, **link_change(link)["link"])

    def list(self, project, mid: str) -> list[dict[str, Any]]:
        store = self.m.store(project)
        self.m.get_record(store, mid)
        return [{**lk, "direction": "out" if lk["source"] == mid else "in"}
                for lk in store.links([mid])]

    def graph(self, project, mid: str, depth: int) -> dict[str, Any]:
        """Records within ``depth`` links of ``mid`` (either direction) and the links among
        them; each node with its distance."""
        store = self.m.store(project)
        root = self.m.get_record(store, mid)
        dist, frontier, edges = {mid: 0}, [mid], {}
        for level in range(1, depth + 1):
            found = store.links(frontier)
            frontier = []
            for lk in found:
                edges[(lk["source"], lk["type"], lk["target"])] = lk
                for end in (lk["source"], lk["target"]):
                    if end not in dist:
                        dist[end] = level
                        frontier.append(end)
            if not frontier:
                break
        recs = {**store.get_many([i for i in dist if i != mid]), mid: root}
        on = today()
        nodes = [{"id": i, "title": recs[i]["title"], "kind": recs[i]["kind"],
                  "status": records.effective_status(recs[i], on), "depth": d}
                 for i, d in sorted(dist.items(), key=lambda kv: (kv[1], kv[0])) if i in recs]
        return {"root": mid, "nodes": nodes,
                "edges": [lk for lk in edges.values()
                          if lk["source"] in recs and lk["target"] in recs]}

    def expand(self, store, hits: list[tuple[dict[str, Any], float]], filters: dict[str, Any],
               on: str, factor: float, limit: int
               ) -> list[tuple[dict[str, Any], float, dict[str, str]]]:
        """Up to ``limit`` records linked to the hits that pass the same filters, each scored
        ``factor`` × its best source's score and marked with that source:
        ``[(record, score, via)]``."""
        score = {rec["id"]: s for rec, s in hits}
        best: dict[str, tuple[float, dict[str, str]]] = {}
        for lk in store.links(score):
            for end, other in ((lk["source"], lk["target"]), (lk["target"], lk["source"])):
                if end in score and other not in score:
                    s = score[end] * factor
                    if other not in best or s > best[other][0]:
                        best[other] = (s, {"id": end, "type": lk["type"]})
        keep = store.filter_ids(filters, on, among=list(best)) if best else set()
        recs = store.get_many(sorted(keep))
        found = sorted(((recs[i], *best[i]) for i in keep if i in recs), key=lambda h: -h[1])
        return found[:limit]
