"""Retries and the error map for statuses the kernel cannot be made to send on demand (503,
400, 412) — against a real local HTTP server that answers as a proxy or an overloaded
server would. Only idempotent requests are retried; a write is never sent twice."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from neuralmind.client import (Conflict, NeuralMindAPIError, NeuralMindClient, RateLimited,
                               Unavailable, ValidationFailed)


class Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next (status, code) of the script, then 200."""

    script: list[tuple[int, str]] = []
    seen: list[str] = []

    def _answer(self):
        self.seen.append(self.command)
        status, code = self.script.pop(0) if self.script else (200, "")
        body = json.dumps({"ok": True} if status < 400 else {"error": {
            "code": code, "message": f"scripted {status}", "status": status,
            "request_id": "r-1", "details": {}}}).encode()
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status in (429, 503):
            self.send_header("Retry-After", "7")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = do_PATCH = _answer

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def nm(server, monkeypatch):
    monkeypatch.setattr("neuralmind.client.BACKOFF_S", 0.01)
    Scripted.script, Scripted.seen = [], []
    return NeuralMindClient(server, token="t")


def test_idempotent_get_is_retried_through_503(nm):
    Scripted.script = [(503, "unavailable"), (503, "unavailable")]
    assert nm.health() == {"ok": True}
    assert Scripted.seen == ["GET"] * 3


def test_503_that_persists_raises_unavailable(nm):
    Scripted.script = [(503, "unavailable")] * 4
    with pytest.raises(Unavailable) as info:
        nm.health()
    assert info.value.status == 503 and len(Scripted.seen) == 4


def test_a_write_is_never_retried(nm):
    Scripted.script = [(503, "unavailable")]
    with pytest.raises(Unavailable):
        nm.request("POST", "/v1/x", json_body={})
    assert Scripted.seen == ["POST"]


def test_marked_idempotent_post_is_retried(nm):
    Scripted.script = [(503, "unavailable")]
    assert nm.request("POST", "/v1/search", json_body={}, idempotent=True).json() == {"ok": True}
    assert Scripted.seen == ["POST", "POST"]


@pytest.mark.parametrize("status,cls", [(400, ValidationFailed), (412, Conflict),
                                        (409, Conflict), (429, RateLimited), (418, NeuralMindAPIError)])
def test_status_maps_to_class(nm, status, cls):
    Scripted.script = [(status, "some_code")]
    with pytest.raises(cls) as info:
        nm.request("POST", "/v1/x", json_body={})
    err = info.value
    assert type(err) is cls
    assert (err.status, err.code, err.request_id) == (status, "some_code", "r-1")
    if cls is RateLimited:
        assert err.retry_after == 7.0
