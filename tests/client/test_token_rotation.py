"""`neuralmind token rotate` under a client that is already running. A client that found the
token itself (in ``daemon.json`` or the home's token file) read it once, when it was made, and
every later call was 401 "invalid token" — a `neuralmind mcp` relay for the rest of the agent's
session. It now reads the token again on a 401 and sends the call once more; a token given
(``token=``, ``NEURALMIND_API_TOKEN``) is the caller's, never replaced, and its 401 says where it
came from, in the CLI's line too."""

from __future__ import annotations

import json
import time

import pytest

from neuralmind.client import TOKEN_RECHECK_S, NeuralMindClient, Unauthorized
from plugins.auth.loopback import LoopbackToken
from tests.plugins.auth.helpers import cli
from tests.support import LocalServer, Server


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon (two workers, each re-reading the token file on its own) whose token the
    tests rotate: not the session's, which other tests' clients use."""
    root = tmp_path_factory.mktemp("rotation")
    server = Server(root / "home", plugins=["auth", "memory"], daemon=True,
                    env={"HOME": str(root)}).start()
    deadline = time.monotonic() + 10  # its worker copies the token into daemon.json
    while json.loads((server.home / "daemon.json").read_text()).get("token") != server.token:
        assert time.monotonic() < deadline, "daemon.json never got the token"
        time.sleep(0.05)
    server.repo = root / "repo"
    server.repo.mkdir()
    yield server
    server.stop()


def rotate(daemon) -> tuple[str, str]:
    """(old, new): the token rotated by the CLI, once no worker of the daemon takes the old
    one (each re-reads the file at most every RECHECK_S)."""
    old = daemon.token
    new = cli(daemon.home, "token", "rotate").stdout.strip().splitlines()[-1]
    deadline = time.monotonic() + 5
    while daemon.get("/v1/projects", token=old).status != 401:
        assert time.monotonic() < deadline, "the old token was still accepted after 5 s"
        time.sleep(0.02)
    time.sleep(2 * LoopbackToken.RECHECK_S)  # the other worker too
    assert [daemon.get("/v1/projects", token=old).status for _ in range(4)] == [401] * 4
    return old, new


def test_a_client_that_found_the_token_carries_on_after_a_rotation(daemon, monkeypatch):
    monkeypatch.delenv("NEURALMIND_API_TOKEN", raising=False)
    nm = NeuralMindClient(home=daemon.home)
    memories = nm.project(str(daemon.repo)).memories
    before = nm.token
    old, new = rotate(daemon)
    assert before == old != new
    # a write (never retried on a broken connection) goes again after the 401: it ran nothing
    made = memories.add("Written after a rotation", "the client read the new token")
    assert nm.token == new
    assert nm._token_from == f"the token sent was the daemon's, from {daemon.home / 'daemon.json'}"
    assert [m.id for m in memories.list() if m.title == "Written after a rotation"] == [made.id]
    assert [e["kind"] for e in memories.history(made.id)] == ["created"]
    # each worker takes the new token at most RECHECK_S after the file changed: the client
    # waits that long before sending the call again
    assert TOKEN_RECHECK_S >= LoopbackToken.RECHECK_S


def test_a_token_given_is_never_replaced(daemon, monkeypatch):
    monkeypatch.delenv("NEURALMIND_API_TOKEN", raising=False)
    old, new = rotate(daemon)
    given = NeuralMindClient(daemon.url, token=old, home=daemon.home)
    with pytest.raises(Unauthorized) as refused:
        given.projects.page()
    assert given.token == old
    assert refused.value.token_from == "the token sent was the one given (token=)"
    monkeypatch.setenv("NEURALMIND_API_TOKEN", old)
    from_env = NeuralMindClient(home=daemon.home)
    with pytest.raises(Unauthorized) as refused:
        from_env.projects.page()
    assert from_env.token == old
    said = ("the token sent was NEURALMIND_API_TOKEN's, which comes before the home's own: "
            "correct or unset it")
    assert refused.value.token_from == said
    assert NeuralMindClient(home=daemon.home, token=new).projects.page() is not None


def test_the_cli_says_where_a_refused_token_came_from_never_the_token(daemon):
    """A stale NEURALMIND_API_TOKEN hid the home's own behind "invalid token"."""
    old, new = rotate(daemon)
    refused = cli(daemon.home, "project", "list", env={"NEURALMIND_API_TOKEN": old},
                  check=False)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith(
        "neuralmind: invalid token; the token sent was NEURALMIND_API_TOKEN's, which comes "
        "before the home's own: correct or unset it [unauthorized, status 401, request ")
    assert refused.stderr.count("\n") == 1 and old not in refused.stderr
    given = cli(daemon.home, "project", "list", "--token", old, check=False)
    assert given.stderr.startswith("neuralmind: invalid token; the token sent was the one "
                                   "given (--token) [unauthorized, status 401")
    assert old not in given.stderr and new not in given.stderr
    assert cli(daemon.home, "project", "list").returncode == 0  # the home's own: the new one


def test_the_home_token_file_is_read_again_and_an_unchanged_one_is_refused(tmp_path,
                                                                          monkeypatch):
    """The token file (a `neuralmind serve` on this machine, no daemon.json): a 401 reads it
    again; the same token read again is the 401 it was. A file made again (as `token show`
    makes a lost one) is what the next call sends."""
    monkeypatch.delenv("NEURALMIND_API_TOKEN", raising=False)
    home = tmp_path / "client-home"
    home.mkdir()
    (home / "token").write_text("nm_stale\n")
    with LocalServer(tmp_path / "server-home", plugins=["auth"]) as server:
        nm = NeuralMindClient(server.url, home=home)
        with pytest.raises(Unauthorized) as refused:
            nm.projects.page()
        assert nm.token == "nm_stale"
        assert refused.value.token_from == f"the token sent was the home's, from {home / 'token'}"
        (home / "token").write_text(server.token + "\n")
        assert nm.projects.page().items == []
        assert nm.token == server.token
