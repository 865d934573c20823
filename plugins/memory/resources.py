"""Falcon resources for ``/v1/projects/{project_id}/memories`` (records, links, decay,
consolidation), ``…/contradictions`` and ``…/collections``: declarations and hand-offs to
the :class:`~plugins.memory.service.Memories` service. No SQL here."""

from __future__ import annotations

import re

from neuralmind import (JobAccepted, Page, PageQuery, ValidationFailed, answer_job,
                        operation)
from plugins.memory.exports import MEDIA_TYPES
from plugins.memory.models import (NAME_PATTERN, BatchIn, BatchOut, CheckOut, Collection, CollectionIn,
                                   CollectionsOut, ConsolidateIn, Contradiction,
                                   ContradictionConfig, ContradictionConfigPatch,
                                   ContradictionQuery, CreateQuery, DecayPolicy, DecayPolicyPatch,
                                   DryRunIn, ExportQuery, FeedbackIn, GraphOut, GraphQuery,
                                   HistoryEvent, ImportOut, ImportQuery, InvalidateIn, JobQuery,
                                   Link, LinkIn, LinksOut, ListQuery, Memory, MemoryCreated,
                                   MemoryIn, MemoryPatch, Resolved, ResolveIn, RestoreIn,
                                   SearchIn, SearchOut, MemoryStats, StatusQuery, TagsIn, TagsOut,
                                   TagsQuery, Timeline, UnlinkQuery)

TAGS = ["memories"]
JSONL = MEDIA_TYPES["ndjson"]
JSONL_TYPES = (JSONL, "application/jsonl", "application/x-jsonlines")
PROJECT = "/v1/projects/{project_id}"
BASE = PROJECT + "/memories"


def _ctx(req):
    return req.context.project, req.context.actor, req.context.request_id


def _tagged(resp, record: dict) -> dict:
    """``record``, its ``updated_at`` as the answer's ETag: what ``If-Match`` takes next."""
    resp.etag = record["updated_at"]
    return record


class MemoryResources:
    def __init__(self, memories):
        self.m = memories

    def _job(self, req, resp, kind: str, work):
        """Run ``work(ctx)`` as a kernel job: 202 + Location, or 200 once done with ``wait``."""
        project, actor, _ = _ctx(req)
        wait = req.context.query.wait
        job = self.m.kernel.jobs.submit(kind, work, project_id=project.id, actor=actor.id,
                                        wait=wait)
        return answer_job(resp, job, wait)

    # -- collection -------------------------------------------------------------------------

    @operation(permission="memories.write", body=MemoryIn, query=CreateQuery,
               response=MemoryCreated, status=201, tags=TAGS,
               summary="Record a memory (201 + Location, with possible duplicates and "
                       "contradictions)",
               errors={409: "`conflict`: a memory with the client-chosen `id` exists"})
    def on_post(self, req, resp, project_id):
        project, actor, rid = _ctx(req)
        out = self.m.create(project, req.context.body, actor, rid, req.context.query.duplicates)
        resp.location = f"/v1/projects/{project.id}/memories/{out['id']}"
        return _tagged(resp, out)

    @operation(permission="memories.read", query=ListQuery, response=Page[Memory], tags=TAGS,
               summary="List memories, newest first, with filters or a collection")
    def on_get(self, req, resp, project_id):
        items, cursor = self.m.list(req.context.project, req.context.query)
        return {"items": items, "next_cursor": cursor}

    @operation(permission="memories.read", body=SearchIn, response=SearchOut, tags=TAGS,
               summary="Keyword, semantic or hybrid search (expand: add linked records)",
               errors={503: "`semantic_unavailable`: semantic mode without a model"})
    def on_post_search(self, req, resp, project_id):
        return self.m.search(req.context.project, req.context.body)

    @operation(permission="memories.write", body=BatchIn, response=BatchOut, tags=TAGS,
               summary="Create, patch, invalidate and delete up to 1,000 records; one result "
                       "per item")
    def on_post_batch(self, req, resp, project_id):
        project, actor, rid = _ctx(req)
        return {"items": self.m.batch(project, req.context.body, actor, rid)}

    @operation(permission="memories.read", query=ExportQuery, tags=TAGS,
               media_type=",".join(MEDIA_TYPES.values()),
               summary="Every record with its history and links: ndjson, json or md")
    def on_get_export(self, req, resp, project_id):
        fmt = req.context.query.format
        resp.content_type = MEDIA_TYPES[fmt]
        resp.stream = self.m.export(req.context.project, fmt, req.context.request_id)

    @operation(permission="memories.write", query=ImportQuery, response=ImportOut, tags=TAGS,
               summary="Restore an export (JSONL body, application/x-ndjson as export "
                       "returns it); all or nothing", raw_types=JSONL_TYPES,
               errors={415: f"`unsupported_media_type`: the body is not {JSONL}"})
    def on_post_import(self, req, resp, project_id):
        # a body of raw_types: the kernel reads it, and places a bad line's errors under body
        project, actor, rid = _ctx(req)
        return self.m.import_(project, req.context.raw, req.context.query.mode == "overwrite",
                              actor, rid)

    @operation(permission="memories.write", query=JobQuery, response=JobAccepted,
               status=202, responses={200: JobAccepted}, tags=TAGS,
               summary="Persist STALE for passed review_by dates and changed files (a job)")
    def on_post_maintenance(self, req, resp, project_id):
        project, actor, _ = _ctx(req)
        return self._job(req, resp, "memory.maintenance",
                         lambda ctx: self.m.maintain(project, actor, ctx))

    @operation(permission="memories.read", response=MemoryStats, tags=TAGS,
               summary="Counts by kind, status, author, agent and tag; embedded vectors")
    def on_get_stats(self, req, resp, project_id):
        return self.m.stats(req.context.project)

    @operation(permission="memories.read", query=StatusQuery, response=TagsOut, tags=TAGS,
               summary="Tags in use with their record counts, most used first")
    def on_get_tag_counts(self, req, resp, project_id):
        return {"items": self.m.tag_counts(req.context.project, req.context.query.status)}

    @operation(permission="memories.read", response=DecayPolicy, tags=TAGS,
               summary="The project's decay policy")
    def on_get_decay_policy(self, req, resp, project_id):
        return self.m.policy(self.m.store(req.context.project))

    @operation(permission="memories.write", body=DecayPolicyPatch, response=DecayPolicy,
               tags=TAGS, summary="Change the decay policy (fields given change)")
    def on_put_decay_policy(self, req, resp, project_id):
        project, actor, rid = _ctx(req)
        return self.m.sweeps.put_policy(
            project, req.context.body.model_dump(exclude_none=True), actor, rid)

    @operation(permission="memories.write", body=DryRunIn, query=JobQuery, response=JobAccepted,
               status=202, responses={200: JobAccepted}, tags=TAGS,
               summary="Run a decay sweep (a job): archive records below the threshold")
    def on_post_decay(self, req, resp, project_id):
        project, actor, _ = _ctx(req)
        dry = req.context.body.dry_run
        return self._job(req, resp, "memory.decay",
                         lambda ctx: self.m.sweeps.sweep(project, dry, actor, ctx))

    @operation(permission="memories.write", body=ConsolidateIn, query=JobQuery,
               response=JobAccepted, status=202, responses={200: JobAccepted}, tags=TAGS,
               summary="Merge clusters of near-duplicate ACTIVE records (a job)")
    def on_post_consolidate(self, req, resp, project_id):
        project, actor, _ = _ctx(req)
        b = req.context.body
        return self._job(req, resp, "memory.consolidate", lambda ctx: self.m.consolidation.run(
            project, b.dry_run, b.kinds, b.threshold, actor, ctx))

    # -- one record -------------------------------------------------------------------------

    @operation(permission="memories.read", response=Memory, tags=TAGS, summary="One memory")
    def on_get_item(self, req, resp, project_id, memory_id):
        return _tagged(resp, self.m.get(req.context.project, memory_id))

    @operation(permission="memories.write", body=MemoryPatch, response=Memory, tags=TAGS,
               summary="Amend a memory (optional If-Match on updated_at → 412)",
               errors={412: "`precondition_failed`: `If-Match` is not the current updated_at",
                       409: "`link_cycle`: a `supersedes` would close a cycle; "
                            "`invalid_transition`: this record is not in force (ACTIVE or "
                            "STALE), so it cannot supersede one that is"})
    def on_patch_item(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return _tagged(resp, self.m.patch(project, memory_id, req.context.body, actor, rid,
                                          req.get_header("If-Match")))

    @operation(permission="memories.delete", status=204, tags=TAGS,
               summary="Hard-delete a memory (its history is kept; optional If-Match → 412)",
               errors={412: "`precondition_failed`: `If-Match` is not the current updated_at"})
    def on_delete_item(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        self.m.delete(project, memory_id, actor, rid, req.get_header("If-Match"))

    @operation(permission="memories.read", query=PageQuery, response=Page[HistoryEvent],
               tags=TAGS, summary="A memory's history, oldest first (kept after delete)")
    def on_get_history(self, req, resp, project_id, memory_id):
        q = req.context.query
        items, cursor = self.m.history(req.context.project, memory_id, q.limit, q.cursor)
        return {"items": items, "next_cursor": cursor}

    @operation(permission="memories.read", response=Timeline, tags=TAGS,
               summary="A memory's history merged with the commits that touched its files")
    def on_get_timeline(self, req, resp, project_id, memory_id):
        return self.m.timeline(req.context.project, memory_id)

    @operation(permission="memories.write", body=InvalidateIn, response=Memory, tags=TAGS,
               summary="Mark a memory INVALIDATED, with the reason (optional If-Match → 412)",
               errors={409: "`invalid_transition`: it is INVALIDATED already",
                       412: "`precondition_failed`: `If-Match` is not the current updated_at"})
    def on_post_invalidate(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return _tagged(resp, self.m.set_status(
            project, memory_id, "INVALIDATED", kind="invalidated", actor=actor, request_id=rid,
            note=req.context.body.reason, if_match=req.get_header("If-Match")))

    @operation(permission="memories.write", body=RestoreIn, response=Memory, tags=TAGS,
               summary="Make a STALE, INVALIDATED, ARCHIVED, SUPERSEDED or MERGED memory ACTIVE",
               errors={409: "`invalid_transition`: it is ACTIVE already",
                       412: "`precondition_failed`: `If-Match` is not the current updated_at"})
    def on_post_restore(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return _tagged(resp, self.m.set_status(
            project, memory_id, "ACTIVE", kind="restored", actor=actor, request_id=rid,
            commit_sha=req.context.body.commit_sha, if_match=req.get_header("If-Match")))

    @operation(permission="memories.write", body=FeedbackIn, response=Memory, tags=TAGS,
               summary="helpful (+0.05) or unhelpful (−0.10): confidence within [0.10, 1.0]")
    def on_post_feedback(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        body = req.context.body
        return _tagged(resp, self.m.feedback(project, memory_id, body.signal, body.note, actor,
                                             rid))

    @operation(permission="memories.write", body=TagsIn, response=Memory, tags=TAGS,
               summary="Add tags to a memory")
    def on_post_tags(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return _tagged(resp, self.m.retag(project, memory_id, req.context.body.tags, [], actor,
                                          rid))

    @operation(permission="memories.write", query=TagsQuery, response=Memory, tags=TAGS,
               summary="Remove tags from a memory (?tag=… repeatable)")
    def on_delete_tags(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return _tagged(resp, self.m.retag(project, memory_id, [], req.context.query.tag, actor,
                                          rid))

    @operation(permission="memories.write", body=LinkIn, response=Link, status=201, tags=TAGS,
               summary="Link this memory to another (supersedes makes the target SUPERSEDED)",
               errors={409: "`link_exists`: that link exists; `link_cycle`: a `supersedes` "
                            "that would close a cycle; `invalid_transition`: a `supersedes` or "
                            "`merged_into` that would retire a record in favour of one not in "
                            "force (ACTIVE or STALE)"})
    def on_post_links(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        b = req.context.body
        return self.m.links.add(project, memory_id, b.target, b.type, b.note, actor, rid)

    @operation(permission="memories.read", response=LinksOut, tags=TAGS,
               summary="Links from and to this memory")
    def on_get_links(self, req, resp, project_id, memory_id):
        return {"items": self.m.links.list(req.context.project, memory_id)}

    @operation(permission="memories.write", query=UnlinkQuery, status=204, tags=TAGS,
               summary="Remove links from this memory to ?target (of ?type, else all)")
    def on_delete_links(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        q = req.context.query
        self.m.links.remove(project, memory_id, q.target, q.type, actor, rid)

    @operation(permission="memories.read", query=GraphQuery, response=GraphOut, tags=TAGS,
               summary="The records within ?depth links (1–4) and the links among them")
    def on_get_graph(self, req, resp, project_id, memory_id):
        return self.m.links.graph(req.context.project, memory_id, req.context.query.depth)


class ContradictionResources:
    def __init__(self, memories):
        self.m = memories

    @operation(permission="memories.read", query=ContradictionQuery,
               response=Page[Contradiction], tags=TAGS,
               summary="Contradictions between memories, newest first (open by default)")
    def on_get(self, req, resp, project_id):
        items, cursor = self.m.contradictions.list(req.context.project, req.context.query)
        return {"items": items, "next_cursor": cursor}

    @operation(permission="memories.read", response=Contradiction, tags=TAGS,
               summary="One contradiction")
    def on_get_item(self, req, resp, project_id, contradiction_id):
        return self.m.contradictions.get(req.context.project, contradiction_id)

    @operation(permission="memories.write", response=CheckOut, tags=TAGS,
               summary="Check one memory against its nearest ACTIVE neighbours now")
    def on_post_check(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return self.m.contradictions.check(project, memory_id, actor, rid)

    @operation(permission="memories.write", body=ResolveIn, response=Resolved, tags=TAGS,
               summary="Resolve: keep_newest, keep_oldest, keep_important, keep_both or manual",
               errors={409: "`invalid_transition`: it is resolved already, or the strategy "
                            "would keep a record no longer in force (ACTIVE or STALE)"})
    def on_post_resolve(self, req, resp, project_id, contradiction_id):
        project, actor, rid = _ctx(req)
        b = req.context.body
        return self.m.contradictions.resolve(project, contradiction_id, b.strategy, b.title,
                                             b.rationale, actor, rid)

    @operation(permission="memories.read", response=ContradictionConfig, tags=TAGS,
               summary="Contradiction checks: on store, threshold, auto-resolve strategy")
    def on_get_config(self, req, resp, project_id):
        return self.m.contradictions.config(self.m.store(req.context.project))

    @operation(permission="memories.write", body=ContradictionConfigPatch,
               response=ContradictionConfig, tags=TAGS,
               summary="Change the contradiction settings (fields given change)")
    def on_put_config(self, req, resp, project_id):
        project, actor, rid = _ctx(req)
        return self.m.contradictions.put_config(
            project, req.context.body.model_dump(exclude_unset=True), actor, rid)


class CollectionResources:
    def __init__(self, memories):
        self.m = memories

    @operation(permission="memories.read", response=CollectionsOut, tags=TAGS,
               summary="Saved filters, by name")
    def on_get(self, req, resp, project_id):
        return {"items": self.m.store(req.context.project).collections()}

    @operation(permission="memories.read", response=Collection, tags=TAGS,
               summary="One saved filter")
    def on_get_item(self, req, resp, project_id, name):
        return self.m.collection(req.context.project, name)

    @operation(permission="memories.write", body=CollectionIn, response=Collection,
               responses={201: Collection}, tags=TAGS,
               summary="Save a filter under a name (201 when new; list and search take "
                       "collection=name)")
    def on_put_item(self, req, resp, project_id, name):
        if not re.fullmatch(NAME_PATTERN, name):
            raise ValidationFailed(f"{name!r} is not a collection name", details={"errors": [{
                "loc": ["path", "name"], "type": "string_pattern_mismatch",
                "msg": "letters, digits, '_', '.', '-' (up to 64), starting with a letter or "
                       "digit"}]})
        project, actor, rid = _ctx(req)
        b = req.context.body
        out, created = self.m.put_collection(project, name,
                                             b.filters.model_dump(mode="json", exclude_none=True),
                                             b.description, actor, rid)
        resp.status = 201 if created else 200
        return out

    @operation(permission="memories.write", status=204, tags=TAGS, summary="Forget a filter")
    def on_delete_item(self, req, resp, project_id, name):
        project, actor, rid = _ctx(req)
        self.m.delete_collection(project, name, actor, rid)


def routes(memories) -> list[tuple]:
    r, c, s = (MemoryResources(memories), ContradictionResources(memories),
               CollectionResources(memories))
    item = BASE + "/{memory_id}"
    conflicts = PROJECT + "/contradictions"
    return [(BASE, r), (BASE + "/search", r, "search"), (BASE + "/batch", r, "batch"),
            (BASE + "/export", r, "export"), (BASE + "/import", r, "import"),
            (BASE + "/maintenance", r, "maintenance"), (BASE + "/stats", r, "stats"),
            (BASE + "/tags", r, "tag_counts"), (BASE + "/decay-policy", r, "decay_policy"),
            (BASE + "/decay", r, "decay"), (BASE + "/consolidate", r, "consolidate"),
            (item, r, "item"), (item + "/history", r, "history"),
            (item + "/timeline", r, "timeline"), (item + "/invalidate", r, "invalidate"),
            (item + "/restore", r, "restore"), (item + "/feedback", r, "feedback"),
            (item + "/tags", r, "tags"), (item + "/links", r, "links"),
            (item + "/graph", r, "graph"),
            (conflicts, c), (conflicts + "/config", c, "config"),
            (conflicts + "/check/{memory_id}", c, "check"),
            (conflicts + "/{contradiction_id}", c, "item"),
            (conflicts + "/{contradiction_id}/resolve", c, "resolve"),
            (PROJECT + "/collections", s), (PROJECT + "/collections/{name}", s, "item")]
