"""What a real server writes to its log: gunicorn's "Invalid request" line quotes the raw
request line, so a credential in its query (the names of ``kernel.guards.TOKEN_PARAMS``) is
masked there, and the line carries the request id the refusal's envelope sent; NeuralMind's own
lines come as gunicorn's do, with the time, the pid and the level, INFO included."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest

from kernel.guards import TOKEN_PARAMS
from kernel.retention import before
from tests.support import Server, make_kernel


def raw(port: int, line: bytes) -> tuple[str, dict]:
    """Send ``line`` as a request line; the answer's X-Request-Id and its envelope."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(line + b"\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.decode("latin-1").partition("\r\n\r\n")
    rid = next(h.split(":", 1)[1].strip() for h in head.split("\r\n")
               if h.lower().startswith("x-request-id:"))
    return rid, json.loads(body)["error"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("home"), plugins=["auth"]).start()
    yield server
    server.stop()


def said(server: Server, text: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [line for line in server.output().splitlines() if text in line]
        if lines:
            return lines[0]
        time.sleep(0.05)
    raise AssertionError(f"no log line says {text!r}:\n{server.output()}")


@pytest.mark.parametrize("name", sorted(TOKEN_PARAMS))
def test_a_token_in_a_malformed_request_line_is_masked_in_the_log(server, name):
    # a space in the query (a hand-built URL): gunicorn reads the rest as the HTTP version
    rid, error = raw(server.port, f"GET /v1/projects?q=a b&{name}=QSLEAK7 HTTP/1.1".encode())
    assert error["status"] == 400 and error["request_id"] == rid
    line = said(server, rid)
    assert "[WARNING] Invalid request from ip=127.0.0.1" in line
    assert f"{name}=*** HTTP/1.1' (request {rid})" in line
    assert "QSLEAK7" not in server.output()


def test_a_control_character_in_the_line_is_said_with_the_token_masked(server):
    rid, error = raw(server.port, b"GET /v1/projects?token=QSLEAK6\x00 HTTP/1.1")
    assert error["request_id"] == rid
    assert "Invalid HTTP request line: 'GET /v1/projects?token=*** HTTP/1.1' (request " \
           f"{rid})" in said(server, rid)
    assert "QSLEAK6" not in server.output()


def test_neuralmind_lines_carry_the_time_the_pid_and_the_level(tmp_path):
    home = tmp_path / "home"
    kernel = make_kernel(home, plugins=[])
    try:
        kernel.emit("project.registered")
        with kernel.db.transaction() as conn:
            conn.execute("UPDATE events SET at = ?", (before(400),))
    finally:
        kernel.shutdown()
    server = Server(home, plugins=["auth"]).start()
    try:  # the worker's first prune, an INFO line of the neuralmind.kernel logger
        line = said(server, "pruned 1 events")
    finally:
        server.stop()
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] \[\d+\] \[INFO\] "
                        r"pruned 1 events and 0 finished jobs past their keep", line), line
