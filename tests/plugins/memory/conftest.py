"""Fixtures of the memory tests: one server per module (in this process), projects made on it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import LocalServer, Server

PLUGINS = ["auth", "memory"]


def start(home: Path, *, serving: bool = False, **kw) -> LocalServer | Server:
    """The auth and memory plugins on ``home``: in this process, or under gunicorn
    (``serving=True``, with ``workers``, ``env``) for what is about workers."""
    kw.setdefault("plugins", PLUGINS)
    return (Server if serving else LocalServer)(home, **kw).start()


class Api:
    """A project's memory routes on a running server."""

    def __init__(self, server: LocalServer | Server, project_dir: Path):
        self.server = server
        self.dir = project_dir
        self.pid = server.register(project_dir)
        self.base = f"/v1/projects/{self.pid}/memories"

    def create(self, **fields):
        fields.setdefault("title", "A decision")
        fields.setdefault("rationale", "Because it was measured")
        r = self.server.post(self.base, fields)
        assert r.status == 201, r.body
        return r.json

    def url(self, mid: str = "", tail: str = "") -> str:
        return self.base + (f"/{mid}" if mid else "") + (f"/{tail}" if tail else "")

    def history(self, mid: str) -> list[dict]:
        r = self.server.get(self.url(mid, "history") + "?limit=200")
        assert r.status == 200, r.body
        return r.json["items"]

    def search(self, query: str, **kw):
        r = self.server.post(self.url(tail="search"), {"query": query, **kw})
        assert r.status == 200, r.body
        return r.json


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start(tmp_path_factory.mktemp("memory-home"))
    yield srv
    srv.stop()


@pytest.fixture
def api(server, tmp_path) -> Api:
    """A fresh project (an empty directory) on the module's server."""
    path = tmp_path / "proj"
    path.mkdir()
    return Api(server, path)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), "-c", "user.email=t@example.com",
                           "-c", "user.name=t", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()
