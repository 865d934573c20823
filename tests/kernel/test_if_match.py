"""``If-Match`` on a write that keeps no versions (a collection, a webhook, an ignore rule):
RFC 9110 §13.1.1 has the condition evaluated before the method, and a tag names a version
these resources do not have — so the write is refused with 412 and changes nothing, as a
memory's stale tag is; ``*`` holds, and reads (a search sent as POST included) ignore it."""

from __future__ import annotations

import pytest

from tests.support import LocalServer

STALE = {"If-Match": '"2026-01-01T00:00:00.000Z"'}


@pytest.fixture(scope="module")
def served(tmp_path_factory, backend):
    with LocalServer(tmp_path_factory.mktemp("ifmatch") / "home",
                     plugins=["auth", "memory", "index", "webhooks"],
                     config='[webhooks]\nallow_private = ["127.0.0.1/32"]\n') as server:
        repo = tmp_path_factory.mktemp("repo")
        (repo / "a.py").write_text("x = 1\n")
        yield server, server.register(repo)


def test_a_tag_on_a_write_without_versions_is_412_and_changes_nothing(served):
    server, pid = served
    coll = f"/v1/projects/{pid}/collections/mine"
    assert server.request("PUT", coll, json_body={"filters": {"tags": ["a"]}}).status == 201
    r = server.delete(coll, headers=STALE)
    assert (r.status, r.error["code"]) == (412, "precondition_failed"), r.body
    assert "compares If-Match with no version" in r.error["message"]
    assert server.get(coll).status == 200  # still there
    hook = server.post("/v1/webhooks", {"url": "http://127.0.0.1:9/x", "events": ["*"]}).json
    r = server.patch(f"/v1/webhooks/{hook['id']}", {"description": "changed"}, headers=STALE)
    assert r.status == 412
    assert server.get(f"/v1/webhooks/{hook['id']}").json["description"] == hook["description"]
    rules = f"/v1/projects/{pid}/ignore-rules"
    rule = server.post(rules, {"type": "extension", "value": ".tmp"}).json
    assert server.patch(f"{rules}/{rule['id']}", {"reason": "x"}, headers=STALE).status == 412
    assert server.delete(coll, headers={"If-Match": "*"}).status == 204  # * holds


def test_reads_ignore_it_and_a_memory_still_compares_it(served):
    server, pid = served
    search = server.post(f"/v1/projects/{pid}/memories/search", {"query": "x"}, headers=STALE)
    assert search.status == 200, search.body
    made = server.post(f"/v1/projects/{pid}/memories", {"title": "T", "rationale": "R"}).json
    one = f"/v1/projects/{pid}/memories/{made['id']}"
    assert server.patch(one, {"title": "U"}, headers=STALE).error["code"] == "precondition_failed"
    fresh = {"If-Match": f'"{made["updated_at"]}"'}
    assert server.patch(one, {"title": "U"}, headers=fresh).status == 200


def test_the_contract_lists_the_412_where_it_can_happen(served):
    server, _ = served
    paths = server.get("/v1/openapi.json").json["paths"]
    patch = paths["/v1/webhooks/{webhook_id}"]["patch"]["responses"]
    assert "compared with no version" in patch["412"]["description"]
    assert "412" not in paths["/v1/webhooks/{webhook_id}"]["get"]["responses"]
    assert "412" not in paths["/v1/projects/{project_id}/memories/search"]["post"]["responses"]
