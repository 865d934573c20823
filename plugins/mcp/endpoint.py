"""``/v1/mcp``: the MCP Streamable HTTP transport on the kernel's own WSGI app.

A POST carries one JSON-RPC message or a batch; requests are answered as
``application/json``, or as server-sent events when a tool reports progress and the client
accepts them. Notifications and responses alone get 202. No stream is kept open, so GET is
a 405 (Falcon's, in the envelope). The route is declared like every other, so the kernel's
guards (Host check, body cap), authentication and the ``mcp.read`` check run first; each
tool call then runs through its own route with the same credentials."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import Field, RootModel, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from neuralmind import BadRequest, InvalidFields, Model, NotFound, operation
from plugins.mcp import messages
from plugins.mcp.protocol import DEFAULT_VERSION, Connection, Reply, drain, error

TAGS = ["mcp"]
SESSION = "Mcp-Session-Id"
VERSION = "MCP-Protocol-Version"
SSE = "text/event-stream"


MESSAGE = {"type": "object", "description": (
    "A JSON-RPC 2.0 message: an MCP request, notification or response. One that is not valid "
    "JSON-RPC is answered with a JSON-RPC error (-32600 Invalid Request) carrying its id; "
    "without an id to answer by, a lone message is a 422")}
BODY = {"oneOf": [MESSAGE, {"type": "array", "minItems": 1, "items": MESSAGE}]}


class MCPMessages(RootModel[Annotated[Any, WithJsonSchema(BODY)]]):
    """One JSON-RPC message, or a batch of them (an empty batch is no request: JSON-RPC). Each
    is read as JSON-RPC by the endpoint (``messages.read``), which says what is wrong with it
    in JSON-RPC's terms."""

    @field_validator("root")
    @classmethod
    def _objects(cls, body: Any) -> Any:
        if isinstance(body, dict) or (isinstance(body, list) and body and all(
                isinstance(m, dict) for m in body)):
            return body
        raise PydanticCustomError("jsonrpc_body", "the body is one JSON-RPC message (an "
                                  "object) or a batch of them (a non-empty array of objects)")


class MCPReplies(RootModel[Reply | list[Reply]]):
    """The answer to each request, in the order sent (a batch gets a batch)."""


class MCPQuery(Model):
    project: str | None = Field(None, description="The project a tool acts on when the call "
                                "names none (`neuralmind mcp` sets it from its directory)",
                                json_schema_extra={"minLength": 1})  # the check is _an_id's

    @field_validator("project")
    @classmethod
    def _an_id(cls, project: str | None) -> str | None:
        """``?project=`` names no project: refused, rather than read as no default."""
        if project == "":
            raise PydanticCustomError("string_too_short", "must be a project id, not an empty "
                                      "string: name one (list_projects gives the ids), or leave "
                                      "project out of the URL")
        return project


class MCPResource:
    def __init__(self, kernel, state):
        self.kernel, self.state = kernel, state

    @operation(permission="mcp.read", body=MCPMessages, query=MCPQuery, response=MCPReplies,
               responses={202: None}, tags=TAGS,
               summary="Model Context Protocol (Streamable HTTP): JSON-RPC requests and "
                       "batches; server-sent events while a tool reports progress",
               headers=[(SESSION, "the session an `initialize` opened (none: stateless)", False),
                        (VERSION, "the protocol version the session speaks", False,
                         HANDSHAKE_PROTOCOL_VERSIONS)],
               errors={404: "`mcp_session_not_found`: the session ended, or is another token's"})
    def on_post(self, req, resp):
        kernel, actor = self.kernel, req.context.actor
        session = self._session(req, required=False)
        version = req.get_header(VERSION) or (session.protocol_version if session else
                                              DEFAULT_VERSION)
        tools, documents = self.state.tools(kernel)
        conn = Connection(
            tools, documents, kernel.caller(req),
            lambda permission: kernel.allowed(actor, permission), version,
            req.context.query.project,
            lambda v, client: self.state.sessions.open(actor, v, client))
        body = req.context.body.root
        batch = isinstance(body, list)
        answers = [a for a in (_answer(conn, m, batch) for m in (body if batch else [body]))
                   if a is not None]
        if conn.session_id is not None:
            resp.set_header(SESSION, conn.session_id)
        if not answers:
            resp.status = 202
            return None
        streams = any(not isinstance(a, (types.JSONRPCResponse, types.JSONRPCError))
                      for a in answers)
        if streams and SSE in (req.get_header("Accept") or ""):
            resp.content_type = SSE
            resp.set_header("Cache-Control", "no-cache")
            resp.set_header("X-Accel-Buffering", "no")
            resp.stream = _events(answers)
            return None
        finals = [drain(a) for a in answers]
        return MCPReplies(finals if batch else finals[0])

    @operation(permission="mcp.read", status=204, tags=TAGS,
               summary="End the MCP session named by Mcp-Session-Id",
               headers=[(SESSION, "the session to end", True),
                        (VERSION, "the protocol version the session speaks", False,
                         HANDSHAKE_PROTOCOL_VERSIONS)],
               errors={404: "`mcp_session_not_found`: the session ended, or is another token's"})
    def on_delete(self, req, resp):
        session = self._session(req, required=True)
        self.state.sessions.end(session.id, req.context.actor)

    def _session(self, req, *, required: bool):
        """The request's session, checked: its id known and the caller's, its protocol version
        the header's. A request without a session id is answered statelessly."""
        version = req.get_header(VERSION)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise BadRequest(f"{VERSION} {version} is not a protocol version this server "
                             f"speaks", code="unsupported_protocol_version",
                             details={"supported": list(HANDSHAKE_PROTOCOL_VERSIONS)})
        sid = req.get_header(SESSION)
        if sid is None:
            if required:
                raise BadRequest(f"name the session to end in the {SESSION} header")
            return None
        session = self.state.sessions.find(sid, req.context.actor)
        if session is None:
            raise NotFound("no such MCP session (it ended, expired, or was never opened with "
                           "this token): initialize a new one", code="mcp_session_not_found")
        if version is not None and version != session.protocol_version:
            raise BadRequest(f"this session speaks {session.protocol_version}, not {version}",
                             code="unsupported_protocol_version",
                             details={"supported": [session.protocol_version]})
        return session


def _answer(conn: Connection, data: dict[str, Any], batch: bool):
    """``conn``'s answer to one message; one that is not valid JSON-RPC is answered -32600 by
    its id, or in a batch by none; a lone one without an id fails the HTTP request instead."""
    try:
        message = messages.read(data)
    except messages.Invalid as ex:
        if ex.request_id is None and not batch:
            raise InvalidFields.one(ex.field or (), ex.why, kind="invalid_request",
                                    message=f"not a JSON-RPC message: {ex.why}") from None
        return error(ex.request_id, types.INVALID_REQUEST, f"Invalid Request: {ex.why}")
    return conn.answer(message)


def _events(answers) -> Iterator[bytes]:
    """Each answer's messages as SSE ``message`` events: progress first, each result last."""
    for answer in answers:
        for message in [answer] if isinstance(answer, (types.JSONRPCResponse,
                                                        types.JSONRPCError)) else answer:
            data = message.model_dump_json(by_alias=True, exclude_unset=True)
            yield f"event: message\ndata: {data}\n\n".encode()


def routes(kernel, state) -> list[tuple]:
    return [("/v1/mcp", MCPResource(kernel, state))]
