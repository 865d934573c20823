"""Memories: what the routes, the jobs and the query_context hook do, on top of the store.

It owns one :class:`MemoryStore` per project (kept for the process), the :class:`Searcher`,
the backfill thread and the feature services (links, contradictions, decay, consolidation),
turns domain failures into API errors, and emits a kernel event after each write has
committed.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from neuralmind import (APIError, Conflict, Forbidden, NotFound, PreconditionFailed, ProjectStores,
                        decode_cursor, encode_cursor, estimate_tokens, gitinfo, now_iso, row_number,
                        text_pair, today)
from plugins.memory import exports, records, times
from plugins.memory.backfill import Backfiller
from plugins.memory.consolidation import Consolidation
from plugins.memory.contradictions import Contradictions
from plugins.memory.decay import importance_of, parse_time, policy_of, strengths
from plugins.memory.links import Links, in_force
from plugins.memory.models import (BatchIn, BatchItem, ExportLine, InvalidateIn, MemoryIn,
                                   MemoryPatch, MemorySettings, SearchIn)
from plugins.memory.recalls import Recalls
from plugins.memory.search import Searcher, nothing_found
from plugins.memory.store import MIGRATIONS, IdTaken, MemoryStore
from plugins.memory.sweeps import Sweeps
from plugins.memory.text import nfc

FILTER_FIELDS = ("status", "file", "tag", "kind", "type", "author", "agent", "session_id",
                 "created_after", "created_before", "min_confidence")
EXPAND_FACTOR = 0.5  # a linked record's score: its source's × this, so it ranks below it
TIMELINE_COMMITS = 200


def store_opener(kernel, shared, path) -> Callable[[Any], MemoryStore]:
    """How a project's store opens, chosen once: in ``shared``, the database the servers
    share (migrated now, at start-up), else in the SQLite file ``path(project)``."""
    if shared is None:
        return lambda project: MemoryStore(kernel.open_database(path(project), MIGRATIONS))
    from plugins.memory.pgstore import PG_MIGRATIONS, PgMemoryStore
    shared.migrate(PG_MIGRATIONS)
    return lambda project: PgMemoryStore(shared, project.id)


def not_found(mid: str) -> NotFound:
    return NotFound(f"no memory with id {mid}", code="memory_not_found")


CREATES = TypeAdapter(list[MemoryIn])


# the fields a batch item of each op takes besides ``op``: its single request's body, the
# record's id, and ``if_match``, the If-Match header of PATCH, invalidate and DELETE (a
# ``supersedes`` is then refused with where to link instead: not one of the names listed)
ITEM_FIELDS = {"create": frozenset(MemoryIn.model_fields),
               "patch": frozenset({*MemoryPatch.model_fields, "id", "if_match"}),
               "invalidate": frozenset({*InvalidateIn.model_fields, "id", "if_match"}),
               "delete": frozenset({"id", "if_match"})}


def _fields(item: BatchItem) -> dict[str, Any]:
    """A batch item's fields besides ``op``, its id included."""
    return {**item.model_extra, **({"id": item.id} if item.id else {})}


def _not_taken(item: BatchItem, loc: tuple) -> list[dict[str, Any]]:
    """Each field of ``item`` its op does not take, refused by name. A single request's unknown
    field is ignored (spec P6), and the client refuses it against the route's contract; an
    item's fields are free-form to both, so a misspelt or misplaced one (a patch's ``title``
    or ``tag``, mem0's ``user_id``) would be dropped while the item reads ok."""
    takes = ITEM_FIELDS[item.op]
    given = item.model_extra.keys() | ({"if_match"} if item.if_match is not None else set())
    return [records.invalid((*loc, name), f"a {item.op} item does not take {name}: it takes "
                            f"{', '.join(sorted(takes - {'supersedes'}))}", "extra_forbidden")
            for name in sorted(given - takes)]


def _validated(model: type[BaseModel], item: BatchItem, loc: tuple) -> Any:
    """A batch item's fields as ``model``, or their errors under ``loc``: strictly, as the
    kernel validates a single request's body (no ``"0.5"`` → 0.5, ``"yes"`` → true, Unix
    time → date)."""
    try:
        return model.model_validate(_fields(item), strict=True)
    except ValidationError as ex:
        return records.located(ex, loc)


def holds(if_match: str | None, rec: dict[str, Any]) -> bool:
    """Whether ``if_match`` (an ``If-Match`` header, or a batch item's, if any) holds for
    ``rec``: its ``updated_at`` (the ETag its reads and writes answer, quoted or not), or
    ``*``. A weak tag (``W/"…"``) never holds: If-Match compares strongly (RFC 9110)."""
    tag = if_match.strip().strip('"') if if_match is not None else "*"
    return tag == "*" or tag == rec["updated_at"]


def matched(w, mid: str, if_match: str | None) -> dict[str, Any]:
    """The record ``mid`` as the write transaction ``w`` reads it: 404 when it is gone, 412
    unless ``if_match`` holds for it (:func:`holds`)."""
    rec = w.get(mid)
    if rec is None:
        raise not_found(mid)
    if not holds(if_match, rec):
        raise PreconditionFailed("the memory changed since that updated_at",
                                 details={"updated_at": rec["updated_at"]})
    return rec


def _refused_line(parsed: ExportLine, line: str, seen: dict[str, int],
                  events: dict[str, str]) -> list[dict[str, Any]]:
    """What an export line holds that no export writes and the API refuses: an id given twice
    or naming a route, an event id given twice (``events``: those of the lines before, by
    id; the store would keep the first alone), a link that does not start at its record or
    ends there, a contradiction not between its record (the newer) and another."""
    mid, errors = parsed.memory.id, []
    if mid in seen:
        errors.append(records.invalid((line, "memory", "id"), f"line {seen[mid]} has this id too",
                                      "duplicate_id"))
    for i, ev in enumerate(parsed.history):
        if ev.id in events:
            errors.append(records.invalid((line, "history", i, "id"), f"{events[ev.id]} has "
                                          "this id too", "duplicate_event_id"))
        events.setdefault(ev.id, f"event {i} of {line}")
    if mid in records.RESERVED_IDS:
        errors.append(records.invalid((line, "memory", "id"), f"{mid} names a route; choose "
                                      "another id", "reserved_id"))
    for i, link in enumerate(parsed.links):
        if link.source != mid:
            errors.append(records.invalid((line, "links", i, "source"), f"a line's links start "
                                          f"at its memory ({mid})", "link_source"))
        elif link.target == mid:
            errors.append(records.invalid((line, "links", i, "target"), "a memory cannot link "
                                          "to itself", "self_reference"))
    for i, found in enumerate(parsed.contradictions):
        if found.b != mid or found.a == mid:
            errors.append(records.invalid((line, "contradictions", i), f"a line's "
                                          f"contradictions are its memory's ({mid}) with an "
                                          "older one", "contradiction_pair"))
    return errors


def _taken_contradictions(store, numbers: list[int], lines: list[tuple]) -> list[dict[str, Any]]:
    """A contradiction id of the import that another pair holds, here or on an earlier line:
    a taken id would be dropped without a word (a pair is stored once)."""
    errors, pairs = [], {}
    for n, (*_, contradictions) in zip(numbers, lines, strict=True):
        for i, c in enumerate(contradictions):
            known = pairs.get(c["id"]) or store.contradiction(c["id"])
            if known is not None and (known["a"], known["b"]) != (c["a"], c["b"]):
                errors.append(records.invalid((f"line {n}", "contradictions", i, "id"),
                                              f"contradiction {c['id']} is between "
                                              f"{known['a']} and {known['b']}",
                                              "contradiction_taken"))
            pairs.setdefault(c["id"], c)
    return errors


def _creates(items: list[BatchItem]) -> dict[int, MemoryIn | list[dict[str, Any]]]:
    """Each create item's body by its index, or its errors: the items in one pydantic-core
    call (a call per item cost ~30% more), each alone when one is bad, so its errors name it."""
    at = [i for i, item in enumerate(items) if item.op == "create"]
    try:
        bodies = CREATES.validate_python([_fields(items[i]) for i in at], strict=True)
    except ValidationError:
        return {i: _validated(MemoryIn, items[i], ("items", i)) for i in at}
    return dict(zip(at, bodies, strict=True))


class Memories:
    def __init__(self, kernel, settings: MemorySettings):
        self.kernel = kernel
        self.settings = settings
        self.searcher = Searcher(settings, kernel)
        self.backfill = Backfiller(self.searcher, lambda: kernel.embedder, settings)
        self.searcher.on_held = self.backfill.held
        self.recalls = Recalls()
        # the database the servers share ([storage] backend = "postgres"), or None: files
        self.shared = kernel.shared_database("memory", None)
        self._stores = ProjectStores(store_opener(kernel, self.shared, self.path))
        self.links = Links(self)
        self.contradictions = Contradictions(self)
        self.sweeps = Sweeps(self)
        self.consolidation = Consolidation(self)

    @staticmethod
    def path(project):
        return project.state_dir / "memory.db"

    def kept(self, project) -> bool:
        """Whether ``project`` has memories stored (the shared database keeps every project's)."""
        return self.shared is not None or self.path(project).exists()

    def store(self, project) -> MemoryStore:
        return self._stores.get(project)

    def forget(self, project) -> None:
        """Let go of the project's store and of all this process keeps for it, by the store's
        path (the kernel's ``forget_project``): its files close once no request or job still
        holds them. A store never opened here left nothing to let go of."""
        store = self._stores.forget(project)
        if store is None:
            return
        key = str(store.db.path)
        self.recalls.forget(key)
        self.backfill.forget(key)
        self.searcher.forget(key)

    def close(self) -> None:
        self.backfill.stop()
        self.sweeps.stop()
        self.recalls.stop()

    def emit(self, kind: str, project, actor, request_id, **data) -> None:
        self.kernel.emit(f"memory.{kind}", project=project, actor=actor, data=data,
                         request_id=request_id)

    def written(self, store) -> None:
        """A record changed: embed it soon."""
        self.backfill.notify(store)

    def get_record(self, store, mid: str) -> dict[str, Any]:
        rec = store.get(mid)
        if rec is None:
            raise not_found(mid)
        return rec

    def actor_for(self, actor, rec: dict[str, Any]) -> str:
        """The actor a history event on ``rec`` names (records.history_actor)."""
        return records.history_actor(rec, actor)

    def policy(self, store) -> dict[str, Any]:
        """The project's decay policy, as a dict (defaults until one is put)."""
        return policy_of(store.config("decay"))

    def views(self, store, recs: list[dict[str, Any]], policy: dict[str, Any] | None = None
              ) -> list[dict[str, Any]]:
        """Records as answered: effective status and strength now."""
        on, now = today(), parse_time(now_iso())
        strength = strengths({r["id"]: r for r in recs}, policy or self.policy(store), now)
        return [records.view(r, on, strength[r["id"]]) for r in recs]

    def view(self, store, rec: dict[str, Any]) -> dict[str, Any]:
        return self.views(store, [rec])[0]

    def filters(self, store, model) -> dict[str, Any]:
        """The list/search filters of ``model``: a named collection's, overridden by those
        given; status ACTIVE when neither says."""
        given = {name: getattr(model, name) for name in FILTER_FIELDS}
        out = dict.fromkeys(FILTER_FIELDS)
        if model.collection:
            saved = store.collection(model.collection)
            if saved is None:
                raise NotFound(f"no collection named {model.collection}",
                               code="collection_not_found")
            out.update(saved["filters"])
        out.update({k: v for k, v in given.items() if v not in (None, [])})
        out["status"] = out["status"] or "ACTIVE"
        return out

    def change_status(self, w, rec: dict[str, Any], status: str, *, kind: str, actor: str,
                      at: str, note: str | None = None, only_from: tuple[str, ...] | None = None,
                      current: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Inside a write: move the record ``rec`` names to ``status`` with its event; the new
        record, or None when it is gone or its status (as stored now) is not in ``only_from``.

        The record is read again in this transaction (``current``: the caller read it in this
        same transaction already), so a change made since ``rec`` was read — a patch, a pin,
        another status — is kept, and the event's old status is the row's."""
        cur = current if current is not None else w.get(rec["id"])
        if cur is None or (only_from is not None and cur["status"] not in only_from):
            return None
        new = {**cur, "status": status, "updated_at": times.after(cur["updated_at"], at)}
        w.update(new, records.content_sha(new), kind=kind, actor=actor,
                 changes={"status": [cur["status"], status]}, note=note)
        return new

    def check_ids(self, store, ids: list[str], own: str | None, field: str, loc=()) -> list[dict]:
        """Errors for ``ids`` (a body list field) that name no record, or the record itself."""
        found = store.exists(ids)
        return [records.invalid((*loc, field, i), "a record cannot name itself" if mid == own
                                else f"no memory with id {mid}",
                                "self_reference" if mid == own else "memory_not_found")
                for i, mid in enumerate(ids) if mid == own or mid not in found]

    # -- records ---------------------------------------------------------------------------

    def create(self, project, body: MemoryIn, actor, request_id: str | None,
               duplicates: str) -> dict[str, Any]:
        store = self.store(project)
        errors: list[dict] = []
        rec = records.build(vars(body), root=project.path, now=now_iso(),
                            head=gitinfo.head(project.path), errors=errors)
        errors += self.check_ids(store, body.supersedes, rec["id"], "supersedes")
        if body.supersedes and not in_force(rec):  # as a link from it would be (links.py)
            errors.append(records.invalid(
                ("supersedes",), f"a record created {rec['status']}, not in force (ACTIVE or "
                "STALE), cannot supersede another: create it ACTIVE, or leave supersedes out",
                "not_in_force"))
        if errors:
            raise records.fail(errors)
        who = self.actor_for(actor, rec)
        try:
            with store.writing() as w:
                w.create([(rec, records.content_sha(rec), who)])
                replaced = self.links.supersede(w, rec, body.supersedes, actor, rec["created_at"])
        except IdTaken:
            raise Conflict(f"a memory with id {rec['id']} already exists") from None
        # committed: ``rec`` is the row as stored (records.build gives every column its stored
        # value), so nothing is read back
        self.written(store)
        self.emit("created", project, actor, request_id, id=rec["id"])
        for old in replaced:
            self.emit("superseded", project, actor, request_id, id=old, by=rec["id"])
        near = self.duplicates(store, rec, duplicates)
        found = self.contradictions.on_store(project, store, rec, actor, request_id,
                                             [r for r, _ in near] if duplicates == "keyword"
                                             else None)
        # a contradiction resolved at once (auto_resolve) may have superseded the record
        out = self.view(store, (store.get(rec["id"]) or rec) if found else rec)
        out["possible_duplicates"] = [{"id": r["id"], "title": r["title"], "status": r["status"],
                                       "score": round(s, 6)} for r, s in near]
        out["contradictions"] = {"count": len(found), "items": found}
        return out

    def duplicates(self, store, rec: dict[str, Any], mode: str
                   ) -> list[tuple[dict[str, Any], float]]:
        """Up to 3 ACTIVE records like ``rec`` (sharing a file when it has files), scored."""
        if mode == "none":
            return []
        filters = {"status": "ACTIVE", "file": rec["files_affected"]}
        if mode == "hybrid":  # the record itself left out, so the floor judges the others
            hits, _ = self.searcher.search(store, rec["title"], "hybrid",
                                           {**filters, "exclude": rec["id"]}, today(), 3)
            return hits
        # the rare words match by their stems, the score counts words as written: a record
        # matched by "using" for "uses" alone scores 0 — a hint of nothing, kept out
        hits = self.searcher.similar_titles(store, rec["title"], filters, today(), 10,
                                            exclude=rec["id"])
        return sorted((h for h in hits if h[1] > 0), key=lambda h: -h[1])[:3]

    def get(self, project, mid: str) -> dict[str, Any]:
        store = self.store(project)
        return self.view(store, self.get_record(store, mid))

    def recalled(self, store, ids: list[str], policy: dict[str, Any]) -> None:
        """A search returned these records — a recall: refresh their strength, soon and off
        the request's path (while decay is on). Reads by id are not recalls: they inspect."""
        if ids and policy["enabled"]:
            self.recalls.add(store, ids, now_iso())

    def list(self, project, query) -> tuple[list[dict[str, Any]], str | None]:
        store = self.store(project)
        before = decode_cursor(query.cursor, text_pair)
        rows = store.list(self.filters(store, query), today(), query.limit + 1,
                          tuple(before) if before else None)
        more = len(rows) > query.limit
        rows = rows[: query.limit]
        cursor = encode_cursor([rows[-1]["created_at"], rows[-1]["id"]]) if more else None
        return self.views(store, rows), cursor

    def change(self, project, mid: str, make, *, kind: str, actor, request_id,
               note: str | None = None, if_match: str | None = None, then=None
               ) -> tuple[dict[str, Any], dict[str, list]]:
        """Read, change (``make(rec)`` → ``(new, changes)``; no changes, nothing written) and
        write one record, with its event: ``(its view, changes)``. One serial write
        transaction holds all three, so changes racing on a record each read what the one
        before wrote: none is lost, none is refused. 404 when it is gone; 412 when
        ``if_match`` (an ``If-Match`` header: an ``updated_at``, or ``*``) does not hold.
        ``then(w, new)``: more writes of the same transaction (a patch's links), true when
        they changed a record."""
        store = self.store(project)
        with store.writing() as w:
            rec = matched(w, mid, if_match)
            new, changes = make(rec)
            if changes:
                w.update(new, records.content_sha(new), kind=kind,
                         actor=self.actor_for(actor, new), changes=changes, note=note)
            more = then is not None and then(w, new)
        if changes or more:
            self.written(store)
        if changes:
            self.emit(kind, project, actor, request_id, id=mid, changes=sorted(changes))
        return self.view(store, new), changes

    def patch(self, project, mid: str, body: MemoryPatch, actor, request_id,
              if_match: str | None) -> dict[str, Any]:
        store = self.store(project)
        fields = body.model_dump(exclude_unset=True)
        replaces = fields.pop("supersedes", [])
        if errors := self.check_ids(store, replaces, mid, "supersedes"):
            raise records.fail(errors)

        def patched(rec):
            errors: list[dict] = []
            made = records.patched(rec, fields, root=project.path, now=now_iso(),
                                   errors=errors)
            if errors:
                raise records.fail(errors)
            return made

        linked: list[str] = []

        def supersede(w, rec):  # in the amend's transaction: a cycle refuses both
            linked.extend(self.links.supersede(w, rec, replaces, actor, now_iso()))
            return linked

        out, changes = self.change(project, mid, patched, kind="amended", actor=actor,
                                   request_id=request_id, if_match=if_match,
                                   then=supersede if replaces else None)
        for oid in linked:
            self.emit("linked", project, actor, request_id, source=mid, target=oid,
                      type="supersedes")
        if {"rationale", "files_affected", "tags", "kind"} & set(changes):
            self.contradictions.on_store(project, store, out, actor, request_id)
        return out

    def set_status(self, project, mid: str, status: str, *, kind: str, actor, request_id,
                   note: str | None = None, commit_sha: str | None = None,
                   if_match: str | None = None) -> dict[str, Any]:
        """invalidate / restore: a status change with its event; 409 when it changes nothing."""
        def moved(rec):
            on = today()
            if records.effective_status(rec, on) == status:
                raise Conflict(f"memory {mid} is already {status}", code="invalid_transition")
            new = {**rec, "status": status, "updated_at": times.after(rec["updated_at"])}
            if kind == "restored":
                new["commit_sha"] = (gitinfo.head(project.path) if commit_sha is None
                                     else commit_sha)
                if rec["review_by"] and rec["review_by"] < on:
                    new["review_by"] = None  # else the record would read STALE straight away
            return new, {f: [rec[f], new[f]] for f in ("status", "commit_sha", "review_by")
                         if new[f] != rec[f]}

        return self.change(project, mid, moved, kind=kind, actor=actor, request_id=request_id,
                           note=note, if_match=if_match)[0]

    def feedback(self, project, mid: str, signal: str, note: str | None, actor,
                 request_id) -> dict[str, Any]:
        """Spec 000 G9: helpful +feedback_up, unhelpful −feedback_down, within
        [feedback_floor, 1]."""
        s = self.settings
        step = s.feedback_up if signal == "helpful" else -s.feedback_down

        def stepped(rec):
            confidence = round(min(1.0, max(s.feedback_floor, rec["confidence"] + step)), 6)
            new = {**rec, "confidence": confidence, "updated_at": times.after(rec["updated_at"])}
            return new, {"confidence": [rec["confidence"], confidence]}

        return self.change(project, mid, stepped, kind="feedback", actor=actor,
                           request_id=request_id,
                           note=signal + (f": {note}" if note else ""))[0]

    def delete(self, project, mid: str, actor, request_id, if_match: str | None = None) -> None:
        store = self.store(project)
        with store.writing() as w:
            rec = matched(w, mid, if_match)
            w.delete(mid, now_iso(), self.actor_for(actor, rec), rec["title"])
        self.written(store)
        self.emit("deleted", project, actor, request_id, id=mid)

    def history(self, project, mid: str, limit: int, cursor: str | None
                ) -> tuple[list[dict[str, Any]], str | None]:
        after = decode_cursor(cursor, row_number)
        store = self.store(project)
        rows = store.history(mid, limit + 1, after)
        # an id with neither a record nor events never existed, whatever page is asked for
        # (a deleted record's history still answers)
        if not rows and store.get(mid) is None and (after is None
                                                    or not store.history(mid, 1, None)):
            raise not_found(mid)
        more = len(rows) > limit
        rows = rows[:limit]
        return [ev for _, ev in rows], (encode_cursor(rows[-1][0]) if more else None)

    def timeline(self, project, mid: str) -> dict[str, Any]:
        """The record's history merged with the commits that touched its files, oldest first."""
        store = self.store(project)
        events = [ev for _, ev in store.history(mid, 100_000, None)]
        rec = store.get(mid)
        if not events and rec is None:
            raise not_found(mid)
        items = [{"at": e["at"], "source": "history", "kind": e["kind"], "actor": e["actor"],
                  "note": e["note"], "changes": e["changes"]} for e in events]
        for c in gitinfo.commits(project.path, rec["files_affected"] if rec else [],
                                 TIMELINE_COMMITS):
            items.append({"at": times.utc(c["at"]), "source": "git", "kind": "commit", "actor": c["author"],
                          "note": c["subject"], "commit": {k: c[k] for k in
                                                           ("sha", "author", "subject", "files")}})
        items.sort(key=lambda e: parse_time(e["at"]))
        return {"memory_id": mid, "items": items}

    # -- tags, stats, collections ----------------------------------------------------------

    def tag_counts(self, project, status: str) -> list[dict[str, Any]]:
        return [{"tag": t, "count": n} for t, n in self.store(project).tag_counts(today(), status)]

    def retag(self, project, mid: str, add: list[str], remove: list[str], actor,
              request_id) -> dict[str, Any]:
        def retagged(rec):
            tags = [t for t in dict.fromkeys([*rec["tags"], *add]) if t not in remove]
            if len(tags) > 50:
                raise records.fail([records.invalid(("tags",), "a record holds at most 50 tags",
                                                    "too_long")])
            if tags == rec["tags"]:
                return rec, {}
            return ({**rec, "tags": tags, "updated_at": times.after(rec["updated_at"])},
                    {"tags": [rec["tags"], tags]})

        return self.change(project, mid, retagged, kind="amended", actor=actor,
                           request_id=request_id)[0]

    def stats(self, project) -> dict[str, Any]:
        try:
            model_id = self.kernel.embedder.model_id
        except APIError:
            model_id = None
        return {"project_id": project.id, **self.store(project).stats(today(), model_id)}

    def collection(self, project, name: str) -> dict[str, Any]:
        found = self.store(project).collection(name)
        if found is None:
            raise NotFound(f"no collection named {name}", code="collection_not_found")
        return found

    def put_collection(self, project, name: str, filters: dict[str, Any],
                       description: str | None, actor, request_id) -> tuple[dict[str, Any], bool]:
        store = self.store(project)
        with store.writing() as w:
            created = w.put_collection(name, filters, description, now_iso())
        self.emit("collection_saved", project, actor, request_id, name=name)
        return store.collection(name), created

    def delete_collection(self, project, name: str, actor, request_id) -> None:
        with self.store(project).writing() as w:
            if not w.delete_collection(name):
                raise NotFound(f"no collection named {name}", code="collection_not_found")
        self.emit("collection_deleted", project, actor, request_id, name=name)

    # -- search ------------------------------------------------------------------------------

    def search(self, project, body: SearchIn) -> dict[str, Any]:
        store = self.store(project)
        on, policy = today(), self.policy(store)
        filters = self.filters(store, body)
        hits, notice = self.searcher.search(store, body.query, body.mode, filters, on,
                                            body.limit, policy)
        if not hits:
            notice = nothing_found(store, filters, on, notice)
        self.recalled(store, [rec["id"] for rec, _ in hits], policy)
        found = [(rec, score, None) for rec, score in hits]
        if body.expand:  # after the hits, which keep their mode's order (keyword's is bm25's)
            found += self.links.expand(store, hits, filters, on, EXPAND_FACTOR, body.limit)
        views = self.views(store, [rec for rec, _, _ in found], policy)
        results = [{**v, "score": round(score, 6), "linked_from": via}
                   for v, (_, score, via) in zip(views, found, strict=True)]
        if body.view == "compact":
            results = [{k: r[k] for k in ("id", "title", "status", "kind", "score",
                                          "files_affected", "linked_from")} for r in results]
        return {"project_id": project.id, "query": body.query, "mode": body.mode,
                "results": results, "notice": notice}

    # -- batch, export, import ---------------------------------------------------------------

    def batch(self, project, body: BatchIn, actor, request_id) -> list[dict[str, Any]]:
        """Every item validated against the records as the items before it leave them; all or
        nothing unless ``atomic`` is false, then the items that validate are applied."""
        if any(item.op == "delete" for item in body.items) and not self.kernel.allowed(
                actor, "memories.delete", project):
            raise Forbidden(f"{actor.id} may not memories.delete",
                            details={"permission": "memories.delete"})
        store = self.store(project)
        head = gitinfo.head(project.path)
        creates = _creates(body.items)
        results, ops, bad = [], [], 0
        # the records are read, changed and written in one serial write transaction, as a
        # single change is: read before it, a patch racing the batch would be written over
        with store.writing() as w:
            now = now_iso()
            working = w.get_many(sorted({item.id for item in body.items if item.id}))
            for i, item in enumerate(body.items):
                errors: list[dict] = []
                op = self._batch_op(item, ("items", i), creates.pop(i, None), working,
                                    project.path, now, head, errors)
                if errors:
                    bad += 1
                    results.append({"op": item.op, "id": item.id, "status": "error",
                                    "errors": [{**e, "loc": list(e["loc"])} for e in errors]})
                    continue
                if op is not None:
                    ops.append((*op[:4], self.actor_for(actor, op[1])))
                results.append({"op": item.op, "id": item.id or op[1]["id"], "status": "ok",
                                "errors": []})
            if bad and body.atomic:
                raise records.fail([e for r in results for e in r["errors"]],
                                   f"{bad} batch item(s) did not validate; nothing was written")
            w.apply(ops, now)
        self.written(store)
        counts = dict.fromkeys(("create", "patch", "invalidate", "delete"), 0)
        for r in results:
            counts[r["op"]] += r["status"] == "ok"
        self.emit("batch", project, actor, request_id, **counts, failed=bad)
        return results

    @staticmethod
    def _batch_op(item, loc, created, working, root, now, head, errors) -> tuple | None:
        """One item as a store op ``(op, record, content_sha, changes)`` (None: nothing to
        write), updating ``working`` only when it has no problem; its problems go to
        ``errors``. ``created`` is a create item's body, or its validation errors
        (:func:`_creates`)."""
        errors.extend(_not_taken(item, loc))
        if item.op == "create":
            if isinstance(created, list):
                errors.extend(created)
                return None
            if created.supersedes:
                errors.append(records.invalid((*loc, "supersedes"), "not in a batch: create the "
                                              "record, then link it", "unsupported"))
            rec = records.build(vars(created), root=root, now=now, head=head, loc=loc,
                                errors=errors)
            if rec["id"] in working:
                errors.append(records.invalid((*loc, "id"), "a memory with this id exists",
                                              "memory_exists"))
            if errors:
                return None
            working[rec["id"]] = rec
            return "create", rec, records.content_sha(rec), {}
        if not item.id:
            errors.append(records.invalid((*loc, "id"), "required for patch, invalidate and "
                                          "delete", "missing"))
            return None
        if item.id not in working:
            errors.append(records.invalid((*loc, "id"), "no memory with this id",
                                          "memory_not_found"))
            return None
        current = working[item.id]
        if not holds(item.if_match, current):  # as the items before it leave the record
            errors.append(records.invalid((*loc, "if_match"), "the memory changed since that "
                                          f"updated_at: it is now {current['updated_at']}",
                                          "precondition_failed"))
        if item.op == "delete":
            return None if errors else ("delete", working.pop(item.id), None, {})
        parsed = _validated(MemoryPatch if item.op == "patch" else InvalidateIn, item, loc)
        if isinstance(parsed, list):
            errors.extend(parsed)
            return None
        if item.op == "invalidate":
            if current["status"] == "INVALIDATED":
                errors.append(records.invalid((*loc, "id"), "already INVALIDATED",
                                              "invalid_transition"))
            if errors:
                return None
            rec = {**current, "status": "INVALIDATED",
                   "updated_at": times.after(current["updated_at"], now)}
            working[item.id] = rec
            return ("invalidate", rec, records.content_sha(rec),
                    {"status": [current["status"], "INVALIDATED"], "reason": parsed.reason})
        patch = parsed.model_dump(exclude_unset=True)
        if patch.pop("supersedes", None):
            errors.append(records.invalid((*loc, "supersedes"), "not in a batch: use "
                                          "…/{id}/links", "unsupported"))
            return None
        rec, changes = records.patched(current, patch, root=root, now=now, loc=loc,
                                       errors=errors)
        if errors:
            return None
        working[item.id] = rec
        return ("patch", rec, records.content_sha(rec), changes) if changes else None

    def export(self, project, fmt: str, request_id: str | None) -> Iterator[bytes]:
        return exports.stream(self.store(project).export(), fmt, request_id)

    def import_(self, project, raw: bytes, overwrite: bool, actor, request_id) -> dict[str, int]:
        lines, numbers, errors, seen, events = [], [], [], {}, {}
        store = self.store(project)
        # a file saved by an editor that marks UTF-8 starts with a BOM (RFC 8259 §8.1)
        for n, line in enumerate(raw.removeprefix(codecs.BOM_UTF8).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                parsed = ExportLine.model_validate_json(line)
            except ValidationError as ex:
                errors.extend(records.located(ex, (f"line {n}",)))
                continue
            errors += _refused_line(parsed, f"line {n}", seen, events)
            seen.setdefault(parsed.memory.id, n)
            rec = parsed.memory.model_dump(mode="json")
            rec["files_affected"] = records.normalise_files(
                project.path, rec["files_affected"], (f"line {n}", "memory", "files_affected"),
                errors)
            rec["importance"] = importance_of(rec["kind"], rec["importance"])
            lines.append((rec, records.content_sha(rec), [e.model_dump() for e in parsed.history],
                          [lk.model_dump() for lk in parsed.links],
                          [c.model_dump() for c in parsed.contradictions]))
            numbers.append(n)
        owners = store.event_owners([ev["id"] for _, _, history, *_ in lines for ev in history])
        for n, (rec, _, history, *_) in zip(numbers, lines, strict=True):
            errors += [records.invalid((f"line {n}", "history", i, "id"),
                                       f"an event of memory {owners[ev['id']]} has this id",
                                       "event_taken")
                       for i, ev in enumerate(history)
                       if owners.get(ev["id"], rec["id"]) != rec["id"]]
        errors += _taken_contradictions(store, numbers, lines)
        if errors:
            raise records.fail(errors, "the import did not validate; nothing was written")
        created, overwritten, skipped = store.import_lines(
            lines, overwrite, lambda rec: self.actor_for(actor, rec),
            signed=actor.kind != "loopback")
        self.written(store)
        out = {"created": created, "overwritten": overwritten, "skipped": skipped}
        self.emit("imported", project, actor, request_id, **out)
        return out

    # -- maintenance and context -------------------------------------------------------------

    def maintain(self, project, actor, ctx=None) -> dict[str, int]:
        """Persist STALE for overdue review_by, and for decisions whose files changed in git
        since their commit."""
        store, on = self.store(project), today()
        active = store.active_to_check(on)
        stale: list[tuple[dict, str]] = []
        by_sha: dict[str, list[dict]] = {}
        for rec in active:
            if rec.pop("overdue"):
                stale.append((rec, f"review_by {rec['review_by']} has passed"))
            elif rec["commit_sha"] and rec["files_affected"]:
                by_sha.setdefault(rec["commit_sha"], []).append(rec)
        for sha, group in by_sha.items():
            if ctx is not None:
                ctx.check()
            changed = gitinfo.changed_since(project.path, sha)
            for rec in group if changed else ():
                hit = [f for f in rec["files_affected"] if f in changed]
                if hit:
                    stale.append((rec, f"files changed since {sha[:12]}: {', '.join(hit)}"))
        review = sum(1 for _, note in stale if note.startswith("review_by"))
        for rec, note in stale:
            new = {**rec, "status": "STALE", "updated_at": times.after(rec["updated_at"])}
            if store.update(new, records.content_sha(new), kind="stale",
                            actor=self.actor_for(actor, rec),
                            changes={"status": ["ACTIVE", "STALE"]}, note=note,
                            expect_updated_at=rec["updated_at"]):
                self.emit("stale", project, actor, None, id=rec["id"], note=note)
        if stale:
            self.written(store)
        return {"checked": len(active), "stale_review_by": review,
                "stale_files_changed": len(stale) - review}

    def on_files(self, project, paths: list[str]) -> list[dict[str, Any]]:
        """The ACTIVE decisions on these files, one item per (file, decision), with every
        file the decision names."""
        wanted = {nfc(p): p for p in paths}  # stored in NFC, answered as asked
        return [{"path": wanted[path], "kind": "decision", "id": rec["id"], "title": rec["title"],
                 "status": "ACTIVE", "files": rec["files_affected"]}
                for rec in self.store(project).files_context(sorted(wanted), today())
                for path in rec["files_affected"] if path in wanted]

    def context(self, project, hits: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        """The ACTIVE decisions on the files a code query hit, best hit first, within budget."""
        score: dict[str, float] = {}
        for hit in hits or ():
            path = hit.get("source_file")
            if not path:
                continue
            found = records.normalise_files(project.path, [str(path)], (), [])
            if found:
                score[found[0]] = max(score.get(found[0], float("-inf")), float(hit.get("score") or 0))
        decisions = self.store(project).files_context(sorted(score), today())
        if not decisions or budget <= 0:
            return []

        def rank(rec):
            best = max(score.get(f, float("-inf")) for f in rec["files_affected"])
            return (-best, -rec["confidence"], rec["updated_at"])

        lines: list[str] = []
        for rec in sorted(decisions, key=rank):
            entry = (f"- {rec['title']} [{rec['decision_type']}, {rec['id']}; files: "
                     f"{', '.join(rec['files_affected'])}]\n  {rec['rationale']}")
            if estimate_tokens("\n".join([*lines, entry])) > budget:
                continue
            lines.append(entry)
        if not lines:
            return []
        text = "\n".join(lines)
        return [{"title": "Decisions on these files", "text": text, "tokens": estimate_tokens(text)}]

