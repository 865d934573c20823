"""JSON-RPC messages as they arrive, over HTTP and stdio alike, read before MCP answers them.

What is not a JSON-RPC message MCP takes is said plainly, in one line, with the id to answer
it by when one can be read (JSON-RPC 2.0: ``-32600 Invalid Request``), rather than as the
SDK's union of every message kind that did not match."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from pydantic import ValidationError

KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
         int: "a number", float: "a number", type(None): "null"}


class Invalid(Exception):
    """Not a JSON-RPC message: ``field`` is what is wrong (None: the whole message),
    ``request_id`` the id to answer by (None when there is none to read)."""

    def __init__(self, field: str | None, why: str, request_id: types.RequestId | None):
        super().__init__(why)
        self.field, self.why, self.request_id = field, why, request_id


def request_id(data: Any) -> types.RequestId | None:
    """The message's id when it is one MCP takes: a string or an integer, never null."""
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str) or type(value) is int else None


def read(data: Any) -> types.JSONRPCMessage:
    """``data`` (parsed JSON) as a request, notification or response; else ``Invalid``."""
    field, why = _problem(data)
    if why is None:
        kind = (types.JSONRPCRequest if "id" in data else types.JSONRPCNotification) \
            if "method" in data else types.JSONRPCError if "error" in data else \
            types.JSONRPCResponse
        try:  # the one kind it can be, so that pydantic's error is about that kind alone
            return kind.model_validate(data, by_name=False)
        except ValidationError as ex:
            first = ex.errors(include_url=False)[0]
            field = ".".join(map(str, first["loc"])) or None
            why = f"{field}: {first['msg']}" if field else first["msg"]
    raise Invalid(field, why, request_id(data))


def _problem(data: Any) -> tuple[str | None, str | None]:
    if not isinstance(data, dict):
        return None, f"a JSON-RPC message is an object, not {KINDS.get(type(data), 'that')}"
    if data.get("jsonrpc") != "2.0":
        return "jsonrpc", 'jsonrpc must be "2.0"'
    if "id" in data and request_id(data) is None:
        return "id", "id must be a string or an integer" + (
            " (MCP never takes a null id)" if data["id"] is None else "")
    if "method" in data:
        if not isinstance(data["method"], str):
            return "method", "method must be a string"
        if "params" in data and not isinstance(data["params"], dict):
            return "params", "params must be an object"
        return None, None
    if "result" in data or "error" in data:
        if "id" not in data:
            return "id", "a response carries the id of the request it answers"
        if "error" in data and not isinstance(data["error"], dict):
            return "error", "error must be an object"
        return None, None
    return None, "a JSON-RPC message has a method (a request or a notification), or a result " \
                 "or an error (a response)"
