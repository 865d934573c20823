"""``neuralmind mcp``: MCP over stdio for an agent, relayed to the daemon's ``/v1/mcp``.

The SDK's stdio server owns stdin and stdout (while it serves, anything else written to
stdout lands on stderr). Each message goes to the daemon through ``neuralmind.client``, and
every message of the answer — progress included, as it arrives — comes back. Tools, schemas,
sessions and errors are therefore the daemon's, exactly as over HTTP; this module adds only
the session and protocol-version headers an HTTP client keeps, and restarts a daemon that
went away."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from neuralmind.client import NeuralMindAPIError, NeuralMindClient, NeuralMindError

log = logging.getLogger("neuralmind.mcp")
INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
GRACE_S = 5.0  # how long answers in flight may still take once stdin has closed


class Relay:
    def __init__(self, nm: NeuralMindClient, project: str | None,
                 restart: Callable[[], NeuralMindClient]):
        self.nm, self.project, self.restart = nm, project, restart
        self.session_id: str | None = None
        self.version: str | None = None

    def post(self, message: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
        """Forward one message and ``emit`` each message of the answer."""
        try:
            answer = self._send(message)
            for reply in answer.messages:
                if message.get("method") == "initialize" and "result" in reply:
                    self.version = reply["result"].get("protocolVersion")
                emit(reply)
        except NeuralMindAPIError as ex:
            why = f"{ex.message} [{ex.code}]"
            if ex.status == 404 and ex.code == "not_found":
                why = (f"{self.nm.url} does not serve /v1/mcp: enable the mcp plugin "
                       "([kernel] plugins) and restart the daemon")
            self._fail(message, emit, why)
        except (NeuralMindError, OSError) as ex:
            self._fail(message, emit, f"NeuralMind is not reachable at {self.nm.url} ({ex}); "
                       "start it with `neuralmind daemon start`")

    def _send(self, message: dict[str, Any]):
        def send():
            return self.nm.mcp(message, session_id=self.session_id,
                               protocol_version=self.version, project=self.project)
        try:
            answer = send()
        except ConnectionRefusedError:  # nothing reached the daemon: start it, send again
            log.warning("the daemon at %s went away; starting it again", self.nm.url)
            self.nm = self.restart()
            answer = send()
        if answer.session_id:
            self.session_id = answer.session_id
        return answer

    @staticmethod
    def _fail(message: dict[str, Any], emit, why: str) -> None:
        log.warning("%s failed: %s", message.get("method", "message"), why)
        if "id" in message and "method" in message:  # only a request gets an answer
            emit({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": INTERNAL_ERROR, "message": why}})


def serve(relay: Relay) -> None:
    import anyio
    anyio.run(_serve, relay)


async def _serve(relay: Relay) -> None:
    import anyio
    import mcp.types as types
    from anyio import from_thread, to_thread
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    async with stdio_server() as (read, write):
        async def send(data: dict[str, Any]) -> None:
            await write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(data)))

        def emit(data: dict[str, Any]) -> None:  # from a worker thread
            from_thread.run(send, data)

        pending: set[int] = set()

        async def forward(data: dict[str, Any]) -> None:
            pending.add(id(data))
            try:
                await to_thread.run_sync(relay.post, data, emit, abandon_on_cancel=True)
            finally:
                pending.discard(id(data))

        async with write, anyio.create_task_group() as tasks:
            async for item in read:
                if isinstance(item, Exception):
                    log.warning("not a JSON-RPC message: %s", _why(item))
                    await send({"jsonrpc": "2.0", "id": None, "error": {
                        "code": PARSE_ERROR, "message": "Parse error: not a JSON-RPC message"}})
                    continue
                data = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
                # a thread per message: a build streaming progress never holds up a recall
                tasks.start_soon(forward, data)
            # stdin closed: the agent is leaving; answer what is in flight, briefly
            with anyio.move_on_after(GRACE_S):
                while pending:
                    await anyio.sleep(0.05)
            tasks.cancel_scope.cancel()


def _why(ex: Exception) -> str:
    """One line for a message the SDK could not read: pydantic's own text runs to several
    lines and a URL."""
    from pydantic import ValidationError
    if isinstance(ex, ValidationError):
        first = ex.errors(include_url=False)[0]
        return first["msg"] + (f" at {'.'.join(map(str, first['loc']))}" if first["loc"] else "")
    return str(ex)
