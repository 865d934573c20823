"""Both transports driven by the SDK's own client against real servers: ``neuralmind mcp``
over stdio (starting the daemon itself), Streamable HTTP on the daemon, and on a two-worker
team server where roles and project isolation must hold."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp.types import Implementation

from plugins.auth.tokens import TokenFile
from plugins.mcp.sessions import MAX_LIVE
from plugins.mcp.tools import SPECS
from tests.client.conftest import Daemon, git_repo
from tests.plugins.auth.helpers import server_config
from tests.support import Server, pythonpath, run_cli

pytestmark = pytest.mark.slow  # gunicorn workers and child processes: started first under xdist

PLUGINS = ["auth", "memory", "index", "mcp", "ask"]
SOURCE = {"store.py": 'def open_wal(path):\n    """Open SQLite in WAL mode."""\n    return path\n',
          "api.py": "from store import open_wal\n\ndef serve():\n    return open_wal('db')\n"}


def unstarted_daemon(tmp_path_factory, name: str):
    """A module's daemon, not started (`neuralmind mcp` starts it), and a repository of
    ``SOURCE`` as its ``repo``; stopped when the module is done."""
    base = tmp_path_factory.mktemp(name)
    d = Daemon(base, plugins=PLUGINS)
    d.repo = git_repo(base / "repo", SOURCE)
    yield d
    d.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from unstarted_daemon(tmp_path_factory, "mcp-daemon")


def run(session_body, params: StdioServerParameters, **session_options):
    async def main():
        async with stdio_client(params) as (read, write), \
                ClientSession(read, write, **session_options) as session:
            await session.initialize()
            return await session_body(session)
    return anyio.run(main)


def http(url: str, token: str, session_body):
    async def main():
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as client, \
                streamable_http_client(url, http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            return await session_body(session)
    return anyio.run(main)


def test_stdio_starts_the_daemon_finds_the_project_and_calls_every_tool(daemon):
    assert not (daemon.home / "daemon.json").exists()
    progress = []

    async def body(s: ClientSession):
        seen = {"tools": [t.name for t in (await s.list_tools()).tools]}
        built = await s.call_tool("build_index", {}, progress_callback=_recorder(progress))
        seen["build"] = built.structured_content
        made = await s.call_tool("remember", {"title": "Open SQLite in WAL mode",
                                              "rationale": "readers never block the writer",
                                              "files_affected": ["store.py"]})
        mid = made.structured_content["id"]
        seen["id"] = mid
        seen["calls"] = [(name, await s.call_tool(name, args)) for name, args in (
            ("recall", {"query": "WAL readers"}), ("get_memory", {"memory_id": mid}),
            ("update_memory", {"memory_id": mid, "tags": ["sqlite"]}),
            ("memory_history", {"memory_id": mid}),
            ("search_code", {"query": "open_wal", "mode": "keyword"}),
            ("query_code", {"question": "how is the database opened?"}),
            ("wakeup", {}), ("project_stats", {}), ("list_projects", {}),
            ("register_project", {"path": str(daemon.repo)}),
            ("invalidate_memory", {"memory_id": mid, "reason": "superseded"}),
            ("get_memory", {"memory_id": "no-such-memory"}))]
        seen["resources"] = [str(r.uri) for r in (await s.list_resources()).resources]
        seen["wakeup"] = (await s.read_resource(seen["resources"][0])).contents[0].text
        return seen

    seen = run(body, StdioServerParameters(
        command=sys.executable, args=["-m", "neuralmind.cli", "mcp"], env=daemon.env,
        cwd=str(daemon.repo)))
    assert daemon.info["pid"]  # started by the stdio command, found through its discovery file
    assert set(seen["tools"]) == {s.name for s in SPECS}
    assert seen["build"]["status"] == "done" and progress[-1][2].startswith("2/2 files parsed")
    *fine, (_, refused) = seen["calls"]
    calls = dict(fine)
    assert not any(c.is_error for c in calls.values()), [c.content[0].text for c in calls.values()
                                                         if c.is_error]
    assert refused.is_error and refused.content[0].text.startswith("memory_not_found (404)")
    assert calls["recall"].structured_content["results"][0]["id"] == seen["id"]
    assert "open_wal" in calls["query_code"].content[0].text
    project = daemon.client().project(str(daemon.repo))
    assert calls["list_projects"].structured_content["items"][0]["id"] == project.id
    # written over MCP, read over /v1 — and the reverse
    assert project.memories.get(seen["id"]).status == "INVALIDATED"
    made = project.memories.add("Vendor the model", "no network at run time")

    async def recall(s):
        return await s.call_tool("recall", {"query": "vendor model", "mode": "keyword"})
    found = run(recall, StdioServerParameters(
        command=sys.executable, args=["-m", "neuralmind.cli", "mcp", "--project", project.id],
        env=daemon.env, cwd=str(daemon.home)))
    assert [r["id"] for r in found.structured_content["results"]] == [made.id]
    assert seen["resources"][0] == f"neuralmind://projects/{project.id}/wakeup"
    assert "store.py" in seen["wakeup"]


def _recorder(progress: list):
    async def note(p, total, message):
        progress.append((p, total, message))
    return note


def test_streamable_http_on_the_daemon(daemon):
    daemon.start()  # already running after the stdio test; idempotent otherwise
    project = daemon.client().project(str(daemon.repo))
    progress = []

    async def body(s: ClientSession):
        tools = (await s.list_tools()).tools
        built = await s.call_tool("build_index", {"project": project.id, "full": True},
                                  progress_callback=_recorder(progress))
        made = await s.call_tool("remember", {"project": project.id, "title": "Over HTTP",
                                              "rationale": "streamable"})
        nope = await s.call_tool("recall", {"project": "p_000000000000", "query": "x"})
        listed = [str(r.uri) for r in (await s.list_resources()).resources]
        return tools, built, made, nope, listed

    tools, built, made, nope, listed = http(f"{daemon.url}/v1/mcp", daemon.token, body)
    assert {t.name for t in tools} == {s.name for s in SPECS}
    assert built.structured_content["status"] == "done"
    assert progress and "/2 files parsed" in progress[0][2]
    assert project.memories.get(made.structured_content["id"]).title == "Over HTTP"
    assert nope.is_error and nope.content[0].text.startswith("project_not_found (404)")
    mid = made.structured_content["id"]
    assert f"neuralmind://projects/{project.id}/memories/{mid}" in listed
    conn = sqlite3.connect(daemon.home / "mcp.db")
    try:  # the client ended its session (DELETE) when it closed
        ended = conn.execute("SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL").fetchone()
    finally:
        conn.close()
    assert ended[0] >= 1


def test_stdio_writes_protocol_messages_only_and_logs_to_stderr(daemon):
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}), "this is not JSON-RPC",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "project_stats", "arguments": {}}})]
    done = subprocess.run([sys.executable, "-m", "neuralmind.cli", "mcp", "--verbose"],
                          input="\n".join(lines) + "\n", cwd=daemon.repo, env=daemon.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines())}
    assert set(answers) == {None, 1, 2}
    assert answers[None]["error"]["code"] == -32700
    assert answers[2]["result"]["structuredContent"]["project_id"].startswith("p_")
    assert "relaying to" in done.stderr
    # one line saying why, not pydantic's dump of a union's errors and its URL
    assert "neuralmind: not JSON: Expecting value: line 1 column 1 (char 0)\n" in done.stderr


def test_stdio_answers_each_request_it_cannot_relay_by_its_id(daemon):
    """JSON-RPC 2.0 over stdio: -32700 only for text that is not JSON; -32600 with the id for
    JSON that is no JSON-RPC request (a null id included: MCP forbids it); a lone surrogate
    (legal JSON, but no UTF-8) is relayed as it came and refused by the daemon as over
    /v1/mcp (400 invalid_json, the caller's -32600); a message the
    daemon refuses as too large is the caller's -32600, not an internal error."""
    call = {"jsonrpc": "2.0", "method": "tools/call"}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}), "{not json",
        json.dumps({**call, "id": 3, "params": [1]}),
        json.dumps({"jsonrpc": "1.0", "id": 4, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}),
        json.dumps({**call, "id": 5, "params": {"name": "recall", "arguments": {
            "query": "rocket \ud83d"}}}),
        json.dumps({**call, "id": 6, "params": {"name": "remember", "arguments": {
            "title": "t", "rationale": "x" * (1100 * 1024)}}}),
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"})]
    assert "\\ud83d" in lines[5]  # the escape itself, as JavaScript writes it
    done = subprocess.run([sys.executable, "-m", "neuralmind.cli", "mcp"],
                          input="\n".join(lines) + "\n", cwd=daemon.repo, env=daemon.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {m["id"]: m for m in answers if m["id"] is not None}
    said = f"stdout:\n{done.stdout[:4000]}\nstderr:\n{done.stderr[-4000:]}"
    assert set(by_id) == {1, 3, 4, 5, 6, 7} and by_id[7]["result"] == {}, said
    assert sorted(m["error"]["code"] for m in answers if m["id"] is None) == [-32700,
                                                                             -32600], said
    assert by_id[3]["error"] == {"code": -32600,
                                 "message": "Invalid Request: params must be an object"}
    assert by_id[4]["error"] == {"code": -32600,
                                 "message": 'Invalid Request: jsonrpc must be "2.0"'}
    # relayed as it came: the daemon's own answer, as over /v1/mcp
    assert by_id[5]["error"]["code"] == -32600, said
    assert by_id[5]["error"]["message"].startswith(
        "invalid_json (400): the body holds a lone surrogate escape"), said
    assert by_id[6]["error"]["code"] == -32600, said
    too_large = by_id[6]["error"]["message"]  # the envelope read, or the send cut off by it
    assert too_large.startswith(("payload_too_large (413): the body is larger",
                                 "payload_too_large (413): the server stopped reading")), too_large


def test_stdio_outlives_a_daemon_restart(daemon):
    """The daemon stops mid-session: the next calls start it again — once, however many are
    in flight — and the session (kept in SQLite) is still known to it."""
    async def body(s: ClientSession):
        before = await s.call_tool("list_projects", {})
        daemon.stop()
        after = [None] * 10

        async def one(i):  # calls in flight together: one daemon start serves them all
            after[i] = await s.call_tool("list_projects", {})
        async with anyio.create_task_group() as tasks:
            for i in range(len(after)):
                tasks.start_soon(one, i)
        return before, after

    before, after = run(body, StdioServerParameters(
        command=sys.executable, args=["-m", "neuralmind.cli", "mcp"], env=daemon.env,
        cwd=str(daemon.repo)))
    assert all(not a.is_error and a.structured_content == before.structured_content
               for a in after), [a.content[0].text for a in after if a.is_error]
    assert daemon.client().health()["status"] == "ok"


def _sessions_of(daemon, client: str) -> list:
    """When each session a client of that name opened ended (None: live), oldest first."""
    conn = sqlite3.connect(daemon.home / "mcp.db")
    try:
        return [row[0] for row in conn.execute(
            "SELECT ended_at FROM sessions WHERE json_extract(client, '$.name') = ? "
            "ORDER BY created_at", (client,))]
    finally:
        conn.close()


def test_stdio_opens_a_new_session_when_the_daemon_forgot_its_own(daemon):
    """The relay's session is evicted (its actor opened 100 newer ones: other agents'
    windows): the relay, which owns the session, replays the agent's handshake and sends the
    call again; the agent, which initialized once, sees nothing. Leaving (stdin closed), the
    relay ends its session."""
    daemon.start()
    initialize = jsonrpc_initialize("another-window")

    async def body(s: ClientSession):
        before = await s.call_tool("list_projects", {})
        assert _sessions_of(daemon, "evicted-agent") == [None]
        nm = daemon.client()
        for _ in range(MAX_LIVE):
            list(nm.mcp(initialize).messages)
        assert _sessions_of(daemon, "evicted-agent") == []  # forgotten by the daemon
        after = [await s.call_tool("list_projects", {}), await s.call_tool("list_projects", {})]
        await s.send_ping()
        return before, after

    before, after = run(body, StdioServerParameters(
        command=sys.executable, args=["-m", "neuralmind.cli", "mcp"], env=daemon.env,
        cwd=str(daemon.repo)), client_info=Implementation(name="evicted-agent", version="1"))
    assert all(not a.is_error and a.structured_content == before.structured_content
               for a in after), [a.content[0].text for a in after if a.is_error]
    ended = _sessions_of(daemon, "evicted-agent")
    assert len(ended) == 1 and ended[0] is not None  # one session opened again, then ended


def test_stdio_ends_its_session_when_stopped(daemon):
    """SIGTERM (what an agent sends a server that does not leave): the session ends first."""
    daemon.start()
    relay = subprocess.Popen([sys.executable, "-m", "neuralmind.cli", "mcp"], cwd=daemon.repo,
                             env=daemon.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        relay.stdin.write(json.dumps(jsonrpc_initialize("stopped-agent")) + "\n")
        relay.stdin.flush()
        assert "result" in json.loads(relay.stdout.readline())
        assert _sessions_of(daemon, "stopped-agent") == [None]
        relay.terminate()
        assert relay.wait(timeout=30) == -signal.SIGTERM
    finally:
        relay.kill()
        relay.communicate()
    assert _sessions_of(daemon, "stopped-agent")[0] is not None


def refused_over_http(daemon, body: bytes) -> dict:
    """The error envelope ``/v1/mcp`` answers ``body`` with (a 4xx it must answer)."""
    over_http = urllib.request.Request(
        f"{daemon.url}/v1/mcp", data=body, method="POST", headers={
            "Authorization": f"Bearer {daemon.token}", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(over_http, timeout=30)
    envelope = json.loads(refused.value.read())["error"]
    assert envelope["status"] == refused.value.code
    return envelope


def test_stdio_refuses_a_line_that_is_not_utf8_as_http_refuses_the_body(daemon):
    """Bytes that are not UTF-8 (a Latin-1 é) are no JSON text: over HTTP a 400 invalid_json,
    so over stdio that refusal's -32600, never the line stored with U+FFFD in their place."""
    daemon.start()
    remember = (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember",'
                b'"arguments":{"title":"caf\xe9","rationale":"latin-1"}}}')
    envelope = refused_over_http(daemon, remember)
    lines = [json.dumps(jsonrpc_initialize("t")).encode(), remember,
             b'{"jsonrpc":"2.0","method":"notifications/x","params":{"t":"\xff"}}',
             b'{"jsonrpc":"2.0","id":3,"method":"ping"}']
    done = subprocess.run([sys.executable, "-m", "neuralmind.cli", "mcp"], cwd=daemon.repo,
                          input=b"\n".join(lines) + b"\n", env=daemon.env, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    by_id = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert set(by_id) == {1, 2, 3}
    refused = by_id[2]["error"]
    assert (refused["code"], refused["message"]) == (
        -32600, f"{envelope['code']} ({envelope['status']}): {envelope['message']}")
    assert refused["data"]["details"] == {
        "reason": f"byte {remember.index(0xe9)} of the line is 0xe9, which is not UTF-8"}


def jsonrpc_initialize(client: str) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": client, "version": "1"}}}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-team")
    config = server_config(root, {"a": root / "repo-a", "b": root / "repo-b"})
    server = Server(root / "home", config=config, plugins=PLUGINS, workers=2,
                    env={"HOME": str(root)}).start()
    tokens = TokenFile(server.home / "tokens.json")
    server.tokens = {name: tokens.create(name, role, projects)[0] for name, role, projects in (
        ("reader", "reader", "*"), ("builder", "builder", "*"), ("builder-a", "builder", ["a"]))}
    yield server
    server.stop()


def test_roles_and_projects_hold_over_http_on_a_team_server(team):
    url = f"http://127.0.0.1:{team.port}/v1/mcp"

    async def reader(s):
        return ({t.name for t in (await s.list_tools()).tools},
                await s.call_tool("remember", {"project": "a", "title": "t", "rationale": "r"}))

    listed, refused = http(url, team.tokens["reader"], reader)
    assert "remember" not in listed and "recall" in listed
    assert refused.is_error
    assert refused.content[0].text == "forbidden (403): reader may not memories.write"

    async def builder(s):
        return await s.call_tool("remember", {"project": "b", "title": "Secret of b",
                                              "rationale": "b only"})
    assert not http(url, team.tokens["builder"], builder).is_error

    async def only_a(s):
        projects = await s.call_tool("list_projects", {})
        hidden = await s.call_tool("recall", {"project": "b", "query": "Secret"})
        own = await s.call_tool("remember", {"project": "a", "title": "In a", "rationale": "r"})
        return projects, hidden, own

    projects, hidden, own = http(url, team.tokens["builder-a"], only_a)
    assert [p["id"] for p in projects.structured_content["items"]] == ["a"]
    assert hidden.is_error and hidden.content[0].text.startswith("project_not_found (404)")
    assert not own.is_error


def test_each_agent_configuration_launches_the_stdio_server_as_written(daemon, tmp_path):
    """Install into a fresh home beside another server, then start exactly what the file
    says (as the agent would: its command, args, env, in the project) and use it."""
    home, repo = tmp_path / "home", daemon.repo
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('[mcp_servers.other]\ncommand = "other"\n')
    (repo / ".cursor").mkdir()
    (repo / ".cursor" / "mcp.json").write_text('{"mcpServers": {"other": {"command": "other"}}}')
    env = {**daemon.env, "HOME": str(home)}

    def cli(*args):  # writing the files is the CLI's main, run in this process
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(repo)
            code, out, err = run_cli(*args, env=env)
        assert code == 0, err
        return out

    configs = {
        "claude-code": lambda: json.loads((repo / ".mcp.json").read_text())["mcpServers"],
        "cursor": lambda: json.loads((repo / ".cursor" / "mcp.json").read_text())["mcpServers"],
        "codex": lambda: tomllib.loads((home / ".codex" / "config.toml").read_text())[
            "mcp_servers"]}

    async def recall(s):
        return await s.call_tool("recall", {"query": "WAL"})

    for agent, read in configs.items():
        cli("agent", "install", agent)
        entry = read()["neuralmind"]
        args = [a.replace("${workspaceFolder}", str(repo)) for a in entry["args"]]  # as Cursor
        found = run(recall, StdioServerParameters(
            command=entry["command"], args=args, cwd=str(repo),
            env={**entry.get("env", {}), "HOME": str(home), "PYTHONPATH": pythonpath()}))
        assert not found.is_error, (agent, found.content[0].text)
    hook = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]["SessionStart"]
    shown = subprocess.run(hook[0]["hooks"][0]["command"], shell=True, cwd=repo, text=True,
                           capture_output=True, env={**env, "PYTHONPATH": pythonpath()}, timeout=60)
    assert shown.returncode == 0 and "store.py" in shown.stdout, shown.stderr

    for agent, read in configs.items():
        cli("agent", "uninstall", agent)
    assert not (repo / ".mcp.json").exists() and not (repo / ".claude").exists()
    assert json.loads((repo / ".cursor" / "mcp.json").read_text()) == {
        "mcpServers": {"other": {"command": "other"}}}
    assert (home / ".codex" / "config.toml").read_text() == '[mcp_servers.other]\ncommand = "other"\n'
