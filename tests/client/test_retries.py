"""Retries and the error map for statuses the kernel cannot be made to send on demand (503,
400, 412), and for answers no HTTP server sends — against a real local HTTP server that
answers as a proxy, an overloaded server or another service would. Only idempotent requests
are retried; a write is never sent twice."""

from __future__ import annotations

import http.client
import json

import pytest

from neuralmind.client import (BrokenAnswer, Conflict, NeuralMindAPIError, NeuralMindClient,
                               RateLimited, Unavailable, ValidationFailed)
from tests.support import QuietHandler, http_server, run_cli

NOT_HTTP = b"garbage not http\r\n"
CUT_SHORT = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n"
             + b'{"ok": true, "x": 1}'[:19])  # 19 bytes of the 20 announced, then closed
WEB_PAGE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 15\r\n\r\n"
            b"<html>hi</html>")


class Scripted(QuietHandler):
    """Answers each request with the next step of the script — a (status, code), or bytes
    written as they are before the connection is closed — then 200."""

    script: list[tuple[int, str] | bytes] = []
    seen: list[str] = []

    def _answer(self):
        self.seen.append(self.command)
        step = self.script.pop(0) if self.script else (200, "")
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if isinstance(step, bytes):
            self.wfile.write(step)
            self.close_connection = True
            return
        status, code = step
        body = json.dumps({"ok": True} if status < 400 else {"error": {
            "code": code, "message": f"scripted {status}", "status": status,
            "request_id": "r-1", "details": {}}}).encode()
        self.reply(status, "application/json", body,
                   {"Retry-After": "7"} if status in (429, 503) else None)

    do_GET = do_POST = do_DELETE = do_PATCH = _answer


@pytest.fixture(scope="module")
def server():
    with http_server(Scripted) as url:
        yield url


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


@pytest.mark.parametrize("code", ["storage_read_only", "storage_newer", "semantic_unavailable"])
def test_a_503_no_retry_helps_is_raised_at_once(nm, code):
    """A read-only state, data of a newer release, no model: three more tries changed nothing
    but the wait."""
    Scripted.script = [(503, code)] * 4
    with pytest.raises(Unavailable) as info:
        nm.health()
    assert info.value.code == code and Scripted.seen == ["GET"]


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


@pytest.mark.parametrize("answer, said, cause", [
    (NOT_HTTP, r"did not answer with HTTP \(it sent 'garbage not http'\)", http.client.BadStatusLine),
    (CUT_SHORT, r"sent a broken answer \(its body ended after 19 bytes, 1 more expected\)",
     http.client.IncompleteRead),
])
def test_an_answer_no_http_server_sends_is_broken_answer(nm, server, answer, said, cause):
    """It was http.client's own exception, a traceback to the user."""
    Scripted.script = [answer] * 4
    with pytest.raises(BrokenAnswer, match=rf"^GET /v1/health: the server at {server} {said}$"
                       ) as info:
        nm.health()
    assert isinstance(info.value.__cause__, cause)
    assert Scripted.seen == ["GET"] * 4  # a read is retried: the next answer may be whole


def test_a_write_answered_brokenly_is_never_sent_again(nm):
    """The server read it: the write may have landed."""
    Scripted.script = [CUT_SHORT]
    with pytest.raises(BrokenAnswer, match="sent a broken answer"):
        nm.request("POST", "/v1/x", json_body={})
    assert Scripted.seen == ["POST"]


def test_a_read_answered_brokenly_once_succeeds_when_retried(nm):
    Scripted.script = [NOT_HTTP]
    assert nm.health() == {"ok": True} and Scripted.seen == ["GET", "GET"]


@pytest.mark.parametrize("answer, said", [(NOT_HTTP, "did not answer with HTTP"),
                                          (CUT_SHORT, "sent a broken answer")])
def test_the_cli_says_in_one_line_that_the_answer_was_broken(nm, server, tmp_path, answer, said):
    Scripted.script = [answer] * 4
    code, out, err = run_cli("memory", "list", "--url", server, "--token", "x",
                             env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (1, "")
    assert err.startswith("neuralmind: GET /v1/projects") and err.count("\n") == 1
    assert f"the server at {server} {said}" in err


def test_a_web_page_where_the_server_should_be_is_said_in_one_line(nm, server, tmp_path):
    """An address that serves some other web site answers 200 with HTML: the decoder's
    JSONDecodeError was a traceback."""
    Scripted.script = [WEB_PAGE]
    with pytest.raises(BrokenAnswer, match=rf"^the server at {server} answered 200 with a body "
                       r"that is not JSON \(text/html\): is it NeuralMind\?$"):
        nm.health()
    Scripted.script = [WEB_PAGE] * 2
    code, out, err = run_cli("memory", "list", "--url", server, "--token", "x",
                             env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert err.startswith(f"neuralmind: the server at {server} answered 200")
