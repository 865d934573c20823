"""Falcon resources for ``/v1/projects/{project_id}/memories``: declarations and hand-offs to
the :class:`~plugins.memory.service.Memories` service. No SQL here."""

from __future__ import annotations

from neuralmind import (JobAccepted, Page, PageQuery, UnsupportedMediaType, answer_job, operation,
                        read_body)
from plugins.memory.models import (BatchIn, BatchOut, CreateQuery, FeedbackIn, HistoryEvent,
                                   ImportOut, ImportQuery, InvalidateIn, ListQuery,
                                   MaintenanceQuery, Memory, MemoryCreated, MemoryIn, MemoryPatch,
                                   RestoreIn, SearchIn, SearchOut)

TAGS = ["memories"]
JSONL = "application/x-ndjson"
JSONL_TYPES = frozenset({JSONL, "application/jsonl", "application/x-jsonlines"})
BASE = "/v1/projects/{project_id}/memories"


def _ctx(req):
    return req.context.project, req.context.actor, req.context.request_id


class MemoryResources:
    def __init__(self, memories):
        self.m = memories

    # -- collection -------------------------------------------------------------------------

    @operation(permission="memories.write", body=MemoryIn, query=CreateQuery,
               response=MemoryCreated, status=201, tags=TAGS,
               summary="Record a decision (201 + Location, with possible duplicates)",
               errors={409: "`conflict`: a memory with the client-chosen `id` exists"})
    def on_post(self, req, resp, project_id):
        project, actor, rid = _ctx(req)
        out = self.m.create(project, req.context.body, actor, rid, req.context.query.duplicates)
        resp.location = f"/v1/projects/{project.id}/memories/{out['id']}"
        return out

    @operation(permission="memories.read", query=ListQuery, response=Page[Memory], tags=TAGS,
               summary="List decisions, newest first, with filters")
    def on_get(self, req, resp, project_id):
        items, cursor = self.m.list(req.context.project, req.context.query)
        return {"items": items, "next_cursor": cursor}

    @operation(permission="memories.read", body=SearchIn, response=SearchOut, tags=TAGS,
               summary="Keyword, semantic or hybrid search",
               errors={503: "`semantic_unavailable`: semantic mode without a model"})
    def on_post_search(self, req, resp, project_id):
        return self.m.search(req.context.project, req.context.body)

    @operation(permission="memories.write", body=BatchIn, response=BatchOut, tags=TAGS,
               summary="Create, patch and delete up to 1,000 records in one transaction")
    def on_post_batch(self, req, resp, project_id):
        project, actor, rid = _ctx(req)
        return {"items": self.m.batch(project, req.context.body, actor, rid)}

    @operation(permission="memories.read", media_type=JSONL, tags=TAGS,
               summary="Every record with its history, one JSON object per line")
    def on_get_export(self, req, resp, project_id):
        resp.content_type = JSONL
        resp.stream = self.m.export(req.context.project)

    @operation(permission="memories.write", query=ImportQuery, response=ImportOut, tags=TAGS,
               summary="Restore an export (JSONL body); all or nothing",
               errors={415: f"`unsupported_media_type`: the body is not {JSONL}"})
    def on_post_import(self, req, resp, project_id):
        if (req.content_type or "").split(";")[0].strip().lower() not in JSONL_TYPES:
            raise UnsupportedMediaType(f"an import is sent as {JSONL} (what export returns)")
        project, actor, rid = _ctx(req)
        raw = read_body(req, self.m.kernel.settings.kernel.max_body_bytes)
        return self.m.import_(project, raw, req.context.query.mode == "overwrite", actor, rid)

    @operation(permission="memories.write", query=MaintenanceQuery, response=JobAccepted,
               status=202, responses={200: JobAccepted}, tags=TAGS,
               summary="Persist STALE for passed review_by dates and changed files (a job)")
    def on_post_maintenance(self, req, resp, project_id):
        project, actor, _ = _ctx(req)
        wait = req.context.query.wait
        job = self.m.kernel.jobs.submit("memory.maintenance",
                                        lambda ctx: self.m.maintain(project, actor, ctx),
                                        project_id=project.id, actor=actor.id, wait=wait)
        return answer_job(resp, job, wait)

    # -- one record -------------------------------------------------------------------------

    @operation(permission="memories.read", response=Memory, tags=TAGS, summary="One decision")
    def on_get_item(self, req, resp, project_id, memory_id):
        out = self.m.get(req.context.project, memory_id)
        resp.etag = out["updated_at"]
        return out

    @operation(permission="memories.write", body=MemoryPatch, response=Memory, tags=TAGS,
               summary="Amend a decision (optional If-Match on updated_at → 412)",
               errors={412: "`precondition_failed`: `If-Match` is not the current updated_at"})
    def on_patch_item(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return self.m.patch(project, memory_id, req.context.body, actor, rid,
                            req.get_header("If-Match"))

    @operation(permission="memories.delete", status=204, tags=TAGS,
               summary="Hard-delete a decision (its history is kept)")
    def on_delete_item(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        self.m.delete(project, memory_id, actor, rid)

    @operation(permission="memories.read", query=PageQuery, response=Page[HistoryEvent],
               tags=TAGS, summary="A decision's history, oldest first (kept after delete)")
    def on_get_history(self, req, resp, project_id, memory_id):
        q = req.context.query
        items, cursor = self.m.history(req.context.project, memory_id, q.limit, q.cursor)
        return {"items": items, "next_cursor": cursor}

    @operation(permission="memories.write", body=InvalidateIn, response=Memory, tags=TAGS,
               summary="Mark a decision INVALIDATED, with the reason",
               errors={409: "`invalid_transition`: it is INVALIDATED already"})
    def on_post_invalidate(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return self.m.set_status(project, memory_id, "INVALIDATED", kind="invalidated",
                                 actor=actor, request_id=rid, note=req.context.body.reason)

    @operation(permission="memories.write", body=RestoreIn, response=Memory, tags=TAGS,
               summary="Make a STALE or INVALIDATED decision ACTIVE again",
               errors={409: "`invalid_transition`: it is ACTIVE already"})
    def on_post_restore(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        return self.m.set_status(project, memory_id, "ACTIVE", kind="restored", actor=actor,
                                 request_id=rid, commit_sha=req.context.body.commit_sha)

    @operation(permission="memories.write", body=FeedbackIn, response=Memory, tags=TAGS,
               summary="Helpful or not: moves confidence within [0.05, 1.0]")
    def on_post_feedback(self, req, resp, project_id, memory_id):
        project, actor, rid = _ctx(req)
        body = req.context.body
        return self.m.feedback(project, memory_id, body.helpful, body.note, actor, rid)


def routes(memories) -> list[tuple]:
    r = MemoryResources(memories)
    item = BASE + "/{memory_id}"
    return [(BASE, r), (BASE + "/search", r, "search"), (BASE + "/batch", r, "batch"),
            (BASE + "/export", r, "export"), (BASE + "/import", r, "import"),
            (BASE + "/maintenance", r, "maintenance"), (item, r, "item"),
            (item + "/history", r, "history"), (item + "/invalidate", r, "invalidate"),
            (item + "/restore", r, "restore"), (item + "/feedback", r, "feedback")]
