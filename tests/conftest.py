"""Shared fixtures. Servers bind 127.0.0.1 on ports the tests pick; state lives in tmp dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import Server

SHARED = Path(__file__).resolve().parents[2] / "shared"
EVAL = Path(os.environ.get("NEURALMIND_EVAL_DIR", SHARED / "eval"))


@pytest.fixture
def home(tmp_path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def make_server(tmp_path):
    """Start servers with ``make_server(plugins=[...], config=..., workers=N)``; all stopped after."""
    started: list[Server] = []

    def make(**kw) -> Server:
        kw.setdefault("plugins", ["auth"])
        server = Server(kw.pop("home", tmp_path / f"home{len(started)}"), **kw)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def repo(tmp_path) -> Path:
    """An empty project directory (not a git repository)."""
    path = tmp_path / "repo"
    path.mkdir()
    return path
