"""Streamed answers whose transport fails part-way, and a write whose connection is dropped:
each fails as every call does (``BrokenAnswer``, ``TimedOut``, ``DaemonNotRunning``), never
with ``http.client``'s own exceptions, and an event stream resumes. The server is a real local
socket server that sends what a proxy or a flaky network leaves of an answer."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

from neuralmind.client import BrokenAnswer, DaemonNotRunning, NeuralMindClient, TimedOut

HEALTH = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}'
PROJECT = (b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n'
           b'{"id":"p_abc"}')
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


class Flaky:
    """Answers /v1/health whole; every other request with one event of a chunked stream, then
    ``then``: "break" (half a chunk, then the connection closed), "stall" (nothing more) or
    "hang up" (no answer at all, the request read)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.then, self.requests = "break", []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            head, _, body = head.partition(b"\r\n\r\n")
            length = re.search(rb"content-length: (\d+)", head, re.I)
            while length and len(body) < int(length.group(1)):
                body += conn.recv(65536)
            if head.startswith(b"GET /v1/health"):
                conn.sendall(HEALTH)
                return
            if head.startswith(b"GET /v1/projects/"):  # the project an ask names, found
                conn.sendall(PROJECT)
                return
            self.requests.append(head.decode())
            if self.then == "hang up":
                return
            seen = len(self.requests)
            conn.sendall(SSE_HEAD + chunk(b"id: %d\nevent: memory.created\ndata: {}\n\n" % seen))
            if self.then == "break":
                conn.sendall(b"40\r\nevent: delta\ndata: {\"te")  # 64 bytes announced
            else:
                time.sleep(3)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def flaky():
    server = Flaky()
    yield server
    server.close()


@pytest.mark.parametrize("then, raised, said", [
    ("break", BrokenAnswer, "sent a broken answer"),
    ("stall", TimedOut, "the answer stopped arriving from"),
])
def test_a_streamed_answer_that_breaks_or_stalls_fails_as_every_call(flaky, then, raised, said):
    """``ask(stream=True)`` raised http.client.IncompleteRead, or the builtin TimeoutError."""
    flaky.then = then
    nm = NeuralMindClient(flaky.url, token="x", timeout=1)
    events = nm.project("p_abc").ask("why?", stream=True, timeout=1)
    with pytest.raises(raised, match=said):
        for _ in events:
            pass


def test_an_event_stream_broken_mid_chunk_resumes_after_its_last_event(flaky):
    """A cut chunk raised IncompleteRead, which is no ConnectionError: the stream never
    reconnected."""
    nm = NeuralMindClient(flaky.url, token="x", timeout=1)
    with nm.events() as stream:
        assert [next(stream).id, next(stream).id] == [1, 2]
    assert "last-event-id: 1" in flaky.requests[1].lower()


def test_a_write_whose_connection_is_dropped_is_no_refusal_of_its_size(flaky):
    """The server read a small body and hung up: the client said "the server stopped reading
    the 14-byte body: it is larger than the server accepts" (413) of a write that may have
    landed."""
    flaky.then = "hang up"
    nm = NeuralMindClient(flaky.url, token="x", timeout=1)
    with pytest.raises(DaemonNotRunning, match="Remote end closed connection"):
        nm.request("POST", "/v1/x", json_body={"title": "t"})
    assert len(flaky.requests) == 1  # a write: sent once
