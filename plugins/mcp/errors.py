"""JSON-RPC errors: what a request that cannot be answered at all gets (an unknown method,
bad params, an unknown resource). A tool that runs and is refused answers a tool error
instead (``calls.refused``), so the model can read it and correct itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types

RESOURCE_NOT_FOUND = -32002  # MCP's code up to 2025-11-25


def call(tool: str) -> str:
    """How a text suggests ``tool`` to a caller who may call it."""
    return f"call {tool}"


class ProtocolError(Exception):
    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    @classmethod
    def from_envelope(cls, error: dict[str, Any],
                      offer: Callable[[str], str] = call) -> ProtocolError:
        """A route's refusal as a JSON-RPC error; ``data`` is the envelope's ``error``."""
        status = error["status"]
        code = RESOURCE_NOT_FOUND if status == 404 else \
            types.INTERNAL_ERROR if status >= 500 else types.INVALID_REQUEST
        return cls(code, f"{error['code']}: {said(error, offer)}", error)


def said(error: dict[str, Any], offer: Callable[[str], str] = call) -> str:
    """The envelope's message, in MCP's terms where it names an HTTP route or a command;
    ``offer`` words the tool it suggests (``Toolbox.offer``: who may, to a caller who may not)."""
    if error["code"] == "index_not_built":
        return f"the project has no code index yet: {offer('build_index')}"
    return error["message"]
