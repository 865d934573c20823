"""Servers for the client tests. The client library's tests talk to the bundled plugins
served from this process (``served``, one per module; the client takes its URL and token).
What is about the daemon — discovery, autostart, `neuralmind up`, the CLI as a subprocess,
the docs' walkthroughs — uses a real local daemon, started the way a user starts it
(`neuralmind daemon start` in the background, in a temporary NEURALMIND_HOME) and stopped
with `neuralmind daemon stop`: one for the session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DEFAULT_PLUGINS, ROOT, LocalServer, free_port, pythonpath, seed_models


class Daemon:
    """The environment a user has: NEURALMIND_HOME, a config with a free port, and a
    `neuralmind` command run as a subprocess in that environment."""

    def __init__(self, base: Path, plugins: list[str] | None = None):
        self.home = base / "home"
        self.home.mkdir(parents=True)
        seed_models(self.home)
        self.port = free_port()
        self.plugins = plugins if plugins is not None else list(DEFAULT_PLUGINS)
        self.config = base / "neuralmind.toml"
        # a 1 s heartbeat lets the server notice a closed event stream at once, so
        # `daemon stop` need not wait out gunicorn's graceful timeout
        self.config.write_text(f'[kernel]\nplugins = {json.dumps(self.plugins)}\n'
                               f'sse_heartbeat_s = 1\n[server]\nport = {self.port}\n')
        self.env = {**os.environ, "NEURALMIND_HOME": str(self.home),
                    "NEURALMIND_CONFIG": str(self.config), "PYTHONPATH": pythonpath()}
        for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN", "NEURALMIND_PLUGINS"):
            self.env.pop(key, None)

    def run(self, *args: str, cwd: Path | None = None, input: str | None = None,
            check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "neuralmind.cli", *args], cwd=cwd or ROOT,
                              env=self.env, capture_output=True, text=True, input=input,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"neuralmind {' '.join(args)} → {proc.returncode}\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def start(self) -> Daemon:
        self.run("daemon", "start", check=True)
        return self

    def stop(self) -> None:
        self.run("daemon", "stop")

    @property
    def info(self) -> dict:
        return json.loads((self.home / "daemon.json").read_text())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    def client(self, **kw):
        from neuralmind.client import NeuralMindClient
        return NeuralMindClient(home=self.home, **kw)


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("daemon")).start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The bundled plugins served from this process."""
    with LocalServer(tmp_path_factory.mktemp("served") / "home", plugins=DEFAULT_PLUGINS) as server:
        yield server


def client_of(server: LocalServer, **kw):
    """A client of ``server`` by URL and token, as a remote user configures one."""
    from neuralmind.client import NeuralMindClient
    kw.setdefault("token", server.token)
    return NeuralMindClient(server.url, **kw)


@pytest.fixture
def nm(served):
    return client_of(served)


def needs(nm, route: str) -> None:
    """Fail unless the server ``nm`` talks to serves ``route``: a plugin that did not mount
    is a failure, never a skip."""
    paths = nm.openapi()["paths"]
    if route not in paths:
        pytest.fail(f"{route} is not served at {nm.url}: its plugin did not mount")


def git_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=path, env=env, check=True, capture_output=True)
    return path
