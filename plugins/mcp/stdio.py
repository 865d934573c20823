"""``neuralmind mcp``: MCP over stdio for an agent, relayed to the daemon's ``/v1/mcp``.

Each line of stdin is one message. What is not JSON is answered -32700, what is not a
JSON-RPC message -32600 with its id when it has one (``messages.read``, as over HTTP), so no
request is left waiting for an answer. Each message goes to the daemon through
``neuralmind.client``, and every message of the answer — progress included, as it arrives —
comes back. Tools, schemas, sessions and errors are therefore the daemon's, exactly as over
HTTP; this module adds only the session and protocol-version headers an HTTP client keeps,
and restarts a daemon that went away: once, however many calls were in flight.

While it serves, fd 0 reads /dev/null and fd 1 writes to stderr, so neither the daemon it
starts nor a stray print reaches the agent's pipes: protocol messages go out on a private
copy of stdout."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR

from neuralmind.client import (DaemonNotRunning, NeuralMindAPIError, NeuralMindClient,
                               NeuralMindError)
from plugins.mcp import messages
from plugins.mcp.calls import invalid
from plugins.mcp.protocol import DEFAULT_VERSION, response

log = logging.getLogger("neuralmind.mcp")
GRACE_S = 5.0  # how long answers in flight may still take once stdin has closed
SURROGATE = "holds a lone surrogate (\\ud800-\\udfff), which is no character: send the text whole"


class Relay:
    def __init__(self, nm: NeuralMindClient, project: str | None,
                 restart: Callable[[], NeuralMindClient]):
        self.nm, self.project, self.restart = nm, project, restart
        self.session_id: str | None = None
        self.version: str | None = None
        self._restarting = threading.Lock()

    def read(self, line: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(the message in ``line`` to relay, or None; the answer to give here instead, or
        None)."""
        try:
            data = json.loads(line)
        except ValueError as ex:
            log.warning("not JSON: %s", ex)
            return None, error(None, PARSE_ERROR, f"Parse error: {ex}")
        try:
            messages.read(data)
        except messages.Invalid as ex:
            log.warning("not a JSON-RPC message: %s", ex.why)
            return None, error(ex.request_id, INVALID_REQUEST, f"Invalid Request: {ex.why}")
        where = _lone_surrogate(data)
        if where is None:
            return data, None
        log.warning("%s %s", ".".join(map(str, where)), SURROGATE)
        if "id" not in data or "method" not in data:
            return None, None  # a notification or a response: nothing to answer
        if data["method"] == "tools/call" and where[:2] == ("params", "arguments") and where[2:]:
            # what the tool's route would say of the argument, could a server read it (none
            # can: no UTF-8 holds a lone surrogate, so the daemon would refuse the whole body)
            result = invalid([{"loc": list(where[2:]), "msg": SURROGATE,
                               "type": "string_unicode"}], None)
            reply = response(data["id"], "tools/call", self.version or DEFAULT_VERSION, result)
            return None, reply.model_dump(by_alias=True, mode="json", exclude_none=True)
        return None, error(data["id"], INVALID_PARAMS,
                           f"Invalid params: {'.'.join(map(str, where))} {SURROGATE}")

    def post(self, message: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
        """Forward one message and ``emit`` each message of the answer."""
        try:
            answer = self._send(message)
            for reply in answer.messages:
                if message.get("method") == "initialize" and "result" in reply:
                    self.version = reply["result"].get("protocolVersion")
                emit(reply)
        except NeuralMindAPIError as ex:  # the daemon refused the HTTP request itself
            envelope = {"code": ex.code, "message": ex.message, "status": ex.status,
                        "request_id": ex.request_id, "details": ex.details}
            if ex.status == 404 and ex.code == "not_found":
                self._fail(message, emit, INTERNAL_ERROR, (
                    f"{self.nm.url} does not serve /v1/mcp: enable the mcp plugin ([kernel] "
                    "plugins) and restart the daemon"), envelope)
            else:  # a 4xx is the message's fault (too large, …), as over HTTP
                self._fail(message, emit, INTERNAL_ERROR if ex.status >= 500 else
                           INVALID_REQUEST, f"{ex.code} ({ex.status}): {ex.message}", envelope)
        except (NeuralMindError, OSError) as ex:
            self._fail(message, emit, INTERNAL_ERROR, f"NeuralMind is not reachable at "
                       f"{self.nm.url} ({ex}); start it with `neuralmind daemon start`")

    def _send(self, message: dict[str, Any]):
        nm = self.nm
        try:
            answer = self._post(nm, message)
        except DaemonNotRunning as ex:
            if not _nothing_sent(ex):
                raise
            with self._restarting:  # one start at a time; the calls waiting use its daemon
                if self.nm is nm:
                    log.warning("the daemon went away; starting it again")
                    self.nm = self.restart()
            answer = self._post(self.nm, message)
        if answer.session_id:
            self.session_id = answer.session_id
        return answer

    def _post(self, nm: NeuralMindClient, message: dict[str, Any]):
        return nm.mcp(message, session_id=self.session_id, protocol_version=self.version,
                      project=self.project)

    @staticmethod
    def _fail(message: dict[str, Any], emit, code: int, why: str, data: Any = None) -> None:
        log.warning("%s failed: %s", message.get("method", "message"), why)
        if "id" in message and "method" in message:  # only a request gets an answer
            emit(error(message["id"], code, why, data))


def _nothing_sent(ex: DaemonNotRunning) -> bool:
    """Whether the daemon is gone and the message never reached it (no discovery file, or a
    refused connection), so that sending it again to a new daemon cannot do anything twice."""
    return ex.__cause__ is None or isinstance(ex.__cause__, ConnectionRefusedError)


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def _lone_surrogate(value: Any, path: tuple = ()) -> tuple | None:
    """Where the first string holding a lone surrogate is (``"\\ud83d"``: legal JSON, what
    JavaScript writes for a string cut inside an emoji), or None."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return path
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, item in items:
        found = _lone_surrogate(key, path) if isinstance(key, str) else None
        found = found if found is not None else _lone_surrogate(item, (*path, key))
        if found is not None:
            return found
    return None


@contextmanager
def _wire() -> Iterator[tuple[IO[str], IO[str]]]:
    """The agent's stdin and stdout on private descriptors, fd 0 and 1 pointed away meanwhile.
    They are not closed: a worker thread may still block on stdin as the process ends."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield (open(wire_in, encoding="utf-8", errors="replace", closefd=False),
               open(wire_out, "w", encoding="utf-8", closefd=False))
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


def serve(relay: Relay) -> None:
    import anyio
    anyio.run(_serve, relay)


async def _serve(relay: Relay) -> None:
    import anyio
    from anyio import to_thread

    with _wire() as (stdin, stdout):
        writing = threading.Lock()

        def emit(data: dict[str, Any]) -> None:  # from worker threads too: a line at a time
            with writing:
                stdout.write(json.dumps(data, separators=(",", ":")) + "\n")
                stdout.flush()

        pending: set[int] = set()

        async def forward(data: dict[str, Any]) -> None:
            pending.add(id(data))
            try:
                await to_thread.run_sync(relay.post, data, emit, abandon_on_cancel=True)
            finally:
                pending.discard(id(data))

        async with anyio.create_task_group() as tasks:
            async for line in anyio.wrap_file(stdin):
                if not line.strip():
                    continue
                message, reply = relay.read(line)
                if reply is not None:
                    emit(reply)
                if message is not None:
                    # a thread per message: a build streaming progress never holds up a recall
                    tasks.start_soon(forward, message)
            # stdin closed: the agent is leaving; answer what is in flight, briefly
            with anyio.move_on_after(GRACE_S):
                while pending:
                    await anyio.sleep(0.05)
            tasks.cancel_scope.cancel()
