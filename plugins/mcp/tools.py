"""The MCP tool table: each tool names the /v1 route it runs through, and takes its input
schema from that route's pydantic models (read from the kernel's route table, so a model
change reaches MCP without a line here) and its output schema from the route's response.

Arguments are split the way the HTTP client would send them: path parameters (``project``
for ``{project_id}``, ``memory_id``), the route's query model's fields into the query
string, everything else into the JSON body. A name the tool does not take — one its route
has but the tool leaves out (``omit``) included — is refused by name (``calls.run``), where
the route itself would ignore it: a model that made one up learns so."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from plugins.mcp import render

PATH_PARAM = re.compile(r"{(\w+)}")
PROJECT = "/v1/projects/{project_id}"
MEMORY = PROJECT + "/memories/{memory_id}"
CONTRADICTIONS = PROJECT + "/contradictions"
JOB = "/v1/jobs/{job_id}"
# why a tool leaves out a field of its route (``Spec.omit``): said when a model sends it anyway
OMITTED = {"wait": "always follows the job to its end", "stream": "answers whole, never streamed"}


@dataclass(frozen=True)
class Spec:
    """One tool: its name, the route it runs through, and what a model reads about it."""

    name: str
    title: str
    method: str
    uri: str
    render: Callable[[Any, str], str]  # (data, the caller's offer of a tool: render.py)
    description: str
    read_only: bool = True
    idempotent: bool = True                   # the same call again changes nothing more
    destructive: bool = False                 # changes or retires records; False: only adds
    omit: frozenset[str] = frozenset()        # route fields the tool does not offer (OMITTED)
    send: dict[str, Any] = field(default_factory=dict)  # body fields the tool always sends
    job: bool = False                         # the route answers a job: follow it to the end
    loopback_only: bool = False               # listed only outside server mode


SPECS = (
    Spec("remember", "Remember a decision", "post", PROJECT + "/memories", render.created,
         read_only=False, idempotent=False, description=(
             "Record a decision about this codebase — what was decided and why — so later "
             "sessions find it. Call it when you make or learn a non-obvious choice: an "
             "architecture or dependency decision, a bug's root cause, a convention. Give a short "
             "title and the rationale; add files_affected and tags when you know them. Returns "
             "the new memory's id and up to 3 possible duplicates: if one is the same decision, "
             "update that one instead and leave this one invalidated.")),
    Spec("recall", "Recall decisions", "post", PROJECT + "/memories/search", render.recalled,
         description=(
             "Search the decisions recorded for the project before you change code or make a "
             "choice. mode: hybrid (default) mixes keywords and meaning, keyword matches exact "
             "names, semantic matches paraphrases. Filters: status (ACTIVE by default; ALL for "
             "every record), file, tag, kind, type, author, created_after/created_before, "
             "min_confidence. Returns the best matches with id, title, rationale and score.")),
    Spec("get_memory", "Read a decision", "get", MEMORY, render.memory, description=(
        "Read one decision in full by its id (from recall or remember): rationale, files, "
        "evidence, rejected alternatives, status and dates.")),
    Spec("update_memory", "Amend a decision", "patch", MEMORY, render.changed, read_only=False,
         idempotent=False, destructive=True, description=(
             "Amend a decision when you learn more: rationale, confidence, tags, files_affected, "
             "review_by; evidence_append and rejected_append add items. Fields left out stay as "
             "they are; the memory's history keeps every change.")),
    Spec("invalidate_memory", "Invalidate a decision", "post", MEMORY + "/invalidate",
         render.changed, read_only=False, destructive=True, description=(
             "Mark a decision as no longer true, with the reason (the code changed, the decision "
             "was reversed). It stays readable and in its history, but recall's default (ACTIVE) "
             "results leave it out.")),
    Spec("memory_history", "A decision's history", "get", MEMORY + "/history", render.history,
         description="The change history of one decision, oldest first: who changed what, when."),
    Spec("link_memories", "Link two decisions", "post", MEMORY + "/links", render.linked,
         read_only=False, idempotent=False, destructive=True, description=(
             "Link a memory (memory_id, the source) to another (target). supersedes: the "
             "source replaces the target, which becomes SUPERSEDED and leaves recall — use it "
             "when a new decision replaces an old one. merged_into: the source is a duplicate "
             "folded into the target (the record that stays), and the source becomes MERGED "
             "and leaves recall (what consolidate_memories writes). depends_on, relates_to "
             "and contradicts change no status. Both memories' histories record the link.")),
    Spec("memory_graph", "A decision's connections", "get", MEMORY + "/graph", render.graph,
         description=(
             "The memories linked to one memory, up to depth links away (1–4), with the links: "
             "what it supersedes, depends on or contradicts.")),
    Spec("list_contradictions", "Contradicting decisions", "get", CONTRADICTIONS,
         render.contradictions, description=(
             "Pairs of memories that cannot both hold (one replaces or forbids what the other "
             "uses, the same setting with two values, opposite stances), found when memories "
             "are written; open ones by default. Settle each with resolve_contradiction.")),
    Spec("resolve_contradiction", "Settle a contradiction", "post",
         CONTRADICTIONS + "/{contradiction_id}/resolve", render.resolved, read_only=False,
         idempotent=False, destructive=True, description=(
             "Settle a contradiction: keep_newest or keep_oldest or keep_important (the other "
             "is superseded), keep_both (both stand), or manual with a rationale (a new memory "
             "replaces both).")),
    Spec("consolidate_memories", "Merge near-duplicate decisions", "post",
         PROJECT + "/memories/consolidate", render.consolidated, read_only=False,
         idempotent=False, destructive=True, omit=frozenset({"wait"}), job=True, description=(
             "Merge clusters of near-duplicate memories of one kind into one memory that keeps "
             "every distinct sentence and the files and tags of all; dry_run lists the clusters "
             "without merging. Never merges pinned memories or memories that contradict.")),
    Spec("decay_memories", "Run a decay sweep", "post", PROJECT + "/memories/decay",
         render.decayed, read_only=False, idempotent=False, destructive=True,
         omit=frozenset({"wait"}), job=True, description=(
             "Archive the memories whose strength (importance, halved every half-life of their "
             "kind since last recalled) fell below the project's threshold; dry_run lists them. "
             "Archived memories leave recall and can be restored.")),
    Spec("memory_stats", "Memory statistics", "get", PROJECT + "/memories/stats",
         render.memory_stats, description=(
             "The project's memories in numbers: by kind, status, author, agent and tag, and "
             "how many are embedded for semantic recall.")),
    Spec("search_code", "Search code", "post", PROJECT + "/search", render.code_hits, description=(
        "Find code in the project's index by name or by meaning: functions, classes, methods, "
        "documentation sections. Returns file, line, symbol and score per hit — use it to locate "
        "code; use query_code when you need the code itself.")),
    Spec("query_code", "Context for a question", "post", PROJECT + "/query", render.context,
         description=(
             "Get what you need to answer a question about the code: a token-budgeted context of "
             "the project overview (L0–L1), the relevant symbols with their code (L2–L3) and the "
             "decisions recorded on those files. Set context_budget (tokens) to what your window "
             "can spare. Returns the context text.")),
    Spec("impact", "What a change touches", "post", PROJECT + "/impact", render.impact,
         description=(
             "Before you change code, ask what depends on it: give the files (or node ids from "
             "search_code) you will change. Returns the functions, methods and modules that "
             "call, import or subclass them, nearest first with the chain of edges, and per "
             "file the decisions recorded on it. depth (default 2) is how many edges to follow.")),
    Spec("next_files", "Files to look at next", "post", PROJECT + "/next", render.next_files,
         description=(
             "Given the files you have open (and optionally your task), the files you should "
             "look at next, each with why: code that calls or imports it (structural), files "
             "used together with it before (learned), files sharing a recorded decision, or "
             "a match for the task.")),
    Spec("record_activity", "Record file activity", "post", PROJECT + "/activity",
         render.activity, read_only=False, idempotent=False, description=(
             "Tell NeuralMind which files you read, edited or tested (kind: read, edit, test) "
             "so next_files learns which files go together. Report them as you work; files "
             "of one session are linked with each other.")),
    Spec("ask", "Ask about the project", "post", PROJECT + "/ask", render.answer,
         omit=frozenset({"stream"}), send={"stream": False}, description=(
             "A short answer to a question about this project, grounded in its recorded "
             "decisions and its code, citing numbered sources (memory ids, file:line). Use it "
             "for why/where questions; read a cited source with get_memory or query_code for "
             "the details. sources: memories, code (default both).")),
    Spec("wakeup", "Project overview", "get", PROJECT + "/wakeup", render.context, description=(
        "The project overview to read at the start of a session: what the project is, its "
        "layout and main modules (L0 + L1, a few hundred tokens), with a warning when files "
        "changed after the last index build.")),
    Spec("build_index", "Build the code index", "post", PROJECT + "/build", render.job,
         read_only=False, omit=frozenset({"wait"}), send={"wait": False}, job=True, description=(
             "Build or refresh the project's code index: only changed files are parsed again "
             "(full=true parses every file). search_code, query_code and wakeup read this index. "
             "Reports progress while it runs and returns the finished job with its counts.")),
    Spec("project_stats", "Index statistics", "get", PROJECT + "/stats", render.stats,
         description=(
             "The project's index in numbers: files, symbols, edges and vectors per language, "
             "and when and at which commit it was built.")),
    Spec("list_projects", "List projects", "get", "/v1/projects", render.projects, description=(
        "List the projects (code repositories) you can reach, with their ids: pass an id as "
        "`project` to the other tools.")),
    Spec("register_project", "Register a project", "post", "/v1/projects", render.project,
         read_only=False, loopback_only=True, description=(
             "Register a directory on this machine as a project and get its id (registering "
             "twice is fine). Local daemon only: a team server serves the projects its operator "
             "configured.")),
)


def argument(param: str) -> str:
    """The argument a path parameter is given as: ``project`` for ``{project_id}``."""
    return "project" if param == "project_id" else param


@dataclass
class Tool:
    """A spec bound to the route it runs through."""

    spec: Spec
    permission: str | None
    path_params: tuple[str, ...]
    query_fields: frozenset[str]
    body_fields: frozenset[str]
    properties: dict[str, Any]
    required: tuple[str, ...]
    defs: dict[str, Any]
    output_schema: dict[str, Any] | None

    def input_schema(self, default_project: bool) -> dict[str, Any]:
        required = [r for r in self.required if not (r == "project" and default_project)]
        schema = {"type": "object", "properties": self.properties, "required": required}
        if self.defs:
            schema["$defs"] = self.defs
        return schema

    def path(self, arguments: dict[str, Any]) -> str:
        return PATH_PARAM.sub(lambda m: arguments[argument(m.group(1))], self.spec.uri)

    def split(self, arguments: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """(query, body) for the route; path parameters are the caller's business."""
        names = {argument(p) for p in self.path_params}
        query = {k: v for k, v in arguments.items() if k in self.query_fields}
        body = None
        if self.body_fields or self.spec.send:
            body = {k: v for k, v in arguments.items() if k not in names and k not in query}
            body.update(self.spec.send)
        return query, body


PATH_SCHEMA = {
    "project": {"type": "string", "description": "The project id (from list_projects); "
                "defaults to the project this MCP connection was opened for"},
    "memory_id": {"type": "string", "description": "The memory's id (from recall or remember)"},
    "contradiction_id": {"type": "string",
                         "description": "The contradiction's id (from list_contradictions)"},
}


def bind(spec: Spec, routes: dict[tuple[str, str], Any]) -> Tool | None:
    """``spec`` on its route, or None when no enabled plugin serves that route."""
    op = routes.get((spec.uri, spec.method))
    if op is None:
        return None
    params = tuple(PATH_PARAM.findall(spec.uri))
    properties = {argument(p): dict(PATH_SCHEMA.get(argument(p), {"type": "string"}))
                  for p in params}
    required = [argument(p) for p in params]
    defs: dict[str, Any] = {}
    fields: dict[str, frozenset[str]] = {}
    for part, model in (("body", op.body), ("query", op.query)):
        if model is None:
            fields[part] = frozenset()
            continue
        schema = model.model_json_schema(mode="validation")
        defs.update(schema.pop("$defs", {}))
        offered = {k: v for k, v in schema.get("properties", {}).items() if k not in spec.omit}
        fields[part] = frozenset(offered)
        properties.update(offered)
        required += [r for r in schema.get("required", ()) if r in offered]
    response = routes[(JOB, "get")].response if spec.job else op.response
    return Tool(spec, op.permission, params, fields["query"], fields["body"], properties,
                tuple(required), defs, _output_schema(response))


def _output_schema(response: Any) -> dict[str, Any] | None:
    if response is None:
        return None
    schema = TypeAdapter(response).json_schema(mode="serialization")
    return schema if schema.get("type") == "object" else None


class Toolbox:
    """The tools this kernel can run: every spec whose route is mounted. ``roles``: the roles
    each permission is granted by default (``Permission.roles``)."""

    def __init__(self, routes: Iterable[tuple[str, str, Any, str]], server_mode: bool,
                 roles: dict[str, tuple[str, ...]]):
        table = {(uri, method): op for uri, method, op, _ in routes}
        bound = (bind(spec, table) for spec in SPECS)
        self.tools = {tool.spec.name: tool for tool in bound if tool is not None}
        self.server_mode = server_mode
        self.roles = roles

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def listed(self, allowed: Callable[[str], bool]) -> list[Tool]:
        """The tools a caller is shown: those its role may call (each call is still checked
        by its route), without the loopback-only ones on a team server."""
        return [t for t in self.tools.values()
                if allowed(t.permission) and not (t.spec.loopback_only and self.server_mode)]

    def offer(self, name: str, allowed: Callable[[str], bool]) -> str:
        """How a text suggests tool ``name`` (``errors.said``): to call it, or — to a caller
        whose role may not, which ``listed`` does not show it — who may."""
        tool = self.tools.get(name)
        if tool is None or tool.permission is None or allowed(tool.permission):
            return f"call {name}"
        return (f"{name} needs {tool.permission}, which this token's role lacks: someone whose "
                f"role holds it ({' or '.join(self.roles.get(tool.permission, ()))} by default) "
                "can call it")
