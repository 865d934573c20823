"""Test harness: a real server process (gunicorn through ``neuralmind serve``) on a free
loopback port, and a small HTTP client that shows status, headers and the parsed body."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ["auth", "memory", "index"]  # the default plugins, as a fresh install runs them


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        return self.json["error"]


def request(port: int, method: str, path: str, *, json_body: Any = None, body: bytes | None = None,
            headers: dict[str, str] | None = None, token: str | None = None, timeout: float = 60,
            tls_context=None, host: str = "127.0.0.1") -> Response:
    headers = dict(headers or {})
    headers.setdefault("Host", f"127.0.0.1:{port}")
    if token is not None:
        headers.setdefault("Authorization", f"Bearer {token}")
    if json_body is not None:
        body = json.dumps(json_body).encode()
        headers.setdefault("Content-Type", "application/json")
    if tls_context is not None:
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=tls_context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


class KeepAlive:
    """One keep-alive connection, as an agent's client holds it (the benches use it)."""

    def __init__(self, port: int, token: str, timeout: float = 120):
        self.port, self.token, self.timeout = port, token, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Host": f"127.0.0.1:{self.port}", "Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):  # the server drops a connection left idle (keep-alive timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                if attempt:
                    raise
        raise AssertionError("unreachable")


class Server:
    """``neuralmind serve`` (or ``daemon start --foreground``) as a child process."""

    def __init__(self, home: Path, *, config: str | None = None, plugins: list[str] | None = None,
                 workers: int = 1, env: dict[str, str] | None = None, args: list[str] = (),
                 daemon: bool = False, port: int | None = None):
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.env = {**os.environ, "NEURALMIND_HOME": str(self.home), "PYTHONUNBUFFERED": "1",
                    **(env or {})}
        self.env.pop("NEURALMIND_CONFIG", None)
        self.env.setdefault("NEURALMIND_EMBEDDINGS_WARM", "0")  # tests that need the model ask
        if plugins is not None:
            self.env["NEURALMIND_PLUGINS"] = ",".join(plugins)
        cmd = [sys.executable, "-m", "neuralmind.cli"]
        if daemon:
            cmd += ["daemon", "start", "--foreground", "--port", str(self.port)]
        else:
            cmd += ["serve", "--port", str(self.port), "--workers", str(workers)]
        if config is not None:
            cfg = self.home / "config.toml"
            cfg.write_text(config)
            cmd += ["--config", str(cfg)]
        self.cmd = cmd + list(args)
        self.log = open(self.home / f"server-{self.port}.log", "wb")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Server:
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.output()}")
            try:
                if request(self.port, "GET", "/v1/health", timeout=5).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not answer in {timeout} s:\n{self.output()}")

    def output(self) -> str:
        self.log.flush()
        return (self.home / f"server-{self.port}.log").read_text(errors="replace")

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    def request(self, method: str, path: str, *, auth: bool = True, **kw) -> Response:
        if auth and "token" not in kw:
            kw["token"] = self.token
        return request(self.port, method, path, **kw)

    def get(self, path: str, **kw) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, json_body: Any = None, **kw) -> Response:
        return self.request("POST", path, json_body=json_body, **kw)

    def patch(self, path: str, json_body: Any = None, **kw) -> Response:
        return self.request("PATCH", path, json_body=json_body, **kw)

    def delete(self, path: str, **kw) -> Response:
        return self.request("DELETE", path, **kw)

    def register(self, path: Path | str) -> str:
        r = self.post("/v1/projects", {"path": str(path)})
        assert r.status in (200, 201), r.body
        return r.json["id"]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()

    def __enter__(self) -> Server:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
