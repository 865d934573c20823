"""A webhook receiver for tests: a real HTTP server on 127.0.0.1 in a thread, something
outside us, as a team's service would be. It checks every delivery's signature with the
client's ``verify_signature``, records what arrived, and answers as it is told (a status,
a delay longer than the sender's timeout, a redirect)."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from neuralmind.client import verify_signature


@dataclass(frozen=True)
class Received:
    delivery: str
    event: str
    timestamp: str
    signature: str
    body: bytes
    verified: bool
    answered: int

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def ok(self) -> bool:
        return 200 <= self.answered < 300


class Receiver:
    def __init__(self, path: str = "/hook", idle_timeout: float | None = None,
                 tls: ssl.SSLContext | None = None):
        """``idle_timeout``: close a kept-alive connection left idle this long, as servers do;
        ``tls``: serve https with this context."""
        self.path = path
        self.connections: set[int] = set()  # the sender's source ports: one per connection
        self.secret: str | None = None
        self.received: list[Received] = []
        self.headers: list[dict[str, str]] = []
        self._script: deque[tuple[int, float]] = deque()  # answers for the next requests
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # the answer's body is not held back 40 ms
            protocol_version = "HTTP/1.1"  # keep-alive, as most services answer
            timeout = idle_timeout

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if len(body) < length:  # the sender died mid-request: a service drops it
                    self.close_connection = True
                    return
                receiver._take(self, body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def answer(self, status: int, times: int = 1, delay: float = 0.0) -> None:
        """Answer the next ``times`` deliveries with ``status`` after ``delay`` seconds."""
        with self._lock:
            self._script.extend([(status, delay)] * times)

    def reset(self) -> None:
        """Answer 200 from now on."""
        with self._lock:
            self._script.clear()

    def _take(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        with self._lock:
            status, delay = self._script.popleft() if self._script else (200, 0.0)
        headers = dict(handler.headers.items())
        verified = self.secret is not None and verify_signature(self.secret, body, headers)
        if delay:
            time.sleep(delay)
        record = Received(headers.get("NeuralMind-Delivery", ""),
                          headers.get("NeuralMind-Event", ""),
                          headers.get("NeuralMind-Timestamp", ""),
                          headers.get("NeuralMind-Signature", ""), body, verified, status)
        with self._lock:
            self.received.append(record)
            self.headers.append(headers)
            self.connections.add(handler.client_address[1])
        try:
            handler.send_response(status)
            if 300 <= status < 400:
                handler.send_header("Location", "http://127.0.0.1:1/elsewhere")
            handler.send_header("Content-Length", "2")
            handler.end_headers()
            handler.wfile.write(b"ok")
        except OSError:  # the sender gave up waiting (a timeout test)
            pass

    def taken(self) -> list[Received]:
        """What was answered 2xx, in arrival order."""
        with self._lock:
            return [r for r in self.received if r.ok]

    def wait_received(self, count: int, timeout: float = 15.0) -> list[Received]:
        """Every request answered so far, once there are ``count`` (whatever they were answered)."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            assert time.monotonic() < deadline, f"{len(self.received)} of {count} requests"
            time.sleep(0.02)
        with self._lock:
            return list(self.received)

    def wait(self, count: int, timeout: float = 15.0, kind: str | None = None) -> list[Received]:
        """The first ``count`` deliveries answered 2xx (of ``kind``), waiting for them."""
        deadline = time.monotonic() + timeout
        while True:
            got = [r for r in self.taken() if kind is None or r.event == kind]
            if len(got) >= count:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(got)} of {count} deliveries arrived in {timeout} s: "
                                     f"{[(r.event, r.answered) for r in self.received]}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
