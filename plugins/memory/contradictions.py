"""Contradictions: records that cannot both hold, found by the LLM-free detector
(:mod:`plugins.memory.detector`), stored, listed and resolved.

A write (create, patch) is compared with its nearest ACTIVE neighbours — those its duplicate
hint finds: titles sharing its title's rare words, on one of its files when it names files,
up to 3 (the detector costs ~1 ms a pair, and a create ~2 ms all told). The explicit check
route casts a wider net — rare title words in any field, the newest records on its files, the
nearest by embedding cosine — and gives the detector each pair's cosine. A pair the detector scores at or above the project's threshold is stored once
(``a`` the older record, ``b`` the newer) with its confidence and explanation, as an event in
both records' history, and resolved later by a strategy — or at once, when the project's
``auto_resolve`` names one.

A contradiction is between records in force (ACTIVE, or STALE as stored): one whose record
has left that state since — invalidated, superseded, merged, archived — is dormant. It stays
open in the store (and under ``status=all``) but is left out of the open list and of what a
write or a check reports, and comes back if the record is restored. A resolution that would
keep a record not in force (``keep_newest`` when the newer one was invalidated, ``keep_both``
with either) is refused: 409 ``invalid_transition`` naming the record and its status.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from neuralmind import (APIError, Conflict, NotFound, decode_cursor, encode_cursor, gitinfo,
                        now_iso, text_pair, today, top_k)
from plugins.memory import detector, records
from plugins.memory.links import in_force
from plugins.memory.models import ContradictionConfig

log = logging.getLogger("neuralmind.memory")
STORE_NEIGHBOURS = 3  # the duplicate hint's neighbours a create or patch is compared with
CHECK_NEIGHBOURS = 8  # per source (title words, files, cosine) on …/contradictions/check/{id}
SETTLED = ("supersedes", "merged_into")  # linked so: the pair is settled already


def older_first(x: dict[str, Any], y: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return (x, y) if (x["created_at"], x["id"]) <= (y["created_at"], y["id"]) else (y, x)


def not_found(cid: str) -> NotFound:
    return NotFound(f"no contradiction with id {cid}", code="contradiction_not_found")


def not_in_force(cid: str, strategy: str, rec: dict[str, Any] | None, mid: str) -> Conflict:
    """409: ``strategy`` would keep a record that is no longer in force (or is gone)."""
    status = rec["status"] if rec is not None else "deleted"
    return Conflict(f"cannot resolve contradiction {cid} with {strategy}: it would keep {mid}, "
                    f"which is {status}, no longer in force (ACTIVE or STALE): restore it, or "
                    "resolve with a strategy that keeps a record in force",
                    code="invalid_transition",
                    details={"memory_id": mid, "status": status, "strategy": strategy})


class Contradictions:
    def __init__(self, memories):
        self.m = memories

    # -- config --------------------------------------------------------------------------

    def config(self, store) -> dict[str, Any]:
        return ContradictionConfig.model_validate(store.config("contradictions") or {}
                                                  ).model_dump()

    def put_config(self, project, changes: dict[str, Any], actor, request_id) -> dict[str, Any]:
        """The fields given change; null leaves a field as it is, except ``auto_resolve``,
        where null turns auto-resolution off."""
        changes = {k: v for k, v in changes.items() if v is not None or k == "auto_resolve"}
        store = self.m.store(project)
        new = ContradictionConfig.model_validate({**self.config(store), **changes}).model_dump()
        with store.writing() as w:
            w.put_config("contradictions", new)
        self.m.emit("contradiction_config", project, actor, request_id, **new)
        return new

    # -- checks --------------------------------------------------------------------------

    def near(self, store, rec: dict[str, Any], on: str, k: int) -> list[dict[str, Any]]:
        """The records a write is compared with — the duplicate hint's neighbours: ACTIVE
        records whose titles share the rare words of ``rec``'s title, on one of its files when
        it names files, best match first."""
        return [r for r, _ in self.m.searcher.similar_titles(
            store, rec["title"], {"status": "ACTIVE", "file": rec["files_affected"]}, on, k,
            exclude=rec["id"])]

    def unsettled(self, store, rec: dict[str, Any], others: list[dict[str, Any]]
                  ) -> dict[str, dict[str, Any]]:
        """``others`` by id, without those already linked to ``rec`` by supersedes or
        merged_into (that pair is settled)."""
        found = {r["id"]: r for r in others}
        if found:
            for lk in store.links([rec["id"]]):
                if lk["type"] in SETTLED:
                    found.pop(lk["target"] if lk["source"] == rec["id"] else lk["source"], None)
        return found

    def wide(self, store, rec: dict[str, Any], on: str, k: int) -> list[dict[str, Any]]:
        """The explicit check's net: records whose text (any field) holds the rare words of
        ``rec``'s title, and the newest records on its files."""
        found = {r["id"]: r for r, _ in self.m.searcher.similar_titles(
            store, rec["title"], {"status": "ACTIVE"}, on, k, exclude=rec["id"], column=None)}
        for r in store.sharing(rec["files_affected"], [], on, k, rec["id"]):
            found.setdefault(r["id"], r)
        return list(found.values())

    def cosines(self, store, rec: dict[str, Any], on: str, k: int
                ) -> tuple[dict[str, float], list[str]]:
        """``({id: cosine with rec}, the k nearest ACTIVE ids)`` from the stored vectors
        (embedding up to ``search_embed_max`` of what is missing, as a search does); nothing
        without a model, or while ``rec`` itself waits for the backfill past those."""
        try:
            index = self.m.searcher.index(store, self.m.kernel.embedder)
        except APIError:
            return {}, []
        where = {mid: i for i, mid in enumerate(index.ids)}
        if rec["id"] not in where:
            return {}, []
        scores = index.scores(index.own(where[rec["id"]]))  # a long record's best passage
        keep = index.mask({"status": "ACTIVE"}, on, None)
        keep[where[rec["id"]]] = False
        nearest = [index.ids[i] for i in top_k(scores, k, keep)]
        return {mid: float(scores[i]) for mid, i in where.items()}, nearest

    def detect(self, store, rec: dict[str, Any], neighbours: dict[str, dict[str, Any]],
               cosine: dict[str, float], actor) -> tuple[list[dict[str, Any]], list[str]]:
        """Run the detector on ``rec`` against each neighbour and store what it finds:
        ``(open contradictions of these pairs, ids of the new ones)``."""
        threshold = self.config(store)["threshold"]
        found, new, at = [], [], now_iso()
        if not in_force(rec):
            return found, new  # its contradictions are dormant; it raises no new one
        for other in neighbours.values():
            if (other["title"], other["rationale"]) == (rec["title"], rec["rationale"]):
                continue  # a record does not contradict its own duplicate
            if not in_force(other):
                continue
            a, b = older_first(other, rec)
            known = store.contradiction_between(a["id"], b["id"])
            if known is not None:
                if known["status"] == "open":
                    found.append(known)
                continue
            verdict = detector.detect(a, b, cosine.get(other["id"]), threshold)
            if not verdict.is_contradiction:
                continue
            row = {"id": "c_" + secrets.token_hex(6), "a": a["id"], "b": b["id"],
                   "confidence": verdict.confidence, "kind": verdict.kind,
                   "explanation": verdict.explanation, "status": "open", "detected_at": at,
                   "resolved_at": None, "resolved_by": None, "strategy": None, "outcome": None}
            with store.writing() as w:
                if w.contradiction(row):
                    for x, y in ((a, b), (b, a)):
                        w.event(x["id"], at, "contradiction", self.m.actor_for(actor, x),
                                {"contradiction": {"id": row["id"], "with": y["id"]}},
                                verdict.explanation)
                    new.append(row["id"])
            found.append(row)
        return found, new

    def on_store(self, project, store, rec: dict[str, Any], actor, request_id,
                 near: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """After a create or patch (``check_on_store``): the record's contradictions with its
        nearest neighbours (``near``, when the caller has them already), resolved at once when
        ``auto_resolve`` names a strategy. The write has committed: a check that fails is
        logged and answers nothing (``…/contradictions/check/{id}`` runs it again)."""
        try:
            return self._on_store(project, store, rec, actor, request_id, near)
        except Exception:
            log.exception("contradiction check failed for memory %s", rec["id"])
            return []

    def _on_store(self, project, store, rec, actor, request_id, near) -> list[dict[str, Any]]:
        config = self.config(store)
        if not config["check_on_store"] or rec["status"] != "ACTIVE":
            return []
        if near is None:
            near = self.near(store, rec, today(), STORE_NEIGHBOURS)
        neighbours = self.unsettled(store, rec, near[:STORE_NEIGHBOURS])
        if not neighbours:
            return []
        found, new = self.detect(store, rec, neighbours, {}, actor)
        self._announce(project, found, new, actor, request_id)
        if config["auto_resolve"] and new:
            for cid in new:
                try:
                    self.resolve(project, cid, config["auto_resolve"], None, None, actor,
                                 request_id)
                except Conflict:  # a supersedes cycle, or resolved meanwhile: leave it
                    continue
            found = [store.contradiction(c["id"]) or c for c in found]
        return found

    def check(self, project, mid: str, actor, request_id) -> dict[str, Any]:
        """The explicit check: a wider net, and each pair's embedding cosine when known."""
        store = self.m.store(project)
        rec = self.m.get_record(store, mid)
        on = today()
        cosine, nearest = self.cosines(store, rec, on, CHECK_NEIGHBOURS)
        others = self.wide(store, rec, on, CHECK_NEIGHBOURS)
        known = {r["id"] for r in others}
        others += store.get_many([i for i in nearest if i not in known]).values()
        neighbours = self.unsettled(store, rec, others)
        found, new = self.detect(store, rec, neighbours, cosine, actor)
        self._announce(project, found, new, actor, request_id)
        return {"memory_id": mid, "count": len(found), "items": found}

    def _announce(self, project, found, new, actor, request_id) -> None:
        for c in found:
            if c["id"] in new:
                self.m.emit("contradiction", project, actor, request_id, id=c["id"], a=c["a"],
                            b=c["b"], confidence=c["confidence"])

    # -- reads ---------------------------------------------------------------------------

    def get(self, project, cid: str) -> dict[str, Any]:
        found = self.m.store(project).contradiction(cid)
        if found is None:
            raise not_found(cid)
        return found

    def list(self, project, query) -> tuple[list[dict[str, Any]], str | None]:
        """A page of contradictions; 404 for a ``memory_id`` no record has (an empty page
        would read as "none involve it")."""
        before = decode_cursor(query.cursor, text_pair)
        store = self.m.store(project)
        if query.memory_id is not None and store.get(query.memory_id) is None:
            from plugins.memory.service import not_found as no_memory
            raise no_memory(query.memory_id)
        after = tuple(before) if before else None
        rows: list[dict[str, Any]] = []
        while len(rows) <= query.limit:
            batch = store.contradictions(query.status, query.memory_id, query.limit + 1, after)
            # open: only those still between records in force (the others are dormant)
            rows += self.live(store, batch) if query.status == "open" else batch
            if len(batch) <= query.limit:
                break
            after = (batch[-1]["detected_at"], batch[-1]["id"])
        more = len(rows) > query.limit
        rows = rows[: query.limit]
        return rows, (encode_cursor([rows[-1]["detected_at"], rows[-1]["id"]]) if more else None)

    def live(self, store, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` without the contradictions one of whose records is no longer in force."""
        recs = store.get_many(list({mid for c in rows for mid in (c["a"], c["b"])}))
        return [c for c in rows if in_force(recs.get(c["a"])) and in_force(recs.get(c["b"]))]

    # -- resolution ----------------------------------------------------------------------

    def resolve(self, project, cid: str, strategy: str, title: str | None,
                rationale: str | None, actor, request_id) -> dict[str, Any]:
        """keep_newest / keep_oldest / keep_important: the winner supersedes the other;
        keep_both: both stay; manual: a new record from the given text supersedes both."""
        store = self.m.store(project)
        c = self.get(project, cid)
        if c["status"] != "open":
            raise Conflict(f"contradiction {cid} is already resolved ({c['strategy']})",
                           code="invalid_transition")
        a, b = self.m.get_record(store, c["a"]), self.m.get_record(store, c["b"])
        winner = {"keep_newest": b, "keep_oldest": a,
                  "keep_important": a if a["importance"] > b["importance"] else b}.get(strategy)
        loser = None if winner is None else (a if winner is b else b)
        keeps = [a, b] if strategy == "keep_both" else [winner] if winner is not None else []
        for rec in keeps:
            if not in_force(rec):
                raise not_in_force(cid, strategy, rec, rec["id"])
        new = self._replacement(project, a, b, title, rationale) if strategy == "manual" else None
        at = now_iso()
        with store.writing() as w:
            for rec in keeps:  # as this transaction reads it: not invalidated meanwhile
                if not in_force(w.get(rec["id"])):
                    raise not_in_force(cid, strategy, w.get(rec["id"]), rec["id"])
            if new is not None:
                w.create([(new, records.content_sha(new), self.m.actor_for(actor, new))])
                superseded = self.m.links.supersede(w, new, [a["id"], b["id"]], actor, at)
                kept = [new["id"]]
            elif loser is not None:
                self.m.links.connect(w, winner, loser, "supersedes", actor, at,
                                     note=f"resolves contradiction {cid}")
                superseded, kept = [loser["id"]], [winner["id"]]
            else:
                superseded, kept = [], [a["id"], b["id"]]
            outcome = {"kept": kept, "superseded": superseded,
                       "created": new["id"] if new else None}
            if not w.resolve(cid, at=at, actor=actor.id, strategy=strategy, outcome=outcome):
                raise Conflict(f"contradiction {cid} was resolved meanwhile",
                               code="invalid_transition")
            for rec in (a, b):
                w.event(rec["id"], at, "contradiction_resolved", self.m.actor_for(actor, rec),
                        {"contradiction": {"id": cid, "strategy": strategy}})
        self.m.written(store)
        self.m.emit("contradiction_resolved", project, actor, request_id, id=cid,
                    strategy=strategy, **outcome)
        return {"contradiction": store.contradiction(cid), **outcome}

    def _replacement(self, project, a: dict[str, Any], b: dict[str, Any], title: str | None,
                     rationale: str) -> dict[str, Any]:
        """manual: the record that replaces both (B's kind and type, both records' files and
        tags, the higher importance)."""
        body = {"title": title or b["title"], "rationale": rationale, "kind": b["kind"],
                "decision_type": b["decision_type"],
                "importance": max(a["importance"], b["importance"]),
                "files_affected": list(dict.fromkeys(a["files_affected"] + b["files_affected"])),
                "tags": list(dict.fromkeys(a["tags"] + b["tags"]))[:50]}
        errors: list[dict] = []
        rec = records.build(body, root=project.path, now=now_iso(),
                            head=gitinfo.head(project.path), errors=errors)
        if errors:
            raise records.fail(errors)
        return rec
