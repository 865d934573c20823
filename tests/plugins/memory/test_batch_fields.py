"""What a request names is what it gets: a batch item's field its op does not take was dropped
and the item read "ok" (a patch's `title` or misspelt `tag`, mem0's `user_id`, an `if_match`
on a delete, which then deleted a record changed since); now each is the item's own error,
and `if_match` is honoured as the single routes' `If-Match` is. And a search that answers
nothing names every filter that left no record, not the status alone."""

from __future__ import annotations

import pytest

STALE = "2000-01-01T00:00:00.000Z"


def batch(api, items: list[dict], atomic: bool = False):
    return api.server.post(api.url(tail="batch"), {"items": items, "atomic": atomic})


def errors(result: dict) -> list[tuple]:
    return [(tuple(e["loc"]), e["type"]) for e in result["errors"]]


@pytest.mark.parametrize("item, field", [
    ({"op": "patch", "title": "renamed"}, "title"),
    ({"op": "patch", "tag": ["x"]}, "tag"),
    ({"op": "patch", "data": "new text"}, "data"),
    ({"op": "patch", "reason": "outdated", "rationale": "changed"}, "reason"),
    ({"op": "invalidate", "reason": "outdated", "tags": ["x"]}, "tags"),
    ({"op": "delete", "reason": "outdated"}, "reason"),
])
def test_a_field_the_op_does_not_take_is_the_items_error(api, item, field):
    target = api.create(title="Batch target", rationale="orig", tags=["bt"])
    r = batch(api, [{**item, "id": target["id"]}])
    assert r.status == 200, r.body
    [result] = r.json["items"]
    assert (result["status"], errors(result)) == ("error", [(("items", 0, field),
                                                             "extra_forbidden")])
    msg = result["errors"][0]["msg"]
    assert msg.startswith(f"a {item['op']} item does not take {field}: it takes "), msg
    assert "if_match" in msg and "supersedes" not in msg  # linked elsewhere: not offered
    now = api.get(target["id"])
    assert {k: now[k] for k in ("title", "rationale", "tags", "status", "updated_at")} == {
        k: target[k] for k in ("title", "rationale", "tags", "status", "updated_at")}
    assert [e["kind"] for e in api.history(target["id"])] == ["created"]


def test_mem0_fields_on_a_create_are_refused_by_name_and_nothing_is_written(api):
    items = [{"op": "create", "id": "good", "title": "kept out", "rationale": "r"},
             {"op": "create", "id": "mem0", "title": "b1", "rationale": "r", "user_id": "alice",
              "metadata": {"a": 1}},
             {"op": "create", "id": "matched", "title": "t", "rationale": "r",
              "if_match": "*"}]
    r = batch(api, items, atomic=True)
    assert r.status == 422, r.body
    assert r.error["message"] == "2 batch item(s) did not validate; nothing was written"
    said = {tuple(e["loc"]): e for e in r.error["details"]["errors"]}
    assert sorted(said) == [("body", "items", 1, "metadata"), ("body", "items", 1, "user_id"),
                            ("body", "items", 2, "if_match")]
    assert {e["type"] for e in said.values()} == {"extra_forbidden"}
    assert said[("body", "items", 1, "user_id")]["msg"].startswith(
        "a create item does not take user_id: it takes agent, author, commit_sha, ")
    assert api.server.get(api.base + "?status=ALL").json["items"] == []
    r = batch(api, items)
    assert [x["status"] for x in r.json["items"]] == ["ok", "error", "error"]
    assert [x["id"] for x in api.server.get(api.base).json["items"]] == ["good"]


def test_if_match_on_an_item_is_honoured_as_the_single_routes_honour_it(api):
    """PATCH, invalidate and DELETE take If-Match (412 when stale); so do their items, judged
    on the record as the items before leave it."""
    a, b, c = (api.create(id=mid, title=f"Record {mid}", rationale="r") for mid in "abc")
    r = batch(api, [{"op": "delete", "id": "a", "if_match": STALE},
                    {"op": "patch", "id": "b", "rationale": "x", "if_match": STALE},
                    {"op": "invalidate", "id": "c", "reason": "old", "if_match": STALE}])
    assert r.status == 200, r.body
    for i, result in enumerate(r.json["items"]):
        assert errors(result) == [(("items", i, "if_match"), "precondition_failed")], result
    now = r.json["items"][0]["errors"][0]["msg"]
    assert now == f"the memory changed since that updated_at: it is now {a['updated_at']}"
    for rec in (a, b, c):
        assert [e["kind"] for e in api.history(rec["id"])] == ["created"]

    r = batch(api, [{"op": "patch", "id": "b", "rationale": "first", "if_match": b["updated_at"]},
                    {"op": "patch", "id": "b", "rationale": "second",  # b moved on: stale
                     "if_match": b["updated_at"]},
                    {"op": "invalidate", "id": "c", "reason": "old",
                     "if_match": f'"{c["updated_at"]}"'},  # quoted, as a header's ETag
                    {"op": "delete", "id": "a", "if_match": "*"},
                    {"op": "patch", "id": "c", "rationale": "weak", "if_match": f'W/"{STALE}"'}])
    assert [x["status"] for x in r.json["items"]] == ["ok", "error", "ok", "ok", "error"]
    assert errors(r.json["items"][1]) == [(("items", 1, "if_match"), "precondition_failed")]
    assert api.get("b")["rationale"] == "first" and api.get("c")["status"] == "INVALIDATED"
    assert api.server.get(api.url("a")).status == 404
    r = batch(api, [{"op": "patch", "id": "b", "if_match": "x" * 65}])
    assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == [
        "body", "items", 0, "if_match"]


def test_a_patch_item_changing_nothing_reads_as_the_single_patch_answers(api):
    """An empty PATCH is a 200 that writes nothing; an empty patch item is ok and writes
    nothing — neither says more, and neither names a field it dropped any more."""
    rec = api.create(title="Unchanged", rationale="r", tags=["t"])
    single = api.server.patch(api.url(rec["id"]), {})
    assert single.status == 200 and single.json["updated_at"] == rec["updated_at"]
    r = batch(api, [{"op": "patch", "id": rec["id"]},
                    {"op": "patch", "id": rec["id"], "tags": ["t"]}])
    assert [(x["status"], x["errors"]) for x in r.json["items"]] == [("ok", [])] * 2
    assert [e["kind"] for e in api.history(rec["id"])] == ["created"]


def test_a_search_finding_no_record_names_every_filter_applied(api):
    api.create(title="Bulk record", rationale="bulk rationale", tags=["qa"], author="")
    found = api.search("bulk", tag=["nonexistent-tag"])
    assert (found["results"], found["notice"]) == ([], "nothing to search: no record matches "
                                                       "the filters (status ACTIVE, tag "
                                                       "nonexistent-tag)")
    found = api.search("bulk", tag=["a", "b"], kind=["fact"], author="ana",
                       min_confidence=0.5, created_after="2020-01-01", mode="keyword")
    assert found["notice"] == ("nothing to search: no record matches the filters (status "
                               "ACTIVE, tag a or b, kind fact, author ana, created_after "
                               "2020-01-01, min_confidence 0.5)")
    assert api.search("bulk", status="invalidated", agent="")["notice"] == (
        'nothing to search: no record matches the filters (status INVALIDATED, agent "")')
    assert api.search("bulk", tag=["qa"], author="")["results"]  # the filters do match it


@pytest.mark.parametrize("status", ["ARCHIVED", "INVALIDATED", "SUPERSEDED", "MERGED"])
def test_a_record_created_out_of_force_cannot_supersede(api, status):
    """A create with a retired `status` and `supersedes` was rolled back by the link's rule
    (never retire a record in force for one out of force) as an undeclared 409 that said to
    restore the new record, which did not exist. Now it is the create's own 422."""
    live = api.create(title="Use Redis for the session cache", rationale="fast")["id"]
    r = api.server.post(api.base, {"id": "old-cache-decision", "status": status,
                                   "title": "Old decision: memcached for sessions",
                                   "rationale": "historical", "supersedes": [live]})
    assert r.status == 422, r.body
    [error] = r.error["details"]["errors"]
    assert (tuple(error["loc"]), error["type"]) == (("body", "supersedes"), "not_in_force")
    assert error["msg"] == (f"a record created {status}, not in force (ACTIVE or STALE), cannot "
                            "supersede another: create it ACTIVE, or leave supersedes out")
    assert api.server.get(api.url("old-cache-decision")).status == 404
    assert api.get(live)["status"] == "ACTIVE"
    assert [e["kind"] for e in api.history(live)] == ["created"]

    # without supersedes it is created as asked; in force it supersedes as before
    assert api.create(id="old-cache-decision", status=status,
                      title="Old decision: memcached for sessions")["status"] == status
    assert api.create(title="Use Valkey for the session cache", status="STALE",
                      supersedes=[live])["status"] == "STALE"
    assert api.get(live)["status"] == "SUPERSEDED"
