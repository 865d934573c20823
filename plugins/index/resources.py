"""Falcon resources of the index routes: declarations and hand-offs to ``IndexService``."""

from __future__ import annotations

from neuralmind import InvalidFields, JobAccepted, answer_job, operation
from plugins.index import ingest, validate
from plugins.index.models import (ActivityIn, ActivityOut, BuildIn, CodeSearchIn, CodeSearchOut,
                                  DocumentIn, DocumentOut, DocumentQuery, ImpactIn, ImpactOut,
                                  IngestedDocument, IngestedList, IngestedOut, IngestQuery,
                                  LinkFeedbackIn, LinkFeedbackOut, NextIn, NextOut, QueryIn,
                                  QueryOut, RuleCreated, RuleIn, RulePatch, RulesOut, RuleTestIn,
                                  RuleTestOut, SavingsOut, SavingsQuery, StatsOut, StructuralOut,
                                  StructuralQuery, SynapseStatsOut, SynapticOut, SynapticQuery,
                                  ValidateIn, ValidateOut, WakeupOut, WatchStatus)
from plugins.index.walker import explain

NOT_BUILT = "`index_not_built`: build the project first"
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
               summary="Search the project's symbols: keyword, semantic or hybrid "
                       "(learns: the hit files' links strengthen)",
               errors={409: NOT_BUILT,
                       503: "`semantic_unavailable`: no model, or the index was embedded with "
                            "another"})
    def on_post(self, req, resp, project_id):
        b = req.context.body
        results, notice = self.service.search(req.context.project, b.query, b.n, b.mode,
                                              b.file_type)
        return CodeSearchOut(project_id=project_id, query=b.query, mode=b.mode, results=results,
                         notice=notice)


class QueryResource(_Resource):
    @operation(permission="index.read", body=QueryIn, response=QueryOut, tags=TAGS,
               summary="Answer material for a question: L0–L3 context within a token budget "
                       "(learns: the hit files' links strengthen)",
               errors={409: NOT_BUILT})
    def on_post(self, req, resp, project_id):
        b = req.context.body
        return self.service.query(req.context.project, b.question, b.query_type,
                                  b.context_budget, b.trace)


class WakeupResource(_Resource):
    @operation(permission="index.read", response=WakeupOut, tags=TAGS,
               summary="L0 + L1 only: what an agent reads first, with a staleness warning",
               errors={409: NOT_BUILT})
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
               summary="Add an ignore rule; matching files leave the index at once",
               errors={409: "`rule_exists`: a rule of that type and value exists "
                            "(`details.rule`)"})
    def on_post(self, req, resp, project_id):
        rule, removed = self.service.add_rule(req.context.project, req.context.body)
        resp.location = f"/v1/projects/{project_id}/ignore-rules/{rule.id}"
        self.kernel.emit("index.rule_added", project=req.context.project, actor=req.context.actor,
                         data={"rule": rule.public(), "files_removed": removed},
                         request_id=req.context.request_id)
        return RuleCreated(**rule.public(), files_removed=removed)

    @operation(permission="index.build", body=RulePatch, response=RuleCreated, tags=TAGS,
               summary="Change a rule's value, reason or enabled flag (system rules: 403)",
               errors={409: "`rule_exists`: another rule has that type and value "
                            "(`details.rule`)"})
    def on_patch_item(self, req, resp, project_id, rule_id):
        rule, removed, changed = self.service.update_rule(req.context.project, rule_id,
                                                          req.context.body)
        if changed:  # a PATCH that changed nothing writes nothing and says nothing
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

    @operation(permission="index.build", body=DocumentIn, query=IngestQuery,
               response=IngestedOut, status=201, raw_types=tuple(ingest.TYPES), tags=TAGS,
               summary="Ingest a document that is not in the repository (Markdown, text, "
                       "HTML, PDF): JSON {name, content}, or the file as the body with ?name=")
    def on_post(self, req, resp, project_id):
        ctx, body = req.context, req.context.body
        if body is not None:
            name, data = body.name, body.content.encode()
            media = ingest.media_type(body.content_type, body.name)
        else:
            name, data = ctx.query.name, ctx.raw
            media = (req.content_type or "").split(";")[0].strip().lower()
            if name is None:
                raise InvalidFields.one("name", "a file sent as the body needs ?name=", "missing")
        out = self.service.ingest(ctx.project, name, media, data, ctx.actor, ctx.request_id)
        resp.location = f"/v1/projects/{project_id}/documents/{out['id']}"
        return out

    @operation(permission="index.read", response=IngestedList, tags=TAGS,
               summary="The ingested documents, oldest first (without their text)")
    def on_get_ingested(self, req, resp, project_id):
        return IngestedList(items=self.service.ingested_documents(req.context.project))

    @operation(permission="index.read", response=IngestedDocument, tags=TAGS,
               summary="One ingested document: its sections and the text that was indexed")
    def on_get_item(self, req, resp, project_id, document_id):
        return self.service.ingested(req.context.project, document_id, text=True)

    @operation(permission="index.build", status=204, tags=TAGS,
               summary="Remove an ingested document from the index")
    def on_delete_item(self, req, resp, project_id, document_id):
        ctx = req.context
        self.service.delete_document(ctx.project, document_id, ctx.actor, ctx.request_id)


class ImpactResource(_Resource):
    @operation(permission="index.read", body=ImpactIn, response=ImpactOut, tags=TAGS,
               summary="What depends on changed files or nodes, nearest first, with the edges "
                       "that connect them and the decisions on each file",
               errors={409: NOT_BUILT})
    def on_post(self, req, resp, project_id):
        return self.service.impact(req.context.project, req.context.body)


class NeighborsResource(_Resource):
    @operation(permission="index.read", query=StructuralQuery, response=StructuralOut,
               tags=TAGS, summary="Callers, callees, importers, imports, subclasses and bases "
                                  "of a node or file (?node= or ?file=)",
               errors={409: NOT_BUILT})
    def on_get_structural(self, req, resp, project_id):
        return self.service.neighbours(req.context.project, req.context.query)

    @operation(permission="index.read", query=SynapticQuery, response=SynapticOut, tags=TAGS,
               summary="The files learned to go with a file, strongest first (decayed to now)")
    def on_get_synaptic(self, req, resp, project_id):
        return self.service.synaptic(req.context.project, req.context.query)


class ActivityResource(_Resource):
    @operation(permission="index.learn", body=ActivityIn, response=ActivityOut, tags=TAGS,
               summary="Files an agent or editor read, edited or tested: links them (learns)")
    def on_post(self, req, resp, project_id):
        return self.service.activity(req.context.project, req.context.body, req.context.actor)


class LinkFeedbackResource(_Resource):
    @operation(permission="index.learn", body=LinkFeedbackIn, response=LinkFeedbackOut,
               tags=TAGS, summary="A node or file was helpful or not: strengthens or weakens "
                                  "its links to the files it came with (learns)",
               errors={409: f"{NOT_BUILT} (a `node` names one of the index)"})
    def on_post(self, req, resp, project_id):
        return self.service.feedback(req.context.project, req.context.body)


class NextResource(_Resource):
    @operation(permission="index.read", body=NextIn, response=NextOut, tags=TAGS,
               summary="The files to look at next, each with why: structural, learned, "
                       "decision, task", errors={409: NOT_BUILT})
    def on_post(self, req, resp, project_id):
        return self.service.next_files(req.context.project, req.context.body)


class SynapseStatsResource(_Resource):
    @operation(permission="index.read", response=SynapseStatsOut, tags=TAGS,
               summary="Learned links in numbers: count, strongest pairs, activations, rates")
    def on_get(self, req, resp, project_id):
        return self.service.synapse_stats(req.context.project)


class SavingsResource(_Resource):
    @operation(permission="index.read", query=SavingsQuery, response=SavingsOut, tags=TAGS,
               summary="Tokens query and search served vs the whole files they came from, "
                       "per day and in total")
    def on_get(self, req, resp, project_id):
        return self.service.savings(req.context.project, req.context.query.days)


class ValidateResource(_Resource):
    @operation(permission="index.read", body=ValidateIn, response=ValidateOut, tags=TAGS,
               summary="What the index and learned state hold, what is missing or stale; "
                       "write=true (index.admin) repairs inside the state dir")
    def on_post(self, req, resp, project_id):
        ctx = req.context
        if ctx.body.write:
            self.kernel.authorize(ctx.actor, "index.admin", ctx.project)
        return validate.validate(self.service, ctx.project, ctx.body.write, ctx.actor,
                                 ctx.request_id)


class WatchResource(_Resource):
    """The watcher's status names the project's root, an absolute path: it is answered only to
    callers that ``GET /v1/projects/{id}`` shows the ``path`` to (``projects.paths``), null to
    the others."""

    def _show_root(self, req) -> bool:
        return self.kernel.allowed(req.context.actor, "projects.paths", req.context.project)

    @operation(permission="index.build", response=WatchStatus, tags=TAGS,
               summary="Start watching the project: changed files re-index within seconds")
    def on_post_start(self, req, resp, project_id):
        return self.watchers.start(req.context.project, req.context.actor, self._show_root(req))

    @operation(permission="index.build", response=WatchStatus, tags=TAGS,
               summary="Stop the project's watcher (whichever worker runs it)")
    def on_post_stop(self, req, resp, project_id):
        return self.watchers.stop(req.context.project, self._show_root(req))

    @operation(permission="index.read", response=WatchStatus, tags=TAGS,
               summary="The watcher: root, queued changes, last event, recent errors")
    def on_get_status(self, req, resp, project_id):
        return self.watchers.status(req.context.project, self._show_root(req))


def routes(kernel, service, watchers) -> list[tuple]:
    base = "/v1/projects/{project_id}"
    rules, watch = RulesResource(kernel, service), WatchResource(kernel, service, watchers)
    documents, neighbors = DocumentResource(kernel, service), NeighborsResource(kernel, service)
    return [
        (f"{base}/build", BuildResource(kernel, service)),
        (f"{base}/search", SearchResource(kernel, service)),
        (f"{base}/query", QueryResource(kernel, service)),
        (f"{base}/wakeup", WakeupResource(kernel, service)),
        (f"{base}/stats", StatsResource(kernel, service)),
        (f"{base}/ignore-rules", rules),
        (f"{base}/ignore-rules/test", RuleTestResource(kernel, service)),
        (f"{base}/ignore-rules/{{rule_id}}", rules, "item"),
        (f"{base}/documents", documents),
        (f"{base}/documents/ingested", documents, "ingested"),
        (f"{base}/documents/{{document_id}}", documents, "item"),
        (f"{base}/impact", ImpactResource(kernel, service)),
        (f"{base}/neighbors/structural", neighbors, "structural"),
        (f"{base}/neighbors/synaptic", neighbors, "synaptic"),
        (f"{base}/activity", ActivityResource(kernel, service)),
        (f"{base}/feedback", LinkFeedbackResource(kernel, service)),
        (f"{base}/next", NextResource(kernel, service)),
        (f"{base}/synapses/stats", SynapseStatsResource(kernel, service)),
        (f"{base}/savings", SavingsResource(kernel, service)),
        (f"{base}/validate", ValidateResource(kernel, service)),
        (f"{base}/watch/start", watch, "start"),
        (f"{base}/watch/stop", watch, "stop"),
        (f"{base}/watch/status", watch, "status"),
    ]
