"""MCP resources: each project's wakeup overview and each memory, readable by URI. Listing
and reading go through the same /v1 routes as the tools, so a caller sees only the projects
and memories its token reaches."""

from __future__ import annotations

import re
from collections.abc import Callable

import mcp_types as types

from neuralmind import APIError, Caller, decode_cursor, encode_cursor
from plugins.mcp import render
from plugins.mcp.errors import ProtocolError, call

WAKEUP = "neuralmind://projects/{project_id}/wakeup"
MEMORY = "neuralmind://projects/{project_id}/memories/{memory_id}"
URI = re.compile(r"^neuralmind://projects/(?P<project>[^/]+)/"
                 r"(?:(?P<wakeup>wakeup)|memories/(?P<memory>[^/]+))$")
PAGE = 100
MARKDOWN = "text/markdown"
WAKEUP_ROUTE = ("/v1/projects/{project_id}/wakeup", "get")
MEMORIES_ROUTE = ("/v1/projects/{project_id}/memories", "get")
MEMORY_ROUTE = ("/v1/projects/{project_id}/memories/{memory_id}", "get")


class Documents:
    """The resources of one kernel: which kinds exist depends on the plugins enabled."""

    def __init__(self, has: Callable[[tuple[str, str]], bool]):
        self.wakeups = has(WAKEUP_ROUTE)
        self.memories = has(MEMORIES_ROUTE) and has(MEMORY_ROUTE)

    def templates(self) -> types.ListResourceTemplatesResult:
        found = []
        if self.wakeups:
            found.append(types.ResourceTemplate(
                uri_template=WAKEUP, name="wakeup", title="Project overview",
                description="The overview an agent reads first (L0 + L1)", mime_type=MARKDOWN))
        if self.memories:
            found.append(types.ResourceTemplate(
                uri_template=MEMORY, name="memory", title="A recorded decision",
                description="One memory: rationale, files, evidence, status", mime_type=MARKDOWN))
        return types.ListResourceTemplatesResult(resource_templates=found)

    def listing(self, caller: Caller, cursor: str | None) -> types.ListResourcesResult:
        """Project by project: its wakeup (once its index is built), then its ACTIVE memories,
        ``PAGE`` resources at a time. A project whose directory is gone is left out: it has
        nothing to read. The cursor holds the project reached and, once its wakeup is listed,
        where its memories go on (``c``: the memory listing's cursor, "" for the first)."""
        try:
            at = decode_cursor(cursor, _listing_state) or {}
        except APIError:
            raise ProtocolError(types.INVALID_PARAMS, "invalid cursor") from None
        found: list[types.Resource] = []
        for project in _projects(caller):
            pid, status = project["id"], project.get("status") or {}
            if (at.get("p") and pid < at["p"]) or status.get("directory_missing"):
                continue
            resumed = at.get("c") if at.get("p") == pid else None
            if self.wakeups and resumed is None and status.get("built"):
                found.append(types.Resource(
                    uri=WAKEUP.format(project_id=pid), name=f"{project['name']} wakeup",
                    title=f"Overview of {project['name']}", mime_type=MARKDOWN))
            if self.memories:
                if len(found) == PAGE:
                    return _page(found, {"p": pid, "c": ""})
                page = _get(caller, f"/v1/projects/{pid}/memories",
                            {"limit": PAGE - len(found), "cursor": resumed or None})
                found += [types.Resource(
                    uri=MEMORY.format(project_id=pid, memory_id=m["id"]), name=m["id"],
                    title=m["title"], description=f"{m['decision_type']} decision in "
                    f"{project['name']}", mime_type=MARKDOWN) for m in page["items"]]
                if page["next_cursor"]:
                    return _page(found, {"p": pid, "c": page["next_cursor"]})
            at = {}
            if len(found) >= PAGE:
                return _page(found, {"p": pid + "\0"})  # the next project on
        return types.ListResourcesResult(resources=found)

    def read(self, caller: Caller, uri: str,
             offer: Callable[[str], str] = call) -> types.ReadResourceResult:
        """The resource at ``uri``, through its route; ``offer`` as in ``calls.run``."""
        match = URI.match(uri)
        if match is None or (match["wakeup"] and not self.wakeups) or \
                (match["memory"] and not self.memories):
            raise ProtocolError(types.INVALID_PARAMS, f"no resource {uri}: resources are "
                                f"{WAKEUP} and {MEMORY}")
        if match["wakeup"]:
            text = render.context(_get(caller, f"/v1/projects/{match['project']}/wakeup",
                                       route=WAKEUP_ROUTE[0], offer=offer))
        else:
            text = render.memory(_get(caller, f"/v1/projects/{match['project']}/memories/"
                                              f"{match['memory']}", route=MEMORY_ROUTE[0]))
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type=MARKDOWN, text=text)])


def _page(found: list[types.Resource], cursor: dict) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=found, next_cursor=encode_cursor(cursor))


def _projects(caller: Caller):
    cursor = None
    while True:
        page = _get(caller, "/v1/projects", {"limit": 200, "cursor": cursor})
        yield from page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return


def _listing_state(state) -> bool:
    """A ``resources/list`` cursor: ``{"p": project id, "c": the memory listing's cursor}``."""
    return isinstance(state, dict) and set(state) <= {"p", "c"} and all(
        isinstance(value, str) for value in state.values())


def _get(caller: Caller, path: str, query: dict | None = None, *, route: str | None = None,
         offer: Callable[[str], str] = call) -> dict:
    """A route's answer; ``route``: the template ``path`` fills in with ids from a URI
    (``Caller``)."""
    answer = caller("get", path, query=query, route=route)
    if not answer.ok:
        raise ProtocolError.from_envelope(answer.error, offer)
    return answer.data
