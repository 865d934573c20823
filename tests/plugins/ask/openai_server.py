"""A real local HTTP server that speaks the OpenAI chat-completions API, standing in for an
LLM provider (something outside us): it answers by the model name it is asked for.

- ``echo``: a fixed answer citing [1], streamed as three chunks when ``stream`` is true;
- ``slow``: waits ``SLOW_S`` before answering anything;
- ``broken``: 500 with an OpenAI-style error body;
- ``midway``: streams one chunk, then an error chunk;
- ``cut``: streams one chunk, then closes the connection (no ``[DONE]``, no finish).

Every request is kept (path, headers, body) for the test to read."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = ["We use WAL ", "because readers never block writers ", "[1]."]
SLOW_S = 3.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        model = body.get("model")
        if model == "slow":
            time.sleep(SLOW_S)
        if model == "broken":
            return self._json(500, {"error": {"message": "the model ran out of memory",
                                              "type": "server_error"}})
        if not body.get("stream"):
            return self._json(200, {"id": "c1", "object": "chat.completion", "model": model,
                                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                        "role": "assistant", "content": "".join(ANSWER)}}]})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        pieces = ANSWER[:1] if model in ("midway", "cut") else ANSWER
        for piece in pieces:
            self._event({"choices": [{"index": 0, "delta": {"content": piece}}]})
        if model == "midway":
            self._event({"error": {"message": "context length exceeded"}})
        elif model != "cut":
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _event(self, data: dict) -> None:
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        time.sleep(0.02)

    def _json(self, status: int, data: dict) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client that gave up (the slow model's caller timed out) is no error here."""


class OpenAIServer:
    def __init__(self):
        self.httpd = _Quiet(("127.0.0.1", 0), _Handler)
        self.httpd.seen = []
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    @property
    def seen(self) -> list[dict]:
        return self.httpd.seen

    def __enter__(self) -> OpenAIServer:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
