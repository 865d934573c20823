"""A discovery file counts only while the daemon it names holds the home: after a crash (the
file stays, any program may take its port) or in a copy of a running daemon's home, the client
and the CLI send nothing there — never the home's token; a home renamed under its daemon is
named as such; a URL refused for its credentials is echoed with the password masked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from neuralmind.client import DaemonNotRunning, NeuralMindClient, NotAServerURL
from tests.client.conftest import Daemon
from tests.support import QuietHandler, http_server, run_cli

class Capture(QuietHandler):
    """Another local user's program on the port a crashed daemon freed: it keeps what it gets."""

    seen: list[str] = []

    def do_GET(self):
        Capture.seen.append(f"{self.path} {self.headers.get('Authorization')}")
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


@pytest.fixture
def stale(tmp_path, monkeypatch):
    """A home whose daemon crashed: its token and daemon.json are left, and another program
    listens at the file's address. Yields the home."""
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr("neuralmind.client.BACKOFF_S", 0.01)
    Capture.seen = []
    home = tmp_path / "home"
    home.mkdir()
    (home / "token").write_text("nm_the_home_token\n")
    pid = dead_pid()
    (home / ".daemon.lock").write_text(str(pid))  # the crashed daemon's, held by nobody now
    with http_server(Capture) as url:
        (home / "daemon.json").write_text(json.dumps({
            "host": "127.0.0.1", "port": int(url.rsplit(":", 1)[1]), "pid": pid, "url": url,
            "token": "nm_the_home_token", "home": str(home)}))
        yield home


def test_the_client_sends_nothing_to_the_address_a_crashed_daemon_left(stale):
    nm = NeuralMindClient(home=stale)
    assert (nm.url, nm.token) == (None, None)
    with pytest.raises(DaemonNotRunning) as ex:
        nm.health()
    assert str(ex.value) == (
        f"no NeuralMind daemon found: {stale / 'daemon.json'} is stale: the daemon it names does "
        f"not hold {stale} (it exited, or the home was copied from under it). Start one with "
        "`neuralmind daemon start` (or set NEURALMIND_API_URL)")
    assert Capture.seen == []


def test_the_cli_sends_nothing_to_the_address_a_crashed_daemon_left(stale):
    code, out, err = run_cli("project", "list", env={"NEURALMIND_HOME": str(stale)})
    assert (code, out) == (1, "")
    assert "is stale" in err and "neuralmind daemon start" in err
    assert "nm_the_home_token" not in err
    assert Capture.seen == []


def test_autostart_starts_the_homes_own_daemon_over_a_stale_file(tmp_path, monkeypatch):
    """`neuralmind mcp` and `ui` autostart: a stale file no longer stands for a daemon, so the
    home's own daemon is started, and the program on the old port gets nothing."""
    d = Daemon(tmp_path, plugins=["auth"])
    for key, value in d.env.items():
        if key.startswith("NEURALMIND"):
            monkeypatch.setenv(key, value)
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    Capture.seen = []
    with http_server(Capture) as url:
        (d.home / "daemon.json").write_text(json.dumps({
            "host": "127.0.0.1", "port": int(url.rsplit(":", 1)[1]), "pid": dead_pid(),
            "url": url}))
        (d.home / "token").write_text("nm_the_home_token\n")
        try:
            nm = NeuralMindClient(autostart=True)
            assert nm.url == d.url and nm.health()["status"] == "ok"
            assert nm.projects.page().items == []  # the daemon's token, accepted
        finally:
            d.stop()
    assert Capture.seen == []


def test_a_copy_of_a_running_daemons_home_is_not_served_by_it(tmp_path, monkeypatch):
    """The copy's daemon.json names the original's daemon, which holds the original alone: a
    call on the copy never reaches it (it wrote the copy's work into the original)."""
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    d = Daemon(tmp_path / "a", plugins=["auth"]).start()
    try:
        copy = tmp_path / "copy"
        shutil.copytree(d.home, copy)
        assert json.loads((copy / "daemon.json").read_text())["url"] == d.url
        with pytest.raises(DaemonNotRunning, match=r"daemon\.json is stale: the daemon it names "
                                                   rf"does not hold {copy} "):
            NeuralMindClient(home=copy).health()
        assert d.client().health()["status"] == "ok"
    finally:
        d.stop()


def test_a_home_renamed_under_its_daemon_is_said_so(tmp_path, monkeypatch):
    """The daemon still holds the renamed home but reads its token at the old path, and
    answered every call 401 "invalid token": the client and the CLI say to restart it."""
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    d = Daemon(tmp_path, plugins=["auth"]).start()
    old, moved = d.home, tmp_path / "moved"
    pid = d.info["pid"]
    os.rename(old, moved)
    d.home, d.env["NEURALMIND_HOME"] = moved, str(moved)
    try:
        said = (f"the daemon holding {moved} (pid {pid}) serves it as {old}: the home was moved "
                "while the daemon ran — restart it (`neuralmind daemon stop`, then `neuralmind "
                "daemon start`)")
        with pytest.raises(DaemonNotRunning) as ex:
            NeuralMindClient(home=moved).health()
        assert str(ex.value) == said
        cli = d.run("project", "list")
        assert (cli.returncode, cli.stderr) == (1, f"neuralmind: {said}\n")
    finally:
        stopped = d.run("daemon", "stop")
    assert stopped.stdout == "daemon stopped\n"


@pytest.mark.parametrize("url", ["http://user:PWSECRET@127.0.0.1:8765",
                                 "http://user:PWSECRET@[::1", "user:PWSECRET@127.0.0.1:8765"])
def test_a_url_refused_is_named_without_its_password(url, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURALMIND_API_URL", url)
    with pytest.raises(NotAServerURL) as ex:
        NeuralMindClient(home=tmp_path)
    assert "PWSECRET" not in str(ex.value) and "user:***@" in str(ex.value)
    assert "(from NEURALMIND_API_URL)" in str(ex.value)
    code, _, err = run_cli("project", "list", env={"NEURALMIND_HOME": str(tmp_path),
                                                   "NEURALMIND_API_URL": url})
    assert code != 0 and "PWSECRET" not in err and "user:***@" in err
