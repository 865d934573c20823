"""In-process kernels for the MCP tests: the default plugins behind ``falcon.testing``, as a
loopback daemon or as a team server with per-role tokens and two projects. JSON-RPC goes to
``POST /v1/mcp`` through the kernel's own WSGI app."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import falcon.testing
import pytest

from kernel.app import Kernel
from kernel.config import load_settings
from plugins.auth.tokens import TokenFile
from tests.support import SharedModel

PLUGINS = ["auth", "memory", "index", "mcp", "ask"]
VERSION = "2025-06-18"


class App:
    """A kernel and an MCP client of it, holding one token and (after ``open``) a session."""

    def __init__(self, kernel: Kernel, token: str):
        self.kernel, self.token = kernel, token
        self.http = falcon.testing.TestClient(kernel.app, headers={"Host": "127.0.0.1"})
        self.ids = itertools.count(1)
        self.session: str | None = None

    def as_(self, token: str) -> App:
        return App(self.kernel, token)

    def headers(self, **extra: str) -> dict[str, str]:
        h = {"Authorization": f"Bearer {self.token}", "MCP-Protocol-Version": VERSION}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        return {**h, **extra}

    def post(self, body: Any, query: str | None = None, **headers: str):
        return self.http.simulate_post("/v1/mcp", json=body, query_string=query,
                                       headers=self.headers(**headers))

    def rpc(self, method: str, params: dict | None = None, **headers: str) -> dict:
        """One request; the JSON-RPC response (``result`` or ``error``)."""
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method}
        if params is not None:
            body["params"] = params
        r = self.post(body, **headers)
        assert r.status_code == 200, r.text
        return r.json

    def open(self) -> App:
        r = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
        assert r.status_code == 200, r.text
        self.session = r.headers["mcp-session-id"]
        return self

    def call(self, tool: str, **arguments: Any) -> dict:
        """``tools/call``: the CallToolResult."""
        reply = self.rpc("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in reply, reply
        return reply["result"]

    def v1(self, method: str, path: str, **kw):
        return self.http.simulate_request(method, path, headers={
            "Authorization": f"Bearer {self.token}"}, **kw)


def _kernel(home: Path, **overrides) -> Kernel:
    settings = load_settings(None, kernel={"home": str(home), "plugins": PLUGINS},
                             embeddings={"warm": False}, **overrides)
    return Kernel(settings, load_entrypoints=False, extra_plugins=[SharedModel()])


def repo_with_code(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "wal.py").write_text('def open_wal(path):\n    """Open the database in WAL mode."""\n'
                                 '    return path\n')
    return path


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """A loopback kernel with one registered project (``local.project``)."""
    root = tmp_path_factory.mktemp("mcp-local")
    kernel = _kernel(root / "home")
    app = App(kernel, (kernel.home / "token").read_text().strip())
    r = app.v1("POST", "/v1/projects", json={"path": str(repo_with_code(root / "repo"))})
    app.project = r.json["id"]
    yield app
    kernel.shutdown()


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A team server (server mode) with projects ``a`` and ``b`` and tokens by role:
    ``team.tokens[role]`` reach both, ``team.only_a[role]`` reach ``a``."""
    root = tmp_path_factory.mktemp("mcp-team")
    projects = [{"id": pid, "path": str(repo_with_code(root / f"repo-{pid}"))} for pid in "ab"]
    kernel = _kernel(root / "home", server={"allow_remote": True}, projects=projects,
                     auth={"rate_limits": {"default": {"rate": 10000, "burst": 10000}}})
    tokens = TokenFile(kernel.home / "tokens.json")
    app = App(kernel, "")
    app.tokens = {r: tokens.create(f"{r}-all", r, "*")[0] for r in ("reader", "builder", "admin")}
    app.only_a = {r: tokens.create(f"{r}-a", r, ["a"])[0] for r in ("reader", "builder")}
    yield app
    kernel.shutdown()


def jsonrpc(method, params=None, id=1) -> dict:
    """A JSON-RPC request as a client sends it."""
    body = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    return body
