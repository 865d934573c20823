"""`neuralmind token rotate` mid-session: the relay, which found the token itself, read it
once at start, and every later call was `unauthorized (401): invalid token` until the agent
was restarted (docs/security.md: clients send the new one at once). Driven with the SDK's
stdio client against a real daemon, rotated with the CLI a user types."""

from __future__ import annotations

import sqlite3
import sys
import time
import urllib.error
import urllib.request

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from plugins.auth.loopback import LoopbackToken
from tests.client.conftest import Daemon, git_repo

pytestmark = pytest.mark.slow  # a daemon and relays as child processes: started first under xdist

PLUGINS = ["auth", "memory", "index", "mcp", "ask"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    base = tmp_path_factory.mktemp("relay-token")
    d = Daemon(base, plugins=PLUGINS).start()
    d.repo = git_repo(base / "repo", {"store.py": "def open_wal(path):\n    return path\n"})
    yield d
    d.stop()


def _status(daemon, token: str) -> int:
    req = urllib.request.Request(daemon.url + "/v1/projects",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as ex:
        return ex.code


def rotate(daemon) -> str:
    """`neuralmind token rotate`, once no worker of the daemon takes the old token: the old
    one."""
    old = daemon.token
    daemon.run("token", "rotate", check=True)
    deadline = time.monotonic() + 5
    while _status(daemon, old) != 401:
        assert time.monotonic() < deadline, "the old token was still accepted after 5 s"
        time.sleep(0.02)
    time.sleep(2 * LoopbackToken.RECHECK_S)  # each worker re-reads the file on its own
    assert [_status(daemon, old) for _ in range(4)] == [401] * 4
    return old


def relay(daemon, body, *args: str, client: str = "agent"):
    async def main():
        params = StdioServerParameters(command=sys.executable, env=daemon.env,
                                       args=["-m", "neuralmind.cli", "mcp", *args],
                                       cwd=str(daemon.repo))
        async with stdio_client(params) as (read, write), ClientSession(
                read, write, client_info=Implementation(name=client, version="1")) as s:
            await s.initialize()
            return await body(s)
    return anyio.run(main)


def _sessions_of(daemon, client: str) -> list:
    conn = sqlite3.connect(daemon.home / "mcp.db")
    try:
        return [row[0] for row in conn.execute(
            "SELECT ended_at FROM sessions WHERE json_extract(client, '$.name') = ?", (client,))]
    finally:
        conn.close()


def test_the_relay_carries_on_after_a_rotation_in_its_session(daemon):
    async def body(s: ClientSession):
        before = await s.call_tool("list_projects", {})
        old = await anyio.to_thread.run_sync(rotate, daemon)
        made = await s.call_tool("remember", {"title": "Written after a rotation",
                                              "rationale": "the relay read the new token"})
        after = await s.call_tool("list_projects", {})
        return old, before, made, after, _sessions_of(daemon, "rotated-agent")

    old, before, made, after, sessions = relay(daemon, body, client="rotated-agent")
    assert not made.is_error, made.content[0].text
    assert not after.is_error and after.structured_content == before.structured_content
    assert daemon.token != old
    assert sessions == [None]  # the session it opened carried on: none opened again
    project = daemon.client().project(str(daemon.repo))
    titles = [m.title for m in project.memories.list()]
    assert titles.count("Written after a rotation") == 1  # the write went again once


def test_a_relay_given_a_token_keeps_it(daemon):
    """``--token`` is the agent configuration's own: a rotation does not replace it, and its
    refusal is said as before."""
    async def body(s: ClientSession):
        before = await s.call_tool("list_projects", {})
        await anyio.to_thread.run_sync(rotate, daemon)
        with pytest.raises(MCPError) as refused:
            await s.call_tool("list_projects", {})
        return before, refused.value

    before, refused = relay(daemon, body, "--token", daemon.token)
    assert not before.is_error
    assert str(refused).startswith("unauthorized (401): invalid token"), refused
