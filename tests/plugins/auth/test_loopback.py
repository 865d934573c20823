"""Loopback mode: the per-user token file, `token show` / `token rotate` against a running
daemon, and no CORS headers unless origins are configured."""

from __future__ import annotations

import json
import stat
import time

import pytest

from tests.plugins.auth.helpers import cli, events
from tests.support import Server


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, backend):
    root = tmp_path_factory.mktemp("loop")
    server = Server(root / "home", plugins=["auth"], daemon=True, env={"HOME": str(root)}).start()
    yield server
    server.stop()


def test_token_file_is_private_and_in_the_discovery_file(daemon):
    home, token = daemon.home, daemon.token
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600
    deadline = time.monotonic() + 10
    while json.loads((home / "daemon.json").read_text()).get("token") != token:
        assert time.monotonic() < deadline, "daemon.json never got the token"
        time.sleep(0.1)
    assert cli(home, "token", "show").stdout.strip() == token


def test_token_create_is_refused_in_loopback_mode(daemon):
    """The loopback daemon accepts only its own token: a created one would answer 401."""
    done = cli(daemon.home, "token", "create", "--actor", "ann", "--role", "admin", check=False)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert "need server mode" in done.stderr and "docs/security.md" in done.stderr
    assert cli(daemon.home, "token", "list").stdout == (
        "no per-user tokens: loopback mode takes only its own (`neuralmind token show`); "
        "per-user tokens need server mode (docs/security.md)\n")
    assert events(daemon.home, "token.created") == []


def test_loopback_actor_holds_every_permission(daemon):
    me = daemon.get("/v1/auth/whoami").json
    assert (me["actor"], me["kind"], me["projects"]) == ("local", "loopback", None)
    assert {"jobs.cancel", "tokens.manage", "projects.paths"} <= set(me["permissions"])
    assert daemon.get("/v1/auth/whoami", token=daemon.token + "x").status == 401
    assert daemon.get("/v1/auth/whoami", auth=False,
                      headers={"Authorization": f"Basic {daemon.token}"}).status == 401


def test_rotate_takes_effect_in_the_running_server_within_a_second(daemon):
    old = daemon.token
    assert daemon.get("/v1/projects", token=old).status == 200
    new = cli(daemon.home, "token", "rotate").stdout.strip().splitlines()[-1]
    rotated_at = time.monotonic()
    assert new != old and daemon.token == new
    # the server re-reads the token file at most every 250 ms: the old token goes within that
    while daemon.get("/v1/projects", token=old).status != 401:
        assert time.monotonic() - rotated_at < 1.0, "the old token was still accepted after 1 s"
        time.sleep(0.02)
    assert [daemon.get("/v1/projects", token=old).status for _ in range(5)] == [401] * 5
    assert [daemon.get("/v1/projects", token=new).status for _ in range(5)] == [200] * 5
    assert time.monotonic() - rotated_at < 1.0
    assert json.loads((daemon.home / "daemon.json").read_text())["token"] == new
    assert stat.S_IMODE((daemon.home / "token").stat().st_mode) == 0o600
    assert events(daemon.home, "token.rotated")[-1]["actor"].startswith("cli:")


@pytest.mark.parametrize("lost", ["emptied", "deleted"])
def test_a_token_show_makes_anew_reaches_the_cli_and_clients(daemon, lost):
    """A lost token file (an editor, a full disk, a stray rm): `token show` writes a new token,
    which the server takes, and the discovery file too, where the CLI and clients read theirs
    — as `token rotate` does, event included."""
    old, rotations = daemon.token, len(events(daemon.home, "token.rotated"))
    if lost == "emptied":
        (daemon.home / "token").write_text("")
    else:
        (daemon.home / "token").unlink()
    new = cli(daemon.home, "token", "show").stdout.strip()
    assert new != old and daemon.token == new
    assert json.loads((daemon.home / "daemon.json").read_text())["token"] == new
    shown_at = time.monotonic()
    while (listed := cli(daemon.home, "project", "list", check=False)).returncode != 0:
        assert time.monotonic() - shown_at < 1.0, listed.stderr
        time.sleep(0.05)
    assert len(events(daemon.home, "token.rotated")) == rotations + 1


def test_no_cors_headers_by_default(daemon):
    pre = daemon.request("OPTIONS", "/v1/projects", auth=False, headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization"})
    assert not any(h.startswith("access-control-") for h in pre.headers)
    r = daemon.get("/v1/projects", headers={"Origin": "https://evil.example"})
    assert r.status == 200 and "access-control-allow-origin" not in r.headers


def test_mutating_calls_are_recorded_in_loopback_mode_too(daemon, tmp_path):
    r = daemon.post("/v1/projects", {"path": str(tmp_path)}, headers={"X-Request-Id": "loop-1"})
    assert r.status == 201
    call = next(e for e in events(daemon.home, "api.call") if e["request_id"] == "loop-1")
    assert (call["actor"], call["project_id"]) == ("local", None)
    assert call["data"]["status"] == 201 and call["data"]["permission"] == "projects.write"


@pytest.mark.sqlite_only("the loopback token is a file, read by each worker; no table holds it")
def test_first_requests_to_fresh_workers_all_authenticate(tmp_path):
    """Two new gthread workers, hit at once by many threads on their first requests: every
    one is accepted (the token file appears whole, and one thread refreshes it for all)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support import request

    for attempt in range(3):
        server = Server(tmp_path / f"h{attempt}", plugins=["auth"], workers=2).start()
        try:
            token = server.token
            with ThreadPoolExecutor(16) as pool:
                statuses = list(pool.map(
                    lambda _: request(server.port, "GET", "/v1/projects", token=token).status,
                    range(64)))
            assert statuses == [200] * 64
        finally:
            server.stop()


def test_an_emptied_token_file_gets_a_new_token(tmp_path):
    """An empty token file (an editor, a full disk) is never the token — no request could
    carry it: `token show` makes a new one, whole, and the file holds it."""
    from plugins.auth.loopback import ensure_token
    home = tmp_path / "home"
    first = cli(home, "token", "show")
    assert (first.stderr, (home / "kernel.db").exists()) == ("", False)  # made, not replaced
    (home / "token").write_text("\n")
    token = cli(home, "token", "show").stdout.strip()
    assert len(token) >= 32 and (home / "token").read_text() == token + "\n"
    assert ensure_token(home) == token != first.stdout.strip()
    assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600
    assert [e["data"] for e in events(home, "token.rotated")] == [{"token": "loopback"}]
