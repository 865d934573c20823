"""The Streamable HTTP transport at /v1/mcp, in process: sessions, protocol versions, batches,
notifications, server-sent progress, and the kernel's guards in front of it all."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plugins.mcp.tools import SPECS
from tests.plugins.mcp.conftest import jsonrpc
from tests.support import ROOT

INIT = {"protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}


def test_initialize_opens_a_session_in_the_version_the_client_asked(local):
    app = local.as_(local.token)
    r = app.post(jsonrpc("initialize", INIT))
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    result = r.json["result"]
    assert result["protocolVersion"] == "2025-03-26"
    assert result["serverInfo"]["name"] == "neuralmind"
    assert set(result["capabilities"]) == {"tools", "resources"}
    assert "wakeup" in result["instructions"]
    app.session = r.headers["mcp-session-id"]
    # the session keeps its version: a request without the header is answered in it
    r = app.http.simulate_post("/v1/mcp", json=jsonrpc("ping"), headers={
        "Authorization": f"Bearer {local.token}", "Mcp-Session-Id": app.session})
    assert r.json == {"jsonrpc": "2.0", "id": 1, "result": {}}
    app.session = None
    newer = app.post(jsonrpc("initialize", {**INIT, "protocolVersion": "2099-01-01"}))
    assert newer.json["result"]["protocolVersion"] == "2025-11-25"


def test_sessions_are_checked_and_ended(local, team):
    app = local.as_(local.token).open()
    assert app.post(jsonrpc("ping")).status_code == 200
    wrong = app.post(jsonrpc("ping"), **{"MCP-Protocol-Version": "2025-03-26"})
    assert wrong.status_code == 400
    assert wrong.json["error"]["code"] == "unsupported_protocol_version"
    assert wrong.json["error"]["details"] == {"supported": ["2025-06-18"]}
    assert app.http.simulate_delete("/v1/mcp", headers=app.headers()).status_code == 204
    ended = app.post(jsonrpc("ping"))
    assert ended.status_code == 404 and ended.json["error"]["code"] == "mcp_session_not_found"
    unnamed = app.http.simulate_delete("/v1/mcp", headers={"Authorization": f"Bearer {app.token}"})
    assert unnamed.status_code == 400 and "Mcp-Session-Id" in unnamed.json["error"]["message"]
    # another token cannot use (or learn of) someone's session
    alice = team.as_(team.tokens["reader"]).open()
    bob = team.as_(team.tokens["admin"])
    bob.session = alice.session
    stolen = bob.post(jsonrpc("ping"))
    assert stolen.status_code == 404 and stolen.json["error"]["code"] == "mcp_session_not_found"


def test_the_endpoint_s_project_must_be_one_the_token_reaches(local, team):
    """``?project=`` is every call's default and the instructions name it: a project that is
    not there is refused at initialize, with no session opened; an empty one, at once."""
    app = local.as_(local.token)
    refused = app.post(jsonrpc("initialize", INIT), query="project=p_000000000000")
    assert refused.status_code == 200 and "mcp-session-id" not in refused.headers
    error = refused.json["error"]
    assert error["code"] == -32600 and error["data"]["code"] == "project_not_found"
    assert error["message"] == ("project_not_found: the project query parameter of this "
                                "endpoint's URL, 'p_000000000000', is no project this token "
                                "reaches (list_projects gives the ids)")
    known = app.post(jsonrpc("initialize", INIT), query=f"project={local.project}").json
    assert known["result"]["instructions"].endswith(f"without one they act on {local.project}.")
    hidden = team.as_(team.only_a["reader"]).post(jsonrpc("initialize", INIT), query="project=b")
    assert hidden.json["error"]["data"]["code"] == "project_not_found"
    empty = app.post(jsonrpc("ping"), query="project=")
    assert empty.status_code == 422
    assert empty.json["error"]["details"]["errors"][0]["msg"] == (
        "must be a project id, not an empty string: name one (list_projects gives the ids), or "
        "leave project out of the URL")


def test_lists_of_one_page_refuse_a_cursor_as_resources_list_does(local):
    for method in ("tools/list", "resources/templates/list", "resources/list"):
        error = local.rpc(method, {"cursor": "zzz"})["error"]
        assert error["code"] == -32602 and error["message"].startswith("invalid cursor"), method
    assert "tools" in local.rpc("tools/list", {})["result"]


def test_unknown_protocol_versions_are_refused_so_a_2026_probe_falls_back(local):
    app = local.as_(local.token)
    probe = app.post(jsonrpc("server/discover", {}), **{"MCP-Protocol-Version": "2026-07-28"})
    assert probe.status_code == 400
    assert "2025-11-25" in probe.json["error"]["details"]["supported"]
    plain = app.post(jsonrpc("server/discover", {}))
    assert plain.json["error"]["code"] == -32601


def test_json_rpc_errors_batches_and_notifications(local):
    app = local.as_(local.token)
    assert app.rpc("prompts/list")["error"]["code"] == -32601
    assert app.rpc("tools/call", {"name": "rm_rf", "arguments": {}})["error"]["code"] == -32602
    bad = app.rpc("tools/call", {"arguments": {}})
    assert bad["error"]["code"] == -32602 and "invalid params" in bad["error"]["message"]
    quiet = app.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert quiet.status_code == 202 and quiet.text == ""
    batch = app.post([jsonrpc("ping", id=1), {"jsonrpc": "2.0", "method": "notifications/x"},
                      jsonrpc("tools/list", id="two")])
    assert batch.status_code == 200
    assert [m["id"] for m in batch.json] == [1, "two"]
    assert batch.json[0]["result"] == {} and batch.json[1]["result"]["tools"]
    empty = app.post([])  # no request at all (JSON-RPC): refused, not a silent 202
    assert empty.status_code == 422 and empty.json["error"]["code"] == "validation_error"


def test_the_kernel_guards_the_endpoint_like_any_route(local):
    app = local.as_(local.token)
    get = app.http.simulate_get("/v1/mcp", headers=app.headers())
    assert get.status_code == 405 and get.json["error"]["code"] == "method_not_allowed"
    anonymous = app.http.simulate_post("/v1/mcp", json=jsonrpc("ping"))
    assert anonymous.status_code == 401 and anonymous.json["error"]["code"] == "unauthorized"
    rebinding = app.http.simulate_post("/v1/mcp", json=jsonrpc("ping"),
                                       headers={**app.headers(), "Host": "evil.example"})
    assert rebinding.json["error"]["code"] == "host_not_allowed"
    broken = app.http.simulate_post("/v1/mcp", body=b"{not json", headers={
        **app.headers(), "Content-Type": "application/json"})
    assert broken.status_code == 400 and broken.json["error"]["code"] == "invalid_json"
    huge = app.post(jsonrpc("tools/call", {"name": "recall", "arguments": {
        "query": "x" * (2 * 1024 * 1024)}}))
    assert huge.status_code == 413 and huge.json["error"]["code"] == "payload_too_large"


def test_invalid_json_rpc_is_answered_by_its_id_in_one_plain_sentence(local):
    """JSON-RPC 2.0: -32600 Invalid Request carrying the request's id when it can be read; a
    lone message without one fails the HTTP request with a 422 saying what is wrong — never
    pydantic's list of the union's members that did not match."""
    app = local.as_(local.token)
    for body, why in (
            ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": [1]},
             "params must be an object"),
            ({"jsonrpc": "1.0", "id": "four", "method": "ping"}, 'jsonrpc must be "2.0"'),
            ({"jsonrpc": "2.0", "id": 5, "method": 7}, "method must be a string"),
            ({"jsonrpc": "2.0", "id": 6, "error": {"code": "x", "message": "m"}},
             "error.code: Input should be a valid integer, unable to parse string as an "
             "integer")):
        r = app.post(body)
        assert r.status_code == 200, r.text
        assert (r.json["id"], r.json["error"]["code"], r.json["error"]["message"]) == (
            body["id"], -32600, f"Invalid Request: {why}")
    anonymous = app.post({"jsonrpc": "2.0", "id": None, "method": "ping"})
    assert anonymous.status_code == 422
    assert anonymous.json["error"]["message"] == \
        "not a JSON-RPC message: id must be a string or an integer (MCP never takes a null id)"
    assert [e["loc"] for e in anonymous.json["error"]["details"]["errors"]] == [["body", "id"]]
    shaped = app.post({"jsonrpc": "2.0", "id": {}, "method": "ping"})  # not null: not said so
    assert shaped.json["error"]["message"] == \
        "not a JSON-RPC message: id must be a string or an integer"
    for body in (5, "ping", [5]):
        shapeless = app.post(body)
        assert shapeless.status_code == 422
        [only] = shapeless.json["error"]["details"]["errors"]
        assert only["msg"] == ("the body is one JSON-RPC message (an object) or a batch of "
                               "them (a non-empty array of objects)"), only
    # in a batch each message is answered in turn, an invalid one without an id by null
    batch = app.post([jsonrpc("ping", id=1), {"jsonrpc": "2.0", "method": ["x"]},
                      {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": "p"}])
    assert [(m["id"], m.get("error", {}).get("code")) for m in batch.json] == [
        (1, None), (None, -32600), (2, -32600)]
    # the route publishes what it takes: any object (or batch of them), answered in JSON-RPC
    spec = app.http.simulate_get("/v1/openapi.json").json
    body = spec["paths"]["/v1/mcp"]["post"]["requestBody"]["content"]["application/json"]
    published = spec["components"]["schemas"][body["schema"]["$ref"].rsplit("/", 1)[1]]
    assert [s["type"] for s in published["oneOf"]] == ["object", "array"]
    assert "-32600" in published["oneOf"][0]["description"]


def test_build_progress_is_streamed_as_server_sent_events(local):
    app = local.as_(local.token)
    (local.kernel.home.parent / "repo" / "more.py").write_text("def more():\n    return 2\n")
    r = app.post(jsonrpc("tools/call", {"name": "build_index", "arguments": {
        "project": local.project, "full": True}, "_meta": {"progressToken": "b1"}}, id=7),
        Accept="application/json, text/event-stream")
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
    events = [json.loads(block.split("data: ", 1)[1]) for block in r.text.split("\n\n") if block]
    *progress, last = events
    assert progress and all(e["method"] == "notifications/progress" for e in progress)
    assert all(e["params"]["progressToken"] == "b1" for e in progress)
    assert "/2 files parsed" in progress[0]["params"]["message"]
    assert last["id"] == 7 and last["result"]["structuredContent"]["status"] == "done"
    # without SSE in Accept the same call answers JSON, the progress dropped
    plain = app.post(jsonrpc("tools/call", {"name": "build_index", "arguments": {
        "project": local.project}, "_meta": {"progressToken": "b2"}}), Accept="application/json")
    assert plain.headers["content-type"].startswith("application/json")
    assert plain.json["result"]["structuredContent"]["status"] == "done"


def test_build_progress_only_increases_and_reaches_its_total_when_done(tmp_path):
    """MCP: each notification's progress above the last. The model embeds on after the last
    file is parsed, so files alone would sit at their total (a build looking finished) and
    repeat it: the embedding is counted, and only the finished job reaches the total."""
    from tests.plugins.mcp.conftest import App, _kernel
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(40):
        (repo / f"m{i}.py").write_text("".join(
            f'def f{i}_{j}(x):\n    """Step {j} of module {i}: turn x into {j}."""\n'
            f"    return x + {j}\n\n" for j in range(15)))
    kernel = _kernel(tmp_path / "home")
    try:
        app = App(kernel, (kernel.home / "token").read_text().strip())
        pid = app.v1("POST", "/v1/projects", json={"path": str(repo)}).json["id"]
        r = app.post(jsonrpc("tools/call", {"name": "build_index", "arguments": {"project": pid},
                                            "_meta": {"progressToken": "p"}}),
                     Accept="application/json, text/event-stream")
        events = [json.loads(b.split("data: ", 1)[1]) for b in r.text.split("\n\n") if b]
        *notes, last = events
        assert last["result"]["structuredContent"]["status"] == "done"
        steps = [(n["params"]["progress"], n["params"]["total"]) for n in notes]
        assert len(steps) > 1, steps
        assert all(a[0] < b[0] for a, b in zip(steps, steps[1:])), steps
        assert all(p < total for p, total in steps[:-1]), steps
        assert steps[-1][0] == steps[-1][1] == 40 + last["result"]["structuredContent"][
            "result"]["chunks_embedded"]
    finally:
        kernel.shutdown()


ARGUMENT = st.one_of(st.none(), st.booleans(), st.integers(-5, 10 ** 6), st.text(max_size=40),
                     st.lists(st.text(max_size=10), max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from([s.name for s in SPECS if s.name != "build_index"]),
       arguments=st.dictionaries(st.sampled_from(
           ["project", "memory_id", "query", "title", "rationale", "mode", "limit", "n",
            "question", "context_budget", "path", "status", "tags", "cursor", "confidence"]),
           ARGUMENT, max_size=6))
def test_no_arguments_make_a_tool_call_fail_outside_the_protocol(local, tool, arguments):
    """Whatever a model sends, the answer is a tool result (maybe an error), never a 500."""
    if tool == "register_project" and isinstance(arguments.get("path"), str):
        arguments["path"] = "/nonexistent/" + arguments["path"]  # never register real folders
    r = local.post(jsonrpc("tools/call", {"name": tool, "arguments": arguments}))
    assert r.status_code == 200, r.text
    result = r.json["result"]
    assert result["content"][0]["type"] == "text"
    if result["isError"]:
        assert result["structuredContent"]["error"]["status"] < 500, result


def test_a_worker_loads_the_wire_types_alone_and_each_version_s_models_on_the_first_message(
        tmp_path):
    """What a worker imports for /v1/mcp (plugins/mcp/protocol.py): the `mcp` package would
    load the SDK's client and server (~0.5 s a worker), and each protocol version's models
    (~0.2 s) wait for the first message. In a fresh interpreter: this one has both loaded."""
    script = """
import sys, falcon.testing
from kernel.app import Kernel
loaded = lambda: sorted(m for m in ("mcp", "mcp_types.methods") if m in sys.modules)
kernel = Kernel()
print(loaded())
token = open(sys.argv[1]).read().strip()
r = falcon.testing.TestClient(kernel.app, headers={"Host": "127.0.0.1"}).simulate_post(
    "/v1/mcp", headers={"Authorization": "Bearer " + token},
    json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
print(r.status_code, loaded())
"""
    env = {**os.environ, "NEURALMIND_HOME": str(tmp_path), "NEURALMIND_PLUGINS": "auth,mcp",
           "NEURALMIND_EMBEDDINGS_WARM": "0"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "token")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "200 ['mcp_types.methods']"]
