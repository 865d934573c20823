"""Contradictions through HTTP: found on create and patch, listed, checked on demand, each
resolution strategy doing what it says, the per-project config and auto-resolve."""

from __future__ import annotations

import pytest

MD5 = {"title": "Use password_encryption = md5", "rationale": "Role passwords are MD5 hashes.",
       "files_affected": ["deploy/postgresql.conf"], "tags": ["db"]}
SCRAM = {"title": "Use password_encryption = scram-sha-256",
         "rationale": "PostgreSQL 14 made scram-sha-256 the default password_encryption.",
         "files_affected": ["deploy/postgresql.conf"], "tags": ["db"]}


def conflicts(api):
    return f"/v1/projects/{api.pid}/contradictions"


def pair(api, value: str = "scram-sha-256", **older):
    a = api.create(**{**MD5, **older})
    b = api.create(**{**SCRAM, "title": f"Use password_encryption = {value}"})
    assert b["contradictions"]["count"] == 1, b["contradictions"]
    return a, b, b["contradictions"]["items"][0]


def test_a_create_reports_the_conflict_and_both_histories_keep_it(api):
    a, b, c = pair(api)
    assert a["contradictions"] == {"count": 0, "items": []}
    assert (c["a"], c["b"], c["status"], c["kind"]) == (a["id"], b["id"], "open", "setting_value")
    assert "'md5' vs B 'scram-sha-256'" in c["explanation"] and c["confidence"] >= 0.5
    for mid, other in ((a["id"], b["id"]), (b["id"], a["id"])):
        ev = [e for e in api.history(mid) if e["kind"] == "contradiction"]
        assert ev[0]["changes"] == {"contradiction": {"id": c["id"], "with": other}}
        assert ev[0]["note"] == c["explanation"]
    page = api.server.get(conflicts(api)).json
    assert [x["id"] for x in page["items"]] == [c["id"]] and page["next_cursor"] is None
    assert api.server.get(conflicts(api) + f"/{c['id']}").json == c
    assert api.server.get(conflicts(api) + f"?memory_id={a['id']}").json["items"] == [c]
    assert api.server.get(conflicts(api) + "?status=resolved").json["items"] == []
    assert api.server.get(conflicts(api) + "/c_nope").error["code"] == "contradiction_not_found"
    # a record nobody has is 404, not an empty page that reads as "none involve it"
    assert api.server.get(conflicts(api) + "?memory_id=nope").error["code"] == "memory_not_found"
    # found once: a check finds the stored one, a compatible record finds none
    again = api.server.post(conflicts(api) + f"/check/{b['id']}")
    assert again.status == 200 and again.json["items"] == [c] and again.json["count"] == 1
    calm = api.create(title="Rotate password_encryption keys yearly", rationale="Audit asks.",
                      files_affected=["deploy/postgresql.conf"])
    assert calm["contradictions"]["count"] == 0


def test_a_patch_is_checked_too(api):
    a = api.create(**MD5)
    b = api.create(title="Use password_encryption for role passwords", rationale="Set it.",
                   files_affected=MD5["files_affected"])
    assert b["contradictions"]["count"] == 0
    r = api.server.patch(api.url(b["id"]), {"rationale": "password_encryption = scram-sha-256 "
                                                         "everywhere."})
    assert r.status == 200
    found = api.server.get(conflicts(api) + f"?memory_id={a['id']}").json["items"]
    assert len(found) == 1 and {found[0]["a"], found[0]["b"]} == {a["id"], b["id"]}


def test_the_explicit_check_uses_a_wider_net(api):
    a = api.create(**{**MD5, "files_affected": []})
    b = api.create(**{**SCRAM, "files_affected": ["other.conf"]})  # no shared file: not a hint
    assert b["contradictions"]["count"] == 0
    r = api.server.post(conflicts(api) + f"/check/{b['id']}")
    assert r.status == 200 and r.json["count"] == 1
    assert r.json["items"][0]["a"] == a["id"] and r.json["memory_id"] == b["id"]
    assert api.server.post(conflicts(api) + "/check/nope").error["code"] == "memory_not_found"


def test_the_check_works_beside_a_record_long_enough_for_passages(api):
    a = api.create(**{**MD5, "files_affected": []})
    api.create(title="Cache the parsed config", rationale=" ".join(f"w{i}" for i in range(400)))
    b = api.create(**{**SCRAM, "files_affected": ["other.conf"]})
    r = api.server.post(conflicts(api) + f"/check/{b['id']}")
    assert r.status == 200 and r.json["count"] == 1 and r.json["items"][0]["a"] == a["id"]


@pytest.mark.parametrize("strategy, kept, superseded", [
    ("keep_newest", "b", "a"), ("keep_oldest", "a", "b"), ("keep_important", "a", "b")])
def test_strategies_that_keep_one(api, strategy, kept, superseded):
    a, b, c = pair(api, importance=0.95)
    recs = {"a": a, "b": b}
    r = api.server.post(conflicts(api) + f"/{c['id']}/resolve", {"strategy": strategy})
    assert r.status == 200, r.body
    out = r.json
    assert out["kept"] == [recs[kept]["id"]] and out["superseded"] == [recs[superseded]["id"]]
    assert out["created"] is None
    assert out["contradiction"]["status"] == "resolved"
    assert out["contradiction"]["strategy"] == strategy
    assert out["contradiction"]["resolved_by"] == "local"
    assert api.get(recs[kept]["id"])["status"] == "ACTIVE"
    assert api.get(recs[superseded]["id"])["status"] == "SUPERSEDED"
    links = api.server.get(api.url(recs[kept]["id"], "links")).json["items"]
    assert [(x["type"], x["target"]) for x in links] == [("supersedes", recs[superseded]["id"])]
    assert api.history(recs[superseded]["id"])[-1]["kind"] == "contradiction_resolved"
    again = api.server.post(conflicts(api) + f"/{c['id']}/resolve", {"strategy": strategy})
    assert again.status == 409 and again.error["code"] == "invalid_transition"
    assert api.server.get(conflicts(api)).json["items"] == []  # no open one left


def test_keep_important_prefers_the_newer_on_a_tie_and_keep_both_keeps_both(api):
    a, b, c = pair(api)
    r = api.server.post(conflicts(api) + f"/{c['id']}/resolve", {"strategy": "keep_important"})
    assert r.json["kept"] == [b["id"]]
    other = api.server.post(api.url(b["id"], "invalidate"), {"reason": "try another"})
    assert other.status == 200
    api2_a, api2_b, c2 = pair(api, "sha-512")
    r = api.server.post(conflicts(api) + f"/{c2['id']}/resolve", {"strategy": "keep_both"})
    assert r.status == 200 and r.json["superseded"] == []
    assert set(r.json["kept"]) == {api2_a["id"], api2_b["id"]}
    assert api.get(api2_a["id"])["status"] == api.get(api2_b["id"])["status"] == "ACTIVE"
    # a pair resolved as keep_both is not raised again
    assert api.server.post(conflicts(api) + f"/check/{api2_b['id']}").json["items"] == []


def test_manual_replaces_both_with_the_given_text(api):
    a, b, c = pair(api)
    r = api.server.post(conflicts(api) + f"/{c['id']}/resolve", {"strategy": "manual"})
    assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["body"]
    r = api.server.post(conflicts(api) + f"/{c['id']}/resolve", {
        "strategy": "manual", "rationale": "scram-sha-256 for new roles; md5 until each old "
                                           "role resets its password."})
    assert r.status == 200, r.body
    new = api.get(r.json["created"])
    assert new["title"] == SCRAM["title"] and new["rationale"].startswith("scram-sha-256 for new")
    assert new["files_affected"] == MD5["files_affected"] and new["tags"] == ["db"]
    assert set(r.json["superseded"]) == {a["id"], b["id"]} and r.json["kept"] == [new["id"]]
    assert api.get(a["id"])["status"] == api.get(b["id"])["status"] == "SUPERSEDED"
    assert [r["id"] for r in api.search("password_encryption", mode="keyword")["results"]] == \
        [new["id"]]


def test_config_and_auto_resolve(api):
    url = conflicts(api) + "/config"
    assert api.server.get(url).json == {"check_on_store": True, "threshold": 0.5,
                                        "auto_resolve": None}
    for bad in ({"threshold": 2}, {"auto_resolve": "manual"}, {"auto_resolve": "newest"},
                {"check_on_store": "sometimes"}):
        r = api.server.request("PUT", url, json_body=bad)
        assert r.status == 422, (bad, r.body)
    assert api.server.get(url).json["auto_resolve"] is None
    r = api.server.request("PUT", url, json_body={"auto_resolve": "keep_newest"})
    assert r.status == 200 and r.json["auto_resolve"] == "keep_newest"
    a = api.create(**MD5)
    b = api.create(**SCRAM)
    assert b["contradictions"]["count"] == 1
    assert b["contradictions"]["items"][0]["status"] == "resolved"
    assert api.get(a["id"])["status"] == "SUPERSEDED" and b["status"] == "ACTIVE"
    api.server.request("PUT", url, json_body={"auto_resolve": None, "check_on_store": False})
    assert api.server.get(url).json == {"check_on_store": False, "threshold": 0.5,
                                        "auto_resolve": None}
    c = api.create(**{**MD5, "title": "Use password_encryption = plain"})
    assert c["contradictions"]["count"] == 0
    api.server.request("PUT", url, json_body={"check_on_store": True, "threshold": 1.0})
    assert api.create(**{**MD5, "title": "Use password_encryption = des"}
                      )["contradictions"]["count"] == 0


def test_a_record_no_longer_active_leaves_its_contradiction_dormant_and_is_never_kept(api):
    """B invalidated: the pair leaves the open list (it comes back if B is restored), and a
    resolution that would keep B is refused naming it, rather than A superseded by a record
    that is not in force and nothing on the topic left ACTIVE."""
    a, b, c = pair(api)
    assert api.server.post(api.url(b["id"], "invalidate"), {"reason": "wrong value"}).status == 200
    assert api.server.get(conflicts(api)).json["items"] == []
    assert api.server.get(conflicts(api) + f"?memory_id={b['id']}").json["items"] == []
    assert [x["id"] for x in api.server.get(conflicts(api) + "?status=all").json["items"]] == \
        [c["id"]]
    assert api.server.post(conflicts(api) + f"/check/{a['id']}").json["items"] == []
    assert api.server.post(conflicts(api) + f"/check/{b['id']}").json["items"] == []
    for strategy in ("keep_newest", "keep_important", "keep_both"):
        r = api.server.post(conflicts(api) + f"/{c['id']}/resolve", {"strategy": strategy})
        assert r.status == 409 and r.error["code"] == "invalid_transition", (strategy, r.body)
        assert b["id"] in r.error["message"] and "INVALIDATED" in r.error["message"]
        assert r.error["details"] == {"memory_id": b["id"], "status": "INVALIDATED",
                                      "strategy": strategy}
    assert api.get(a["id"])["status"] == "ACTIVE" and api.get(b["id"])["status"] == "INVALIDATED"
    assert api.server.get(conflicts(api) + f"/{c['id']}").json["status"] == "open"
    # restored, B is in force again and so is the pair
    assert api.server.post(api.url(b["id"], "restore"), {}).status == 200
    assert [x["id"] for x in api.server.get(conflicts(api)).json["items"]] == [c["id"]]
    # invalidated again: keeping the ACTIVE record settles it, and A stays ACTIVE
    api.server.post(api.url(b["id"], "invalidate"), {"reason": "wrong value"})
    r = api.server.post(conflicts(api) + f"/{c['id']}/resolve", {"strategy": "keep_oldest"})
    assert r.status == 200 and r.json["kept"] == [a["id"]], r.body
    assert api.get(a["id"])["status"] == "ACTIVE" and api.get(b["id"])["status"] == "INVALIDATED"
    assert api.server.get(conflicts(api) + "?status=all").json["items"][0]["status"] == "resolved"


def test_the_open_list_pages_past_dormant_contradictions(api):
    """A page of the open list is full and its cursor right when dormant rows lie between."""
    made = []
    for topic in ("alpha", "beta", "gamma", "delta"):
        api.create(title=f"Set {topic}_timeout = 30 seconds", rationale="Measured.",
                   files_affected=[f"{topic}.py"])
        b = api.create(title=f"Set {topic}_timeout = 60 seconds", rationale="Measured again.",
                       files_affected=[f"{topic}.py"])
        assert b["contradictions"]["count"] == 1, b["contradictions"]
        made.append((b, b["contradictions"]["items"][0]["id"]))
    for b, _ in made[1:3]:  # beta and gamma: the middle ones go dormant
        assert api.server.post(api.url(b["id"], "invalidate"), {"reason": "x"}).status == 200
    live = [made[3][1], made[0][1]]  # newest first
    first = api.server.get(conflicts(api) + "?limit=1").json
    assert [x["id"] for x in first["items"]] == live[:1] and first["next_cursor"]
    second = api.server.get(conflicts(api) + f"?limit=1&cursor={first['next_cursor']}").json
    assert [x["id"] for x in second["items"]] == live[1:] and second["next_cursor"] is None
    assert [x["id"] for x in api.server.get(conflicts(api) + "?limit=5").json["items"]] == live
