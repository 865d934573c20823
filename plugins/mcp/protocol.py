"""The MCP server side, transport aside: one JSON-RPC message in, its answer out, parsed and
built with the SDK's own wire types (``mcp_types``, which ``mcp.types`` mirrors) for the
negotiated protocol version.

Speaks the handshake era of the protocol (2024-11-05 … 2025-11-25: ``initialize``, then
requests). A client probing ``server/discover`` (the 2026 stateless era) gets "method not
found" and falls back to ``initialize``, as the SDK's clients do."""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from neuralmind import APIError, Caller, __version__, log_failure
from plugins.mcp import calls
from plugins.mcp.documents import Documents
from plugins.mcp.errors import ProtocolError
from plugins.mcp.tools import Toolbox

log = logging.getLogger("neuralmind.mcp")

INSTRUCTIONS = (
    "NeuralMind holds this project's code index and the decisions recorded about the code. "
    "Start a session with `wakeup` (the project overview). Before changing code, `recall` the "
    "decisions about it and use `query_code` or `search_code` for context; when you make or "
    "learn a decision, `remember` it (title, rationale, files). Tools take `project`, an id "
    "from `list_projects`{default}.")

DEFAULT_VERSION = "2025-03-26"  # what Streamable HTTP assumes when the client names none
SERVED = ("initialize", "ping", "tools/list", "tools/call", "resources/list",
          "resources/templates/list", "resources/read")
Reply = types.JSONRPCResponse | types.JSONRPCError
Streamed = Iterator[types.JSONRPCNotification | Reply]


def response(request_id: types.RequestId, method: str, version: str,
             result: types.Result) -> types.JSONRPCResponse:
    """``result`` in the shape of ``version`` (fields a later revision added are dropped).
    A tool's structured content is the route's JSON, already checked by the route's response
    model: it is passed through rather than walked three more times (a recall's is ~10 KB)."""
    from mcp_types import methods  # loaded on the first message (see _request)
    data = result.model_dump(by_alias=True, mode="json", exclude_none=True,
                             exclude={"structured_content"})
    shaped = methods.serialize_server_result(method, version, data)
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        shaped["structuredContent"] = structured
    return types.JSONRPCResponse.model_construct(jsonrpc="2.0", id=request_id, result=shaped)


def negotiated(asked: Any) -> str:
    """The client's version when this server speaks it, else the newest one it does."""
    return asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


def error(request_id: types.RequestId | None, code: int, message: str,
          data: Any = None) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id,
                              error=types.ErrorData(code=code, message=message, data=data))


class Connection:
    """What answering the messages of one HTTP request needs: the caller (the request's
    credentials, for the routes), its protocol version and its default project."""

    def __init__(self, toolbox: Toolbox, documents: Documents, caller: Caller,
                 allowed: Callable[[str | None], bool], version: str,
                 default_project: str | None, open_session: Callable[[str, dict], str]):
        self.toolbox, self.documents, self.caller = toolbox, documents, caller
        self.allowed = allowed
        self.version = version
        self.default_project = default_project
        self.open_session = open_session
        self.session_id: str | None = None  # set by an initialize in this request

    def answer(self, message: types.JSONRPCMessage) -> Reply | Streamed | None:
        """The answer to a request (a generator when it streams progress); None for the
        client's notifications and responses, which get none."""
        if not isinstance(message, types.JSONRPCRequest):
            return None
        try:
            return self._request(message)
        except ProtocolError as ex:
            return error(message.id, ex.code, ex.message, ex.data)
        except Exception as ex:  # one message fails, not the batch (_failed)
            return self._failed(message.method, message.id, ex)

    def _failed(self, method: str, request_id: types.RequestId, ex: Exception) -> Reply:
        """A fault of ours answering one message (a renderer meeting a shape it did not
        expect, a full disk): logged with the request's id, answered -32603 without its text,
        as the kernel answers an HTTP request 500; a batch's other messages keep their answers,
        and the writes they made are not left unanswered."""
        fault = log_failure(log, f"MCP {method} (JSON-RPC id {request_id!r}) in request "
                                 f"{self.caller.request_id}", ex)
        refusal = fault[0] if fault else APIError()
        envelope = {"code": refusal.code, "message": refusal.message, "status": refusal.status,
                    "request_id": self.caller.request_id, "details": refusal.details}
        refused = ProtocolError.from_envelope(envelope)
        return error(request_id, refused.code, refused.message, refused.data)

    def offer(self, tool: str) -> str:
        """How a refusal suggests ``tool`` to this caller (``Toolbox.offer``)."""
        return self.toolbox.offer(tool, self.allowed)

    def _request(self, message: types.JSONRPCRequest) -> Reply | Streamed:
        method = message.method
        if method not in SERVED:
            raise ProtocolError(types.METHOD_NOT_FOUND, f"method {method!r} is not served here")
        if method == "initialize":
            if self.session_id is not None:
                raise ProtocolError(types.INVALID_REQUEST, "Invalid Request: a batch opens at "
                                    "most one session, and an initialize before this one in "
                                    "the batch opened it")
            self.version = negotiated((message.params or {}).get("protocolVersion"))
        version = self.version
        # each protocol version's request and result models, ~0.2 s of imports: loaded by the
        # first message rather than by every worker that mounts the plugin
        from mcp_types import methods
        try:
            request = methods.parse_client_request(method, version, message.params)
        except KeyError:
            raise ProtocolError(types.METHOD_NOT_FOUND,
                                f"method {method!r} is not served here (protocol {version})")
        except ValidationError as ex:
            raise ProtocolError(types.INVALID_PARAMS, f"invalid params for {method}: "
                                f"{ex.errors(include_url=False)[0]['msg']}") from None
        out = getattr(self, "_" + method.replace("/", "_"))(request.params)
        if isinstance(out, types.Result):
            return response(message.id, method, version, out)
        return self._stream(message.id, request.params, out)

    # -- methods ---------------------------------------------------------------------------

    def _initialize(self, params: types.InitializeRequestParams) -> types.InitializeResult:
        if self.default_project is not None:
            self._reachable(self.default_project)
        self.session_id = self.open_session(self.version, params.client_info.model_dump(
            mode="json", exclude_none=True))
        default = f"; without one they act on {self.default_project}" if self.default_project \
            else ""
        return types.InitializeResult(
            protocol_version=self.version, server_info=types.Implementation(
                name="neuralmind", title="NeuralMind", version=__version__),
            capabilities=types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False),
                                                  resources=types.ResourcesCapability()),
            instructions=INSTRUCTIONS.format(default=default))

    def _reachable(self, project: str) -> None:
        """The endpoint's ``?project=`` must be a project the caller reaches: else every call
        naming none would fail, and the instructions would name a project that is not there.
        Refused as a route's refusal is (-32600, the envelope in ``data``), before any session
        is opened."""
        answer = self.caller("get", "/v1/projects/" + urllib.parse.quote(project, safe=""))
        if not answer.ok:
            envelope = answer.error
            raise ProtocolError(types.INVALID_REQUEST, f"{envelope['code']}: the project query "
                                f"parameter of this endpoint's URL, {project!r}, is no project "
                                "this token reaches (list_projects gives the ids)", envelope)

    def _ping(self, params) -> types.EmptyResult:
        return types.EmptyResult()

    def _tools_list(self, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        _one_page(params)
        default = self.default_project is not None
        return types.ListToolsResult(tools=[types.Tool(
            name=t.spec.name, title=t.spec.title, description=t.spec.description,
            input_schema=t.input_schema(default), output_schema=t.output_schema,
            annotations=types.ToolAnnotations(
                read_only_hint=t.spec.read_only, idempotent_hint=t.spec.idempotent,
                destructive_hint=t.spec.destructive, open_world_hint=False))
            for t in self.toolbox.listed(self.allowed)])

    def _tools_call(self, params: types.CallToolRequestParams):
        tool = self.toolbox.get(params.name)
        if tool is None:
            raise ProtocolError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        outcome = calls.run(tool, self.caller, params.arguments, self.default_project, self.offer)
        if tool.spec.job and (params.meta or {}).get("progress_token") is not None:
            return outcome  # streamed: progress notifications, then the result
        return _last(outcome)

    def _resources_list(self, params: types.PaginatedRequestParams | None):
        return self.documents.listing(self.caller, params.cursor if params else None)

    def _resources_templates_list(self, params: types.PaginatedRequestParams | None
                                  ) -> types.ListResourceTemplatesResult:
        _one_page(params)
        return self.documents.templates()

    def _resources_read(self, params: types.ReadResourceRequestParams):
        return self.documents.read(self.caller, params.uri, self.offer)

    # -- streaming ---------------------------------------------------------------------------

    def _stream(self, request_id: types.RequestId, params, outcome) -> Streamed:
        token = params.meta["progress_token"]
        version = self.version
        try:
            for step in outcome:
                if isinstance(step, calls.Progress):
                    note = types.ProgressNotificationParams(
                        progress_token=token, progress=step.progress, total=step.total,
                        message=step.message)
                    yield types.JSONRPCNotification(
                        jsonrpc="2.0", method="notifications/progress",
                        params=note.model_dump(by_alias=True, mode="json", exclude_none=True))
                else:
                    yield response(request_id, "tools/call", version, step)
        except Exception as ex:  # as in answer(): this message fails alone
            yield self._failed("tools/call", request_id, ex)


def _one_page(params: types.PaginatedRequestParams | None) -> None:
    """A list given whole, in one page, gives no cursor: any cursor is refused, as
    ``resources/list`` refuses one it did not give, rather than answered with the first page."""
    if params is not None and params.cursor is not None:
        raise ProtocolError(types.INVALID_PARAMS, "invalid cursor: this list has one page, "
                            "and gives no cursor")


def _last(outcome: Iterator[Any]) -> types.CallToolResult:
    """The result of a call whose progress nobody asked to see."""
    for step in outcome:
        if isinstance(step, types.CallToolResult):
            return step
    raise AssertionError("a tool call always ends with its result")


def drain(answer: Reply | Streamed) -> Reply:
    """The final answer of a streamed reply (its progress dropped)."""
    if isinstance(answer, (types.JSONRPCResponse, types.JSONRPCError)):
        return answer
    last = None
    for last in answer:
        pass
    return last
