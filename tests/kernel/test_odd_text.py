"""Odd text the kernel answers alike on both backends, before any plugin sees it: a NUL in a
path parameter or in the ``project`` filter (PostgreSQL's text cannot hold one), a JSON body
starting with a byte-order mark, and text made only of invisible characters. Driven over HTTP,
through the Python client and through MCP, against a server with every bundled plugin."""

from __future__ import annotations

import codecs
import json
import re

import pytest

from kernel.models import no_nul
from neuralmind.client import NeuralMindClient, ValidationFailed
from tests.support import DEFAULT_PLUGINS, LocalServer

PLUGINS = [*DEFAULT_PLUGINS, "webhooks"]


def nul_message() -> str:
    """What ``no_nul`` says of a text holding NUL: the message every such refusal gives."""
    with pytest.raises(ValueError) as refused:
        no_nul("a\x00")
    return str(refused.value)


NO_NUL = nul_message()


@pytest.fixture(scope="module")
def served(tmp_path_factory, backend):
    """Every bundled plugin and the webhooks on the module's backend, with a project and
    one record in it."""
    root = tmp_path_factory.mktemp("odd-text")
    (root / "repo").mkdir()
    with LocalServer(root / "home", plugins=PLUGINS) as server:
        server.pid = server.register(root / "repo")
        r = server.post(f"/v1/projects/{server.pid}/memories",
                        {"title": "Kept as it is", "rationale": "Nothing may change it"})
        assert r.status == 201, r.body
        server.record = r.json
        yield server


def nul_in(r, *names: str) -> None:
    """``r`` is the 422 naming each path parameter in ``names`` as holding NUL."""
    assert (r.status, r.error["code"]) == (422, "validation_error"), r.body
    assert r.error["message"] == "the request did not validate"
    assert r.error["details"]["errors"] == [
        {"loc": ["path", name], "msg": NO_NUL, "type": "value_error"} for name in names]


def unchanged(server) -> None:
    """The project and its one record are as the fixture made them."""
    assert server.get(f"/v1/projects/{server.pid}").status == 200
    listed = server.get(f"/v1/projects/{server.pid}/memories?status=ALL").json["items"]
    fields = ("id", "title", "rationale", "status", "tags", "updated_at")
    assert [[m[k] for k in fields] for m in listed] == [[server.record[k] for k in fields]]


def test_a_nul_in_any_path_parameter_is_a_422_naming_it_on_every_route(served):
    """Each route with a parameter in its path, once per parameter: that one holding NUL, the
    others real (the project) or plain — the kernel answers before any lookup, so no store
    sees it (PostgreSQL answered 500, SQLite 404)."""
    wrong = []
    for uri, method, _, _ in served.kernel.routes:
        names = re.findall(r"{(\w+)}", uri)
        for name in names:
            values = {n: served.pid if n == "project_id" else "x" for n in names}
            values[name] = "a%00"
            path = re.sub(r"{(\w+)}", lambda m: values[m[1]], uri)
            r = served.request(method.upper(), path)
            if r.status != 422 or r.error["details"]["errors"] != [
                    {"loc": ["path", name], "msg": NO_NUL, "type": "value_error"}]:
                wrong.append((method, path, r.status, r.body[:200]))
    assert wrong == []
    unchanged(served)


@pytest.mark.parametrize("segment", ["a%00", "%00%00", "%%00", "p_%00"])
def test_a_project_id_holding_nul_is_refused_before_it_is_looked_up(served, segment):
    nul_in(served.get(f"/v1/projects/{segment}"), "project_id")


def test_every_parameter_holding_nul_is_named(served):
    nul_in(served.delete("/v1/projects/a%00/memories/b%00"), "project_id", "memory_id")
    unchanged(served)


def test_credentials_are_still_asked_first(served):
    """401 before 422, as for a bad body: who may not call learns nothing of the path."""
    r = served.get("/v1/projects/a%00", auth=False)
    assert (r.status, r.json["error"]["code"]) == (401, "unauthorized")


@pytest.mark.parametrize("route", ["/v1/jobs", "/v1/events"])
def test_a_project_filter_holding_nul_is_a_422(served, route):
    r = served.get(f"{route}?project=a%00")
    assert (r.status, r.error["code"]) == (422, "validation_error")
    assert r.error["details"]["errors"] == [
        {"loc": ["query", "project"], "msg": NO_NUL, "type": "value_error"}]


def test_the_client_gets_the_422_for_an_id_holding_nul(served):
    nm = NeuralMindClient(served.url, served.token)
    memories = nm.project(served.pid).memories
    for call, name in ((lambda: nm.projects.get("p_\x00"), "project_id"),
                       (lambda: nm.jobs.get("a\x00"), "job_id"),
                       (lambda: memories.get("a\x00"), "memory_id")):
        with pytest.raises(ValidationFailed) as refused:
            call()
        assert refused.value.status == 422
        assert refused.value.details["errors"] == [
            {"loc": ["path", name], "msg": NO_NUL, "type": "value_error"}]
    unchanged(served)


def test_an_mcp_tool_gets_the_422_for_an_id_holding_nul(served):
    headers = {"MCP-Protocol-Version": "2025-06-18"}
    r = served.post("/v1/mcp", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}, headers=headers)
    assert r.status == 200, r.body
    headers["Mcp-Session-Id"] = r.headers["mcp-session-id"]
    for tool, args in (("get_memory", {"project": served.pid, "memory_id": "a\x00"}),
                       ("memory_history", {"project": served.pid, "memory_id": "a\x00"}),
                       ("get_memory", {"project": "p_\x00", "memory_id": "a"})):
        r = served.post("/v1/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                    "params": {"name": tool, "arguments": args}},
                        headers=headers)
        assert r.status == 200, r.body
        result = r.json["result"]
        assert result["isError"] is True
        error = result["structuredContent"]["error"]
        assert (error["status"], error["code"]) == (422, "validation_error")
        assert [e["msg"] for e in error["details"]["errors"]] == [NO_NUL]
    unchanged(served)


def test_a_json_body_after_a_byte_order_mark_is_read(served):
    """RFC 8259 §8.1: a parser may ignore a leading BOM, which editors write."""
    base, as_json = f"/v1/projects/{served.pid}/memories", {"Content-Type": "application/json"}
    body = codecs.BOM_UTF8 + json.dumps({"title": "Written after a BOM", "rationale": "r"}).encode()
    r = served.post(base, body=body, headers=as_json)
    assert r.status == 201, r.body
    assert r.json["title"] == "Written after a BOM"
    assert served.delete(f"{base}/{r.json['id']}").status == 204
    # one BOM is the encoding's mark; a second one is text where JSON has none
    r = served.post(base, body=codecs.BOM_UTF8 + body, headers=as_json)
    assert (r.status, r.json["error"]["code"]) == (400, "invalid_json")
    unchanged(served)


INVISIBLE = ["\u200b", "\u2060", "\ufeff", "\u200d", "\u200e", " \u200b\u00a0\u2060 ",
             "\u180e", "\u00ad"]


@pytest.mark.parametrize("blank", INVISIBLE)
def test_text_of_invisible_characters_only_is_blank(served, blank):
    """Spaces and format characters (Unicode Cf: zero-width space, word joiner, BOM, …) say
    nothing: refused as ``is blank``, as three spaces are."""
    base = f"/v1/projects/{served.pid}/memories"
    r = served.post(base, {"title": blank, "rationale": blank})
    assert r.status == 422, r.body
    assert {(tuple(e["loc"]), e["msg"]) for e in r.json["error"]["details"]["errors"]} == {
        (("body", field), "is blank: it holds only whitespace and invisible characters")
        for field in ("title", "rationale")}
    r = served.post(f"{base}/{served.record['id']}/tags", {"tags": [blank]})
    assert r.status == 422, r.body
    assert [(e["loc"], e["msg"]) for e in r.error["details"]["errors"]] == [
        (["body", "tags", 0], "is blank: it holds only whitespace and invisible characters")]
    unchanged(served)


@pytest.mark.parametrize("title", ["👩\u200d💻 pairs on the parser", "\u200bTrimmed?",
                                   "Arabic \u200fمرحبا", "👨\u200d👩\u200d👧"])
def test_real_text_holding_format_characters_passes(served, title):
    """A zero-width joiner inside an emoji sequence, a mark beside letters: text, kept."""
    base = f"/v1/projects/{served.pid}/memories"
    r = served.post(base, {"title": title, "rationale": "r"})
    assert r.status == 201, r.body
    assert r.json["title"] == title
    assert served.delete(f"{base}/{r.json['id']}").status == 204
