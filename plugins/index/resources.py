"""Falcon resources of the index routes: declarations and hand-offs to ``IndexService``."""

from __future__ import annotations

from neuralmind import JobAccepted, answer_job, operation
from plugins.index.models import (BuildIn, CodeSearchIn, CodeSearchOut, DocumentOut,
                                  DocumentQuery, QueryIn, QueryOut, RuleCreated, RuleIn, RulePatch,
                                  RulesOut, RuleTestIn, RuleTestOut, StatsOut, WakeupOut,
                                  WatchStatus)
from plugins.index.walker import explain

TAGS = ["index"]


class _Resource:
    def __init__(self, kernel, service, watchers=None):
        self.kernel, self.service, self.watchers = kernel, service, watchers


class BuildResource(_Resource):
    @operation(permission="index.build", body=BuildIn, response=JobAccepted, status=202,
               responses={200: JobAccepted}, tags=TAGS,
               summary="Build or refresh the code index (a job; 409 index_busy while one runs)",
               errors={409: "`index_busy`: a build of the project is running (`details.job`)"})
    def on_post(self, req, resp, project_id):
        body = req.context.body
        job = self.service.start_build(req.context.project, req.context.actor, full=body.full,
                                       wait=body.wait, request_id=req.context.request_id)
        return answer_job(resp, job, body.wait)


class SearchResource(_Resource):
    @operation(permission="index.read", body=CodeSearchIn, response=CodeSearchOut, tags=TAGS,
               summary="Search the project's symbols: keyword, semantic or hybrid",
               errors={409: "`index_not_built`: build the project first", 503: "`semantic_unavailable`: no model, or the index was embedded with another"})
    def on_post(self, req, resp, project_id):
        b = req.context.body
        results, notice = self.service.search(req.context.project, b.query, b.n, b.mode,
                                              b.file_type)
        return CodeSearchOut(project_id=project_id, query=b.query, mode=b.mode, results=results,
                         notice=notice)


class QueryResource(_Resource):
    @operation(permission="index.read", body=QueryIn, response=QueryOut, tags=TAGS,
               summary="Answer material for a question: L0–L3 context within a token budget",
               errors={409: "`index_not_built`: build the project first"})
    def on_post(self, req, resp, project_id):
        b = req.context.body
        return self.service.query(req.context.project, b.question, b.query_type,
                                  b.context_budget, b.trace)


class WakeupResource(_Resource):
    @operation(permission="index.read", response=WakeupOut, tags=TAGS,
               summary="L0 + L1 only: what an agent reads first, with a staleness warning",
               errors={409: "`index_not_built`: build the project first"})
    def on_get(self, req, resp, project_id):
        return self.service.wakeup(req.context.project)


class StatsResource(_Resource):
    @operation(permission="index.read", response=StatsOut, tags=TAGS,
               summary="Files, nodes and edges per language; when and at which HEAD it was built")
    def on_get(self, req, resp, project_id):
        return self.service.stats(req.context.project)


class RulesResource(_Resource):
    @operation(permission="index.read", response=RulesOut, tags=TAGS,
               summary="Protected system rules and the project's own ignore rules")
    def on_get(self, req, resp, project_id):
        return RulesOut(items=[r.public() for r in self.service.rules(req.context.project)])

    @operation(permission="index.build", body=RuleIn, response=RuleCreated, status=201, tags=TAGS,
               summary="Add an ignore rule; matching files leave the index at once")
    def on_post(self, req, resp, project_id):
        rule, removed = self.service.add_rule(req.context.project, req.context.body)
        resp.location = f"/v1/projects/{project_id}/ignore-rules/{rule.id}"
        self.kernel.emit("index.rule_added", project=req.context.project, actor=req.context.actor,
                         data={"rule": rule.public(), "files_removed": removed},
                         request_id=req.context.request_id)
        return RuleCreated(**rule.public(), files_removed=removed)

    @operation(permission="index.build", body=RulePatch, response=RuleCreated, tags=TAGS,
               summary="Change a rule's value, reason or enabled flag (system rules: 403)")
    def on_patch_item(self, req, resp, project_id, rule_id):
        rule, removed = self.service.update_rule(req.context.project, rule_id, req.context.body)
        self.kernel.emit("index.rule_updated", project=req.context.project,
                         actor=req.context.actor, data={"rule": rule.public()},
                         request_id=req.context.request_id)
        return RuleCreated(**rule.public(), files_removed=removed)

    @operation(permission="index.build", status=204, tags=TAGS,
               summary="Delete a rule (newly eligible files come back at the next build)")
    def on_delete_item(self, req, resp, project_id, rule_id):
        rule = self.service.delete_rule(req.context.project, rule_id)
        self.kernel.emit("index.rule_deleted", project=req.context.project,
                         actor=req.context.actor, data={"rule": rule.public()},
                         request_id=req.context.request_id)


class RuleTestResource(_Resource):
    @operation(permission="index.read", body=RuleTestIn, response=RuleTestOut, tags=TAGS,
               summary="Explain whether a path would be indexed, and which rule leaves it out")
    def on_post(self, req, resp, project_id):
        project = req.context.project
        rel = self.service.relative(project, req.context.body.path)
        matched = explain(str(project.path), self.service.ruleset(project), rel)
        return RuleTestOut(path=rel, ignored=matched is not None, matched_rule=matched)


class DocumentResource(_Resource):
    @operation(permission="index.read", query=DocumentQuery, response=DocumentOut, tags=TAGS,
               summary="One indexed file: its nodes and its text",
               errors={404: "`project_not_found`, `document_not_found`"})
    def on_get(self, req, resp, project_id):
        return self.service.document(req.context.project, req.context.query.path)


class WatchResource(_Resource):
    @operation(permission="index.build", response=WatchStatus, tags=TAGS,
               summary="Start watching the project: changed files re-index within seconds")
    def on_post_start(self, req, resp, project_id):
        return self.watchers.start(req.context.project, req.context.actor)

    @operation(permission="index.build", response=WatchStatus, tags=TAGS,
               summary="Stop the project's watcher (whichever worker runs it)")
    def on_post_stop(self, req, resp, project_id):
        return self.watchers.stop(req.context.project)

    @operation(permission="index.read", response=WatchStatus, tags=TAGS,
               summary="The watcher: root, queued changes, last event, recent errors")
    def on_get_status(self, req, resp, project_id):
        return self.watchers.status(req.context.project)


def routes(kernel, service, watchers) -> list[tuple]:
    base = "/v1/projects/{project_id}"
    rules, watch = RulesResource(kernel, service), WatchResource(kernel, service, watchers)
    return [
        (f"{base}/build", BuildResource(kernel, service)),
        (f"{base}/search", SearchResource(kernel, service)),
        (f"{base}/query", QueryResource(kernel, service)),
        (f"{base}/wakeup", WakeupResource(kernel, service)),
        (f"{base}/stats", StatsResource(kernel, service)),
        (f"{base}/ignore-rules", rules),
        (f"{base}/ignore-rules/test", RuleTestResource(kernel, service)),
        (f"{base}/ignore-rules/{{rule_id}}", rules, "item"),
        (f"{base}/documents", DocumentResource(kernel, service)),
        (f"{base}/watch/start", watch, "start"),
        (f"{base}/watch/stop", watch, "stop"),
        (f"{base}/watch/status", watch, "status"),
    ]
