"""One tool call: its arguments placed on the route, the route called through the kernel's
app, a job followed to its end. A refusal becomes an MCP tool error whose text leads with
the envelope's code, so the model reads ``forbidden``, ``project_not_found`` or
``validation_error`` with the field, exactly as an HTTP client would."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from neuralmind import Answer, Caller, ValidationFailed
from plugins.mcp.errors import call, said
from plugins.mcp.tools import OMITTED, Tool, argument

POLL_S = 0.25
RUNNING = ("queued", "running")


@dataclass(frozen=True)
class Progress:
    """A job's progress, for ``notifications/progress``."""

    progress: float
    total: float | None
    message: str


def run(tool: Tool, caller: Caller, arguments: dict[str, Any] | None,
        default_project: str | None, offer: Callable[[str], str] = call
        ) -> Iterator[Progress | types.CallToolResult]:
    """Progress while a job runs, then the result (always last). ``offer`` says how a refusal
    suggests another tool to this caller (``errors.said``)."""
    args = dict(arguments or {})
    if default_project and "project_id" in tool.path_params and "project" not in args:
        args["project"] = default_project  # absent only: a wrong value is refused, not replaced
    problems = [_path_problem(argument(p), args) for p in tool.path_params]
    problems = [p for p in problems if p] + list(_query_problems(tool, args)) + [
        _not_taken(tool, name) for name in sorted(args.keys() - tool.properties.keys())]
    if problems:
        yield invalid(problems, caller.request_id)
        return
    query, body = tool.split(args)
    answer = caller(tool.spec.method, tool.path(args), query=query, body=body,
                    route=tool.spec.uri)
    if tool.spec.job:
        yield from _follow(tool, caller, answer, offer)
    elif answer.ok:
        yield result(tool, answer.data, offer)
    else:
        yield refused(answer.error, offer, _looked_in(tool, args, answer.error))


def _not_taken(tool: Tool, name: str) -> dict[str, Any]:
    """An argument the tool does not take, refused by name: one the route has but the tool
    leaves out (``omit``) with why, so a model that sent it learns what happens instead."""
    if name in tool.spec.omit:
        msg = f"{tool.spec.name} {OMITTED[name]}, so it takes no {name}"
    else:
        msg = f"is no argument of {tool.spec.name} (it takes {', '.join(sorted(tool.properties))})"
    return {"loc": [name], "msg": msg, "type": "extra_forbidden"}


def _looked_in(tool: Tool, args: dict[str, Any], error: dict[str, Any]) -> str:
    """Where a tool looked for an id it did not find: the project (implicit over stdio, and
    an id of another project is the likeliest mistake), and how to name another."""
    if error["status"] != 404 or error["code"] == "project_not_found" or \
            "project_id" not in tool.path_params:
        return ""
    return (f" in project {args['project']}: for another project's, pass its id as project "
            "(list_projects gives the ids)")


def _path_problem(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """A path argument must name one thing: a non-empty string without ``/``."""
    hint = " (list_projects gives the ids)" if name == "project" else ""
    what = "a project id" if name == "project" else "an id"
    value = args.get(name)
    if name not in args:
        return {"loc": [name], "msg": f"Field required{hint}", "type": "missing"}
    if not isinstance(value, str):
        return {"loc": [name], "msg": f"must be {what} string{hint}", "type": "string_type"}
    if not value:
        return {"loc": [name], "msg": f"must be {what}, not an empty string{hint}",
                "type": "string_too_short"}
    if "/" in value or value in (".", ".."):
        return {"loc": [name], "msg": f"must be an id, not a path{hint}", "type": "value_error"}
    return None


# JSON's types, as a tool's schema names them: what an argument sent in a query string must
# already be, since the string would be read as anything ("5" as 5, 1.5 as a bad string)
JSON_TYPES = {"integer": lambda v: type(v) is int, "number": lambda v: type(v) in (int, float),
              "boolean": lambda v: type(v) is bool, "string": lambda v: isinstance(v, str),
              "array": lambda v: isinstance(v, list), "null": lambda v: v is None}


def _query_problems(tool: Tool, args: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """An argument the route takes in its query string, of another JSON type than its
    schema's: said as the body's validation says it of a body argument."""
    for name in sorted(tool.query_fields & args.keys()):
        schema = tool.properties.get(name, {})
        kinds = [k for k in (s.get("type") for s in schema.get("anyOf", [schema])) if k]
        if kinds and not any(JSON_TYPES[k](args[name]) for k in kinds if k in JSON_TYPES):
            kind = next(k for k in kinds if k != "null")
            yield {"loc": [name], "msg": f"Input should be a valid {kind}", "type": f"{kind}_type"}


def invalid(problems: list[dict[str, Any]], request_id: str | None) -> types.CallToolResult:
    """The tool error a route's 422 would be, for arguments refused before any route runs."""
    ex = ValidationFailed(details={"errors": problems})
    return refused({"code": ex.code, "message": ex.message, "status": ex.status,
                    "request_id": request_id, "details": ex.details})


def _follow(tool: Tool, caller: Caller, answer: Answer,
            offer: Callable[[str], str]) -> Iterator[Progress | types.CallToolResult]:
    """Follow the job the route started (or the build already running) to its end."""
    if answer.ok:
        job = answer.data["job"]
    elif answer.error["code"] == "index_busy" and answer.error["details"].get("job"):
        job = answer.error["details"]["job"]
    else:
        yield refused(answer.error, offer)
        return
    last = None
    while True:
        step = _progress(job)
        if _reports(step, last, job["status"] not in RUNNING):
            last = step
            yield step
        if job["status"] not in RUNNING:
            break
        time.sleep(POLL_S)
        answer = caller("get", f"/v1/jobs/{job['id']}")
        if not answer.ok:
            yield refused(answer.error, offer)
            return
        job = answer.data
    if job["status"] == "done":
        yield result(tool, job, offer)
    else:
        error = job.get("error") or {}
        yield _error(f"{error.get('code', job['status'])}: {error.get('message', job['status'])}",
                     job)


def _progress(job: dict[str, Any]) -> Progress | None:
    """A build's work done of its work known: files parsed, then symbols embedded (the model
    runs on after the last file is read, and is most of a first build)."""
    p = job.get("progress") or {}
    files, parsed = p.get("files_total"), p.get("files_done", 0)
    if not files:
        return None
    to_embed, embedded = p.get("chunks_total", 0), p.get("chunks_embedded", 0)
    return Progress(parsed + embedded, files + to_embed, f"{parsed}/{files} files parsed, "
                    f"{embedded}/{to_embed} symbols embedded")


def _reports(step: Progress | None, last: Progress | None, finished: bool) -> bool:
    """Whether ``step`` is sent: MCP wants each notification's progress above the last, and
    the total reached only when the work is (the symbols to embed are known as files are
    parsed, so a running build can have done all the work known so far). A finished job's
    step is sent too: a short build reports."""
    if step is None or (last is not None and step.progress <= last.progress):
        return False
    return finished or step.progress < step.total


def result(tool: Tool, data: dict[str, Any], offer: Callable[[str], str]
           ) -> types.CallToolResult:
    """The route's answer as a tool result: its text (which words a tool it suggests by
    ``offer``) and the answer itself as structured content."""
    return types.CallToolResult(content=[types.TextContent(text=tool.spec.render(data, offer))],
                                structured_content=data)


def refused(error: dict[str, Any], offer: Callable[[str], str] = call,
            where: str = "") -> types.CallToolResult:
    """The envelope as a tool error: ``code (status): message — field: why``; ``where`` follows
    the message (``_looked_in``)."""
    text = f"{error['code']} ({error['status']}): {said(error, offer)}{where}"
    fields = [f"{_field(e['loc'])}: {e['msg']}" for e in error.get("details", {}).get("errors", [])]
    if fields:
        text += " — " + "; ".join(fields)
    return _error(text, {"error": error})


def _field(loc: list[Any]) -> str:
    """``["body", "tags", 0]`` → ``tags.0``, ``["path", "project_id"]`` → ``project``: the
    argument as the model sent it, not where the route reads it."""
    if len(loc) > 1 and loc[0] in ("body", "query", "path"):
        loc = [argument(loc[1]) if loc[0] == "path" else loc[1], *loc[2:]]
    return ".".join(map(str, loc)) or "arguments"


def _error(text: str, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content=structured, is_error=True)
