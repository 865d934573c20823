"""A daemon started by a NeuralMind from before daemons held their home (``.daemon.lock``) and
still running after an upgrade: `status`, `start`, `up`, `mcp` and the client name it (a second
daemon would migrate the home's files under it), `stop` stops it and only then removes its
file. A file whose pid is dead, is another process's now, or names a daemon of today (a copied
home) stays stale. The old daemon is stood in for by a real local HTTP server process that
answers ``/v1/health`` as those builds did, its pid in a discovery file of their format."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from kernel import daemon
from neuralmind.client import DaemonNotRunning, NeuralMindClient
from tests.support import run_cli

pytestmark = pytest.mark.sqlite_only("the daemon's processes and files, started by hand here")

# what /v1/health answered in 776a27b and in 91463a6: public, no token needed
HEALTH_776 = {"status": "ok", "version": "5.0.0.dev0", "uptime_s": 191.2}
HEALTH_914 = {"ok": True, "status": "ok", "api_version": "1", "version": "5.0.0.dev0",
              "uptime_s": 4.7}

STAND_IN = r"""
import json, os, signal, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
health, seen, discovery = sys.argv[1:]

class Old(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(seen, "a") as f:
            f.write(f"{self.path} {self.headers.get('Authorization')}\n")
        body = health.encode() if self.path == "/v1/health" and health else b"{}"
        self.send_response(200 if body != b"{}" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

def stopping(*_):  # as gunicorn's graceful stop: it takes a moment
    with open(seen, "a") as f:
        f.write(f"SIGTERM, daemon.json there: {os.path.exists(discovery)}\n")
    time.sleep(0.3)
    os._exit(0)

signal.signal(signal.SIGTERM, stopping)
if os.environ.get("STAND_IN_WORKER"):  # a worker holding the home's database, as gunicorn's
    import subprocess
    subprocess.Popen([sys.executable, "-c", "import os, sys, time\n"
                      "held = open(sys.argv[1], 'ab')\n"
                      "while os.getppid() == int(sys.argv[2]): time.sleep(0.05)",
                      os.environ["STAND_IN_WORKER"], str(os.getpid())])
server = HTTPServer(("127.0.0.1", 0), Old)
print(server.server_address[1], flush=True)
server.serve_forever(poll_interval=0.05)
"""


class StandIn:
    """The old daemon's process: a real HTTP server, reaped here once it exits."""

    def __init__(self, tmp_path, health: dict | None, foreground: bool = False):
        """``foreground``: run as `daemon start --foreground` ran it (its output on a terminal
        or a journal, not the home's daemon.log), the home's database held by its worker."""
        self.seen = tmp_path / "seen.log"
        self.seen.write_text("")
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        env = {**os.environ, **({"STAND_IN_WORKER": str(self.home / "kernel.db")}
                                if foreground else {})}
        with open(tmp_path / "terminal.log" if foreground else self.home / "daemon.log",
                  "ab") as log:  # a detached daemon kept its log open
            self.proc = subprocess.Popen(
                [sys.executable, "-c", STAND_IN, json.dumps(health) if health else "",
                 str(self.seen), str(self.home / "daemon.json")], stdout=subprocess.PIPE,
                stderr=log, text=True, env=env)
        self.port = int(self.proc.stdout.readline())
        threading.Thread(target=self.proc.wait, daemon=True).start()  # no zombie left

    def old_file(self, pid: int | None = None, **more) -> dict:
        """The discovery file as 776a27b and 91463a6 wrote it: no ``code``, no ``home``."""
        info = {"host": "127.0.0.1", "port": self.port, "pid": pid or self.proc.pid,
                "version": "5.0.0.dev0", "started_at": "2026-12-03T08:33:37Z",
                "url": f"http://127.0.0.1:{self.port}", "token": "nm_the_old_daemons_token",
                **more}
        (self.home / "daemon.json").write_text(json.dumps(info, indent=2))
        return info

    def requests(self) -> list[str]:
        return self.seen.read_text().splitlines()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def old(tmp_path, monkeypatch):
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    standin = StandIn(tmp_path, HEALTH_776)
    try:
        yield standin
    finally:
        standin.close()


def cli(home, *argv):
    return run_cli(*argv, env={"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth,mcp",
                               "NEURALMIND_EMBEDDINGS_WARM": "0"})


def said(standin) -> str:
    return (f"a daemon of an older NeuralMind serves {standin.home} (pid {standin.proc.pid}, "
            f"at http://127.0.0.1:{standin.port}): it does not hold the home as this "
            "NeuralMind's daemons do, and none may start beside it — stop it with "
            "`neuralmind daemon stop`, then start this one (`neuralmind daemon start`)")


def test_status_start_and_up_name_the_older_daemon_and_start_none_beside_it(old):
    """status said "not running"; start and up started a second daemon, which migrated the
    home's files under the old one."""
    info = old.old_file()
    file = (old.home / "daemon.json").read_text()
    assert cli(old.home, "daemon", "status") == (1, said(old) + "\n", "")
    code, out, _ = cli(old.home, "daemon", "status", "--json")
    assert code == 1
    assert json.loads(out) == {"running": True, "older": True,
                               **{k: v for k, v in info.items() if k != "token"}}
    for argv in (["daemon", "start", "--port", "0"], ["up"]):
        assert cli(old.home, *argv) == (1, "", f"neuralmind: {said(old)}\n"), argv
    assert old.proc.poll() is None and (old.home / "daemon.json").read_text() == file
    assert daemon.serving_pid(old.home) is None and not (old.home / "kernel.db").exists()
    assert set(old.requests()) == {"/v1/health None"}  # its token was sent nowhere


def test_an_older_daemon_run_in_the_foreground_is_known_by_its_workers_files(tmp_path,
                                                                           monkeypatch):
    """Run with `daemon start --foreground` (a terminal, a systemd unit), the old daemon's
    master holds no file of the home — its worker holds the database —: it was taken for no
    daemon, and `start` started a second one beside it."""
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    old = StandIn(tmp_path, HEALTH_776, foreground=True)
    try:
        old.old_file()
        deadline = time.monotonic() + 10  # the worker opens the database as it starts
        while not (old.home / "kernel.db").exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert cli(old.home, "daemon", "status") == (1, said(old) + "\n", "")
        assert cli(old.home, "daemon", "start", "--port", "0") == (
            1, "", f"neuralmind: {said(old)}\n")
    finally:
        old.close()


def test_the_client_and_its_autostart_name_the_older_daemon(tmp_path, monkeypatch):
    """The client raised "daemon.json is stale"; `neuralmind mcp` (autostart) started a second
    daemon."""
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    old = StandIn(tmp_path, HEALTH_914)
    try:
        old.old_file()
        with pytest.raises(DaemonNotRunning) as ex:
            NeuralMindClient(home=old.home).health()
        assert str(ex.value) == said(old)
        monkeypatch.setenv("NEURALMIND_PLUGINS", "auth,mcp")
        with pytest.raises(DaemonNotRunning) as ex:
            NeuralMindClient(home=old.home, autostart=True)
        assert str(ex.value) == f"could not start the daemon: {said(old)}"
        code, out, err = cli(old.home, "mcp")
        assert (code, out, err) == (1, "", f"neuralmind: could not start the daemon: {said(old)}\n")
        assert daemon.serving_pid(old.home) is None and old.proc.poll() is None
        assert set(old.requests()) == {"/v1/health None"}
    finally:
        old.close()


def test_stop_stops_the_older_daemon_and_only_then_removes_its_file(old):
    """stop said "no daemon was running" and deleted the live daemon's file: nothing could
    find or stop it any more."""
    old.old_file()
    assert cli(old.home, "daemon", "stop") == (0, "daemon stopped\n", "")
    assert old.proc.poll() == 0
    assert old.requests()[-1] == "SIGTERM, daemon.json there: True"
    assert not (old.home / "daemon.json").exists()
    assert cli(old.home, "daemon", "status") == (
        1, "not running — start it with `neuralmind daemon start`\n", "")


def test_storage_migrate_refuses_while_an_older_daemon_serves_the_home(old):
    old.old_file()
    with pytest.raises(daemon.Served, match=rf"a daemon serves {old.home} "
                                            rf"\(pid {old.proc.pid}\): stop it first"):
        with daemon.unserved(old.home):
            pass


@pytest.mark.parametrize("case", ["pid_not_listening", "not_neuralmind", "daemon_of_today",
                                  "copied_home"])
def test_a_file_no_older_daemon_stands_behind_stays_stale(case, tmp_path, monkeypatch):
    """Its pid is another process's now (one that does not listen at the file's port, where
    another NeuralMind may answer), or the process at the port does not answer as NeuralMind,
    or the file is a daemon of today's (a home copied from under it), or the older daemon
    serves the home this one was copied from (a backup taken while it ran: stopping it here
    stopped the original's daemon): nobody is signalled, and the file goes as a stale one
    always did."""
    for key in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    standin = StandIn(tmp_path, None if case == "not_neuralmind" else HEALTH_914)
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        if case == "pid_not_listening":
            standin.old_file(pid=bystander.pid)
        elif case == "daemon_of_today":
            standin.old_file(code="0" * 16, home=str(tmp_path / "original"))
        else:
            standin.old_file()
        if case == "copied_home":  # the copy is the home asked about; the original is served
            standin.home = standin.home.rename(tmp_path / "original")
            shutil.copytree(standin.home, tmp_path / "home")
            standin.home = tmp_path / "home"
        with pytest.raises(DaemonNotRunning, match=r"daemon\.json is stale"):
            NeuralMindClient(home=standin.home).health()
        assert cli(standin.home, "daemon", "status") == (
            1, "not running — start it with `neuralmind daemon start`\n", "")
        assert cli(standin.home, "daemon", "stop") == (0, "no daemon was running\n", "")
        assert bystander.poll() is None and standin.proc.poll() is None
        assert not (standin.home / "daemon.json").exists()
    finally:
        bystander.kill()
        bystander.wait()
        standin.close()
