"""``neuralmind mcp``: MCP over stdio for an agent, relayed to the daemon's ``/v1/mcp``.

Each line of stdin is one message. What is not JSON is answered -32700, what is not a
JSON-RPC message -32600 with its id when it has one (``messages.read``, as over HTTP), so no
request is left waiting for an answer. Each message goes to the daemon through
``neuralmind.client``, and every message of the answer — progress included, as it arrives —
comes back. Tools, schemas, sessions and errors are therefore the daemon's, exactly as over
HTTP; this module adds only the session and protocol-version headers an HTTP client keeps,
restarts a daemon that went away (once, however many calls were in flight), opens a new
session when the daemon forgot this one, and ends its session when it leaves or when the
agent initializes again.

While it serves, fd 0 reads /dev/null and fd 1 writes to stderr, so neither the daemon it
starts nor a stray print reaches the agent's pipes: protocol messages go out on a private
copy of stdout."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR

from neuralmind.client import (DaemonNotRunning, NeuralMindAPIError, NeuralMindClient,
                               NeuralMindError)
from plugins.mcp import messages

log = logging.getLogger("neuralmind.mcp")
GRACE_S = 5.0  # how long answers in flight may still take once stdin has closed
# the kernel's invalid_json message, as over HTTP: neuralmind exports no InvalidJSON and a
# plugin imports nothing of kernel/ (test_tier2_boundary.py); test_transports.py's
# test_stdio_refuses_a_line_that_is_not_utf8_as_http_refuses_the_body holds the two in step
NOT_UTF8 = "the body is not valid UTF-8 JSON"
HANDSHAKE = ("initialize", "notifications/initialized")
END_TIMEOUT_S = 2.0  # how long ending the session may hold up the exit


class Relay:
    def __init__(self, nm: NeuralMindClient, project: str | None,
                 restart: Callable[[], NeuralMindClient]):
        self.nm, self.project, self.restart = nm, project, restart
        self.session_id: str | None = None
        self.version: str | None = None
        self.handshake: dict[str, dict[str, Any]] = {}  # the agent's, replayed by _reopen
        self._restarting = threading.Lock()
        self._reopening = threading.Lock()
        self._initializing = threading.Lock()

    def read(self, line: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(the message in ``line`` to relay, or None; the answer to give here instead, or
        None). A string holding a lone surrogate escape (``"\\ud83d"``) is relayed as the
        escape it came as: the daemon refuses that body as over HTTP (400 ``invalid_json``),
        so both transports give the one answer, the daemon's. One leading UTF-8 BOM is
        dropped, as the daemon drops it from a body."""
        line = line.removeprefix("\ufeff")
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as ex:  # RecursionError: nested too deep to read
            log.warning("not JSON: %s", ex)
            return None, error(None, PARSE_ERROR, f"Parse error: {ex}")
        try:
            messages.read(data)
        except messages.Invalid as ex:
            log.warning("not a JSON-RPC message: %s", ex.why)
            return None, error(ex.request_id, INVALID_REQUEST, f"Invalid Request: {ex.why}")
        if (bad := _not_utf8(line)) is not None:
            return None, self._not_utf8(data, bad)
        return data, None

    @staticmethod
    def _not_utf8(data: dict[str, Any], why: str) -> dict[str, Any] | None:
        """What the daemon answers a body that is not UTF-8 (its 400 ``invalid_json``, the
        caller's -32600), rather than the line relayed with U+FFFD in place of its bytes."""
        log.warning("%s: %s", NOT_UTF8, why)
        if "id" not in data or "method" not in data:
            return None  # a notification or a response: nothing to answer
        envelope = {"code": "invalid_json", "message": NOT_UTF8, "status": 400,
                    "request_id": None, "details": {"reason": why}}
        return error(data["id"], INVALID_REQUEST, f"invalid_json (400): {NOT_UTF8}", envelope)

    def post(self, message: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
        """Forward one message and ``emit`` each message of the answer. An ``initialize`` that
        opens a new session ends the one it replaces (the agent is done with it): one at a
        time, so that each ends the one the initialize before it opened."""
        if message.get("method") != "initialize":
            self._forward(message, emit)
            return
        with self._initializing:
            held = (self.session_id, self.version)
            self._forward(message, emit)
            if held[0] not in (None, self.session_id):
                self._end(*held)

    def _forward(self, message: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
        if message.get("method") in HANDSHAKE:
            self.handshake[message["method"]] = message
        try:
            answer = self._relay(message)
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
        except Exception as ex:  # a fault of ours: this message fails, the relay serves on
            log.error("relaying %s (id %r) failed", message.get("method", "a message"),
                      message.get("id"), exc_info=ex)
            self._fail(message, emit, INTERNAL_ERROR, "internal error")

    def _relay(self, message: dict[str, Any]):
        """Send ``message``; a session the daemon no longer knows (evicted as its actor's least
        recently used, or expired) is replaced and the message sent again, once."""
        stale = self.session_id
        try:
            return self._send(message)
        except NeuralMindAPIError as ex:
            if ex.code != "mcp_session_not_found" or stale is None:
                raise
            self._reopen(stale, ex)
        return self._send(message)

    def _reopen(self, stale: str, refused: NeuralMindAPIError) -> None:
        """Open a new session in place of ``stale`` by replaying the agent's handshake, which
        the agent cannot do itself: it initialized once, to this relay. One at a time; the
        calls refused meanwhile use the session it opened. When the daemon will not open
        one, ``refused`` stands."""
        with self._reopening:
            if self.session_id != stale:
                return
            log.warning("the daemon no longer knows session %s…; opening a new one", stale[:8])
            replies = list(self._send(self.handshake["initialize"]).messages)
            opened = next((r["result"] for r in replies if "result" in r), None)
            if opened is None or self.session_id == stale:
                raise refused
            self.version = opened.get("protocolVersion")
            if "notifications/initialized" in self.handshake:
                list(self._send(self.handshake["notifications/initialized"]).messages)

    def end(self) -> None:
        """End the session, best effort: each agent window launches its own relay, and a
        session left open counts against the actor's live sessions until it is evicted."""
        if self.session_id is not None:
            self._end(self.session_id, self.version)

    def _end(self, session_id: str, version: str | None) -> None:
        headers = {"Mcp-Session-Id": session_id,
                   **({"MCP-Protocol-Version": version} if version else {})}
        try:
            self.nm.request("DELETE", "/v1/mcp", headers=headers, timeout=END_TIMEOUT_S,
                            idempotent=False)
        except (NeuralMindError, OSError) as ex:
            log.info("the session was not ended: %s", ex)

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
        opening = message.get("method") == "initialize"  # a new session: none named
        return nm.mcp(message, session_id=None if opening else self.session_id,
                      protocol_version=self.version, project=self.project)

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


def _not_utf8(line: str) -> str | None:
    """Where ``line`` (read with ``surrogateescape``) held a byte that is not UTF-8, or None."""
    raw = line.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as ex:
        return f"byte {ex.start} of the line is 0x{raw[ex.start]:02x}, which is not UTF-8"
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
        # surrogateescape: a byte that is not UTF-8 is kept, for read() to refuse
        yield (open(wire_in, encoding="utf-8", errors="surrogateescape", closefd=False),
               open(wire_out, "w", encoding="utf-8", closefd=False))
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


def serve(relay: Relay) -> None:
    """Relay until stdin closes, or until SIGTERM; either way the session is ended."""
    import anyio
    signal.signal(signal.SIGTERM, lambda signum, frame: _die(relay, signum))
    try:
        anyio.run(_serve, relay)
    finally:
        relay.end()


def _die(relay: Relay, signum: int) -> None:
    """End the session, then die of the signal as its default action would — within
    ``END_TIMEOUT_S`` whatever the daemon does, and at once on a second signal: an agent that
    repeats SIGTERM kept the relay alive, each handler ending the session anew."""
    signal.signal(signum, signal.SIG_DFL)
    ending = threading.Thread(target=relay.end, name="end-session", daemon=True)
    ending.start()
    ending.join(END_TIMEOUT_S)
    os.kill(os.getpid(), signum)


async def _stopped_by_signal(relay: Relay) -> None:
    """SIGTERM through the event loop, whichever thread the kernel hands it to. Handed to a
    worker (the stdin reader, a call waiting on a hung daemon), a plain handler ran only when
    the main thread next woke — when that call timed out, 30 s and more later; the loop's
    receiver wakes it at once."""
    import anyio
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for signum in signals:
            _die(relay, signum)


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
            tasks.start_soon(_stopped_by_signal, relay)
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
