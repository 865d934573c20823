"""``neuralmind mcp`` stopped by its agent (SIGTERM, what an agent sends a server that does
not leave) dies of the signal within a few seconds, whatever it is doing: a call in flight,
a daemon that no longer answers (one that hangs, one that is gone), a second SIGTERM on the
first's heels, or an agent that repeats it until the relay is gone."""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from tests.client.conftest import Daemon, git_repo
from tests.plugins.mcp.test_transports import jsonrpc_initialize

pytestmark = pytest.mark.slow  # a daemon and child processes: started first under xdist

PROMPT_S = 3.5  # the session's end may take END_TIMEOUT_S (2 s); the rest is the exit
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "list_projects", "arguments": {}}}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    base = tmp_path_factory.mktemp("mcp-stop")
    d = Daemon(base, plugins=["auth", "mcp"])
    d.repo = git_repo(base / "repo", {"a.py": "x = 1\n"})
    d.start()
    yield d
    d.stop()


@contextmanager
def relay(daemon):
    """A relay whose agent has initialized: its session is open."""
    proc = subprocess.Popen([sys.executable, "-m", "neuralmind.cli", "mcp"], cwd=daemon.repo,
                            env=daemon.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        send(proc, jsonrpc_initialize("stopped-agent"))
        assert "result" in json.loads(proc.stdout.readline())
        yield proc
    finally:
        proc.kill()
        proc.communicate()


def send(proc, message: dict) -> None:
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def stop(proc, times: int = 1, every: float = 0.0) -> float:
    """SIGTERM ``times`` times, ``every`` seconds apart (or until it is gone); the seconds
    from the first to its exit, which must be of the signal."""
    start = time.monotonic()
    for n in range(times):
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGTERM)
        if n + 1 < times:
            time.sleep(every)
    assert proc.wait(timeout=30) == -signal.SIGTERM, proc.stderr.read()
    return time.monotonic() - start


@contextmanager
def hung(daemon):
    """The daemon gone and its port taken by a server that never answers: connections are
    queued, never accepted (a frozen daemon). The daemon is back afterwards."""
    daemon.stop()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", daemon.port))
        sock.listen(16)
        try:
            yield sock
        finally:
            sock.close()
            daemon.start()


def test_a_relay_whose_daemon_answers_dies_of_sigterm_at_once(daemon):
    with relay(daemon) as proc:
        send(proc, CALL)
        assert stop(proc) < PROMPT_S


# each signal restarted the old handler's 2-second session end: 8 signals kept it alive ~3.8 s
@pytest.mark.parametrize("times, every", [(1, 0), (8, 0.25)])
def test_a_relay_whose_daemon_hangs_mid_call_dies_of_sigterm_within_seconds(daemon, times,
                                                                             every):
    """The call waits on a daemon that never answers; ending the session would wait too: it
    is given END_TIMEOUT_S at most, and a SIGTERM repeated meanwhile ends the relay at once
    rather than waiting again."""
    with relay(daemon) as proc, hung(daemon) as frozen:
        send(proc, CALL)
        assert select.select([frozen], [], [], 10)[0]  # the call is in flight
        assert stop(proc, times, every) < PROMPT_S


def test_a_relay_whose_daemon_is_gone_dies_of_sigterm_at_once(daemon):
    with relay(daemon) as proc:
        daemon.stop()
        try:
            assert stop(proc) < PROMPT_S
        finally:
            daemon.start()
