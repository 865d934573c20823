"""An agent's working session over MCP: the SDK's own clients over stdio (``neuralmind mcp``,
starting the daemon itself) and Streamable HTTP on that daemon, and the in-process kernels of
conftest where a fault has to be made or a role is needed. What the agent meets here: ids that
spell another route's name, one failing message of a batch, an agent that initializes again,
route fields a tool leaves out, the texts that tell a model what to do next, and one answer to a
lone surrogate on both transports."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import time

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.shared.exceptions import MCPError

from plugins.mcp.plugin import _state
from tests.plugins.mcp.conftest import jsonrpc
from tests.plugins.mcp.test_transports import (_sessions_of, http, jsonrpc_initialize,
                                               refused_over_http, run, unstarted_daemon)
from tests.support import deny_once

pytestmark = pytest.mark.slow  # a daemon and relays as child processes: started first under xdist

ROUTE_NAMES = ("stats", "tags", "export", "decay-policy", "search", "batch")
LOOKED_IN = ": for another project's, pass its id as project (list_projects gives the ids)"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from unstarted_daemon(tmp_path_factory, "mcp-agent-session")


def stdio(daemon, body):
    return run(body, StdioServerParameters(
        command=sys.executable, args=["-m", "neuralmind.cli", "mcp"], env=daemon.env,
        cwd=str(daemon.repo)))


def text(result) -> str:
    return result.content[0].text


def relay(daemon, lines: list[bytes | str]) -> dict:
    """``neuralmind mcp`` given ``lines`` at once: its answers by id (None: the unanswerable)."""
    done = subprocess.run([sys.executable, "-m", "neuralmind.cli", "mcp"], cwd=daemon.repo,
                          input=b"".join((line if isinstance(line, bytes) else line.encode())
                                         + b"\n" for line in lines),
                          env=daemon.env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}


def test_an_id_that_spells_another_route_is_the_tool_s_own_404_on_both_transports(daemon):
    """``memories/stats`` is a route of its own, which the router prefers to
    ``memories/{memory_id}``: such an id runs nothing (no 500 from a renderer handed the
    stats, no contradiction check run by ``resolve_contradiction``) and is the tool's 404,
    naming the project it looked in; a resource URI is -32002."""
    async def body(s: ClientSession):
        pid = (await s.call_tool("list_projects", {})).structured_content["items"][0]["id"]
        made = await s.call_tool("remember", {"title": "Never use Redis anywhere",
                                              "rationale": "one store", "id": "resolve"})
        before = await s.call_tool("memory_history", {"memory_id": "resolve"})
        got = {mid: await s.call_tool("get_memory", {"memory_id": mid}) for mid in ROUTE_NAMES}
        resolved = await s.call_tool("resolve_contradiction", {"contradiction_id": "check",
                                                               "strategy": "keep_both"})
        with pytest.raises(MCPError) as read:
            await s.read_resource(f"neuralmind://projects/{pid}/memories/tags")
        after = await s.call_tool("memory_history", {"memory_id": "resolve"})
        return pid, made, got, resolved, read.value, before, after

    pid, made, got, resolved, read, before, after = stdio(daemon, body)
    assert not made.is_error, text(made)
    for mid, result in got.items():
        assert result.is_error and text(result) == (
            f"memory_not_found (404): no memory with id {mid} in project {pid}{LOOKED_IN}"), mid
        assert result.structured_content["error"]["code"] == "memory_not_found"
    assert resolved.is_error and text(resolved) == (
        f"contradiction_not_found (404): no contradiction with id check in project {pid}"
        f"{LOOKED_IN}")
    assert (read.code, read.message) == (-32002, "memory_not_found: no memory with id tags")
    assert after.structured_content == before.structured_content  # no check ran on "resolve"

    async def over_http(s: ClientSession):
        return {mid: await s.call_tool("get_memory", {"memory_id": mid}) for mid in ROUTE_NAMES}

    for mid, result in http(f"{daemon.url}/v1/mcp?project={pid}", daemon.token,
                            over_http).items():
        assert result.is_error and text(result) == text(got[mid])


def test_texts_tell_the_model_what_to_correct(daemon):
    """next_files names the open files the index does not hold, as record_activity does; a
    project given as a path says where the ids are; arguments a tool leaves out are refused
    by name with why, and nothing runs."""
    async def body(s: ClientSession):
        built = await s.call_tool("build_index", {})
        pid = built.structured_content["project_id"]
        jobs = len(list(daemon.client().jobs.list(project=pid)))
        left_out = [await s.call_tool(name, args) for name, args in (
            ("build_index", {"wait": True}), ("consolidate_memories", {"wait": True}),
            ("decay_memories", {"wait": False}),
            ("ask", {"question": "why WAL?", "stream": True}))]
        return (built, jobs, left_out, len(list(daemon.client().jobs.list(project=pid))),
                await s.call_tool("next_files", {"files_open": ["store.py", "no/such.py"]}),
                await s.call_tool("next_files", {"files_open": ["nope.py"]}),
                await s.call_tool("record_activity", {"files": ["store.py", "nope.py"],
                                                      "kind": "read"}),
                await s.call_tool("get_memory", {"project": str(daemon.repo),
                                                 "memory_id": "x"}))

    built, jobs, left_out, jobs_after, nexts, unknown, activity, path = stdio(daemon, body)
    assert built.structured_content["status"] == "done"
    assert [text(r) for r in left_out] == [
        "validation_error (422): the request did not validate — wait: build_index always "
        "follows the job to its end, so it takes no wait",
        "validation_error (422): the request did not validate — wait: consolidate_memories "
        "always follows the job to its end, so it takes no wait",
        "validation_error (422): the request did not validate — wait: decay_memories always "
        "follows the job to its end, so it takes no wait",
        "validation_error (422): the request did not validate — stream: ask answers whole, "
        "never streamed, so it takes no stream"]
    assert all(r.is_error for r in left_out) and jobs_after == jobs  # no job was started
    assert not nexts.is_error and text(nexts).splitlines()[-1] == "not in the index: no/such.py"
    assert nexts.structured_content["not_indexed"] == ["no/such.py"]
    assert text(unknown) == ("no suggestions yet: nothing links these files to others\n"
                             "not in the index: nope.py")
    assert text(activity).endswith("; left out, not in the index: nope.py")
    assert path.is_error and text(path) == (
        "validation_error (422): the request did not validate — project: must be an id, not a "
        "path (list_projects gives the ids)")


def test_link_memories_says_which_side_each_type_retires_and_does_so(daemon):
    async def body(s: ClientSession):
        [tool] = [t for t in (await s.list_tools()).tools if t.name == "link_memories"]
        dup = await s.call_tool("remember", {"title": "Cache in Redis", "rationale": "copy"})
        kept = await s.call_tool("remember", {"title": "Cache in Redis, TTL 60 s",
                                              "rationale": "the one that stays"})
        a, b = dup.structured_content["id"], kept.structured_content["id"]
        linked = await s.call_tool("link_memories", {"memory_id": a, "target": b,
                                                     "type": "merged_into"})
        return tool, linked, *[(await s.call_tool("get_memory", {"memory_id": m}))
                               .structured_content["status"] for m in (a, b)]

    tool, linked, source, target = stdio(daemon, body)
    assert "merged_into" in tool.input_schema["properties"]["type"]["enum"]
    assert "the source becomes MERGED and leaves recall" in tool.description
    assert "the source replaces the target, which becomes SUPERSEDED" in tool.description
    assert not linked.is_error and (source, target) == ("MERGED", "ACTIVE")


def test_an_agent_that_initializes_again_leaves_no_session_behind(daemon):
    """Each ``initialize`` to one relay ends the session the one before it opened; leaving, the
    relay ends the last."""
    seen = []
    with subprocess.Popen([sys.executable, "-m", "neuralmind.cli", "mcp"], cwd=daemon.repo,
                          env=daemon.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as agent:  # exit: stdin closed
        for _ in range(3):
            agent.stdin.write(json.dumps(jsonrpc_initialize("re-initializing-agent")) + "\n")
            agent.stdin.write(json.dumps({"jsonrpc": "2.0",
                                          "method": "notifications/initialized"}) + "\n")
            agent.stdin.flush()
            assert "result" in json.loads(agent.stdout.readline())
            seen.append(_settled(daemon, "re-initializing-agent"))
        agent.stdin.write(json.dumps(jsonrpc("ping", id=2)) + "\n")
        agent.stdin.flush()
        assert json.loads(agent.stdout.readline()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        agent.stdin.close()
        assert agent.wait(timeout=30) == 0
    assert [[ended is None for ended in s] for s in seen] == [
        [True], [False, True], [False, False, True]]
    ended = _sessions_of(daemon, "re-initializing-agent")
    assert len(ended) == 3 and None not in ended


def _settled(daemon, client: str) -> list:
    """The client's sessions once one at most is live: the relay ends the session it held
    just after it answers the initialize that replaced it."""
    deadline = time.monotonic() + 10
    while (found := _sessions_of(daemon, client)).count(None) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def test_a_lone_surrogate_gets_the_daemon_s_answer_on_both_transports(daemon):
    """``"\\ud800"`` is legal JSON but no UTF-8: over HTTP the kernel's 400 invalid_json, so
    over stdio the relay sends the escape as it came and answers that refusal (-32600, the
    envelope in ``data``), in a tool's argument as anywhere else. A line nested too deeply to
    read is -32700, and the relay serves on."""
    daemon.start()
    call = (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall",'
            b'"arguments":{"query":"rocket \\ud800"}}}')
    envelope = refused_over_http(daemon, call)
    assert envelope["status"] == 400
    assert envelope["code"] == "invalid_json" and "lone surrogate" in envelope["message"]

    by_id = relay(daemon, [json.dumps(jsonrpc_initialize("t")), call,
                           b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":'
                           b'{"note":"\\udc00"}}}', "[" * 5000 + "]" * 5000,
                           json.dumps(jsonrpc("ping", id=4))])
    assert set(by_id) == {None, 1, 2, 3, 4} and by_id[4]["result"] == {}
    for rid in (2, 3):
        error = by_id[rid]["error"]
        assert (error["code"], error["message"]) == (
            -32600, f"invalid_json (400): {envelope['message']}"), error
        same = ("code", "message", "status")
        assert {k: error["data"][k] for k in same} == {k: envelope[k] for k in same}
        assert "hex escape at line 1" in error["data"]["details"]["reason"]  # as over HTTP
        assert error["data"]["request_id"]  # the daemon's: its log names the request
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[None]["error"]["message"].startswith("Parse error: maximum recursion depth")


def test_a_message_that_fails_is_answered_alone_and_the_batch_keeps_the_rest(local, caplog):
    """A fault answering one message (here: the sessions store refuses the session an
    ``initialize`` opens) is that message's -32603, logged with the request id; the write made
    by the message before it keeps its answer, the ping after it its own."""
    caplog.set_level(logging.ERROR, logger="neuralmind.mcp")
    deny_once(_state(local.kernel).sessions.db.conn, sqlite3.SQLITE_INSERT, "sessions")
    r = local.post([
        jsonrpc("tools/call", {"name": "remember", "arguments": {
            "project": local.project, "title": "Written before a fault", "rationale": "kept"}}),
        jsonrpc_initialize("failing"), jsonrpc("ping", id=3)])
    assert r.status_code == 200 and "mcp-session-id" not in r.headers
    wrote, failed, pinged = r.json
    mid = wrote["result"]["structuredContent"]["id"]
    assert local.v1("GET", f"/v1/projects/{local.project}/memories/{mid}").json["title"] == \
        "Written before a fault"
    rid = failed["error"]["data"]["request_id"]
    assert failed == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32603, "message": "internal_error: internal error", "data": {
            "code": "internal_error", "message": "internal error", "status": 500,
            "request_id": rid, "details": {}}}}
    assert pinged == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert f"MCP initialize (JSON-RPC id 1) in request {rid} failed" in caplog.text
    assert "not authorized" in caplog.text  # the fault in the log, never in the answer

    deny_once(_state(local.kernel).sessions.db.conn, sqlite3.SQLITE_INSERT, "sessions")
    alone = local.post(jsonrpc_initialize("failing"))  # a lone message: JSON-RPC, not a 500
    assert alone.status_code == 200 and alone.json["error"]["code"] == -32603


def test_a_refusal_suggests_a_tool_only_to_a_role_that_may_call_it(team):
    """A reader is not shown build_index: told the project has no index, it reads who may
    build one, in a tool's text and a resource's error alike; a builder is told to call it."""
    reader = team.as_(team.tokens["reader"]).open()
    builder = team.as_(team.tokens["builder"]).open()
    assert "build_index" not in [t["name"] for t in reader.rpc("tools/list")["result"]["tools"]]
    lacks = ("the project has no code index yet: build_index needs index.build, which this "
             "token's role lacks: someone whose role holds it (builder or admin by default) "
             "can call it")
    assert reader.call("wakeup", project="a")["content"][0]["text"] == \
        f"index_not_built (409): {lacks}"
    assert builder.call("wakeup", project="a")["content"][0]["text"] == \
        "index_not_built (409): the project has no code index yet: call build_index"
    read = reader.rpc("resources/read", {"uri": "neuralmind://projects/a/wakeup"})["error"]
    assert (read["code"], read["message"]) == (-32600, f"index_not_built: {lacks}")
    assert read["data"]["code"] == "index_not_built"


def test_an_id_that_spells_a_route_in_a_project_that_is_not_answers_for_the_project(daemon):
    """``get_memory {"project": "nope", "memory_id": "stats"}`` blamed the memory id
    (``no memory with id stats in project nope``), and a NUL in the project went unrefused into
    the text: the route's own checks of the ids before the misrouted one come first."""
    daemon.start()
    calls = [jsonrpc("tools/call", {"name": "get_memory", "arguments": args}, id=rid)
             for rid, args in [(2, {"project": "nope", "memory_id": "stats"}),
                               (3, {"project": "nope", "memory_id": "x"}),
                               (4, {"project": "a\x00", "memory_id": "stats"})]]
    by_id = relay(daemon, [json.dumps(jsonrpc_initialize("t"))] + [json.dumps(c) for c in calls])
    codes = {rid: by_id[rid]["result"]["structuredContent"]["error"]["code"] for rid in (2, 3, 4)}
    assert codes == {2: "project_not_found", 3: "project_not_found", 4: "validation_error"}
    assert by_id[2]["result"]["content"][0]["text"] == by_id[3]["result"]["content"][0]["text"]
    assert "\x00" not in by_id[4]["result"]["content"][0]["text"]


def test_a_line_with_a_utf8_bom_is_read_over_stdio_as_over_http(daemon):
    """The relay answered -32700 ``Unexpected UTF-8 BOM`` where ``/v1/mcp`` opens a session."""
    daemon.start()
    by_id = relay(daemon, ["\ufeff" + json.dumps(jsonrpc_initialize("t")),
                           "\ufeff" + json.dumps(jsonrpc("ping", id=2))])
    assert set(by_id) == {1, 2}
    assert by_id[1]["result"]["serverInfo"]["name"] and by_id[2]["result"] == {}
