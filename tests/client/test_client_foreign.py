"""What is not NeuralMind, said as such in one line: an error page of another web server at
the address (it was a NotFound holding 200 bytes of the page, ten lines of HTML in the CLI),
and a URL no request can carry (a space in the host was accepted, then every call said the
server sent a broken answer, though nothing was sent)."""

from __future__ import annotations

import re

import pytest

from neuralmind.client import BrokenAnswer, NeuralMindClient, NotAServerURL
from tests.support import QuietHandler, http_server, run_cli

HTML = ("text/html;charset=utf-8",
        b"<!DOCTYPE HTML>\n<html>\n<head><title>Error response</title></head>\n"
        b"<body><h1>Error response</h1><p>Error code: 404</p></body>\n</html>\n")


class OtherServer(QuietHandler):
    """Another web server: every request answered ``status`` with ``content_type`` and
    ``body``."""

    status, content_type, body = 404, *HTML
    seen: list[str] = []

    def _answer(self):
        self.seen.append(self.command)
        self.reply(self.status, self.content_type, self.body)

    do_GET = do_POST = _answer


@pytest.fixture(scope="module")
def other():
    with http_server(OtherServer) as url:
        yield url


@pytest.fixture
def answer(monkeypatch):
    """Set what the other server answers next: ``answer(status, content_type, body)``."""
    monkeypatch.setattr("neuralmind.client.BACKOFF_S", 0.01)
    OtherServer.seen = []

    def set_to(status: int, content_type: str | None, body: bytes) -> None:
        monkeypatch.setattr(OtherServer, "status", status)
        monkeypatch.setattr(OtherServer, "content_type", content_type)
        monkeypatch.setattr(OtherServer, "body", body)
    return set_to


@pytest.mark.parametrize("status, content_type, body, said", [
    (404, *HTML, r"a body that is not JSON \(text/html;charset=utf-8\)"),
    (404, "application/json", b'{"detail": "Not Found"}',
     r"a body that is JSON but no error envelope \(application/json\)"),
    (502, None, b"", r"an empty body \(no Content-Type\)"),
])
def test_an_error_status_from_another_server_is_a_broken_answer(other, answer, status,
                                                                 content_type, body, said):
    answer(status, content_type, body)
    with pytest.raises(BrokenAnswer, match=rf"^the server at {other} answered {status} with "
                                           rf"{said}: is it NeuralMind\?$"):
        NeuralMindClient(other, token="x").health()
    assert OtherServer.seen == ["GET"]  # a definite answer: asking again would bring the same


def test_another_servers_503_page_is_retried_then_a_broken_answer(other, answer):
    """A proxy's 503 page while the server behind it restarts: retried as a 503 always was."""
    answer(503, "text/html", b"<html>Service Unavailable</html>")
    with pytest.raises(BrokenAnswer, match=r"answered 503 with a body that is not JSON"):
        NeuralMindClient(other, token="x").health()
    assert OtherServer.seen == ["GET"] * 4


def test_the_cli_says_another_servers_error_page_in_one_line(other, answer, tmp_path):
    answer(404, *HTML)
    code, out, err = run_cli("memory", "list", "--url", other, "--token", "x", "--project",
                             "p_aaaaaaaaaaaa", env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (1, "")
    assert err == (f"neuralmind: the server at {other} answered 404 with a body that is not "
                   "JSON (text/html;charset=utf-8): is it NeuralMind?\n")


@pytest.mark.parametrize("url, why", [
    ("http://ex ample.com:8765", r"it holds ' ' \(a space or control character\)"),
    ("http://127.0.0.1:8765/\n", r"it holds '\\n' \(a space or control character\)"),
    ("http://127.0.0.1:8765/\x7f", r"it holds '\\x7f' \(a space or control character\)"),
])
def test_a_url_no_request_can_carry_is_refused_when_the_client_is_made(url, why, tmp_path):
    shown = re.escape(url if url.isprintable() else repr(url))  # one line
    with pytest.raises(NotAServerURL, match=rf"^{shown} \(given\) is not a server URL such as "
                                            rf"http://127\.0\.0\.1:8765: {why}$"):
        NeuralMindClient(url, token="t", home=tmp_path)


def test_the_cli_refuses_a_url_with_a_space_as_a_usage_error(tmp_path):
    code, out, err = run_cli("project", "list", "--url", "http://x y", "--token", "x",
                             env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (2, "")
    assert err == ("neuralmind: http://x y (given) is not a server URL such as "
                   "http://127.0.0.1:8765: it holds ' ' (a space or control character)\n")
