"""Kinds, importance, tags and stats; the decay policy, strength in ranking, recalls that
refresh it, the sweep that archives (and restore), and the daily sweep with its lease."""

from __future__ import annotations

import datetime as dt
import time

from plugins.memory.plugin import memories
from tests.plugins.memory.conftest import Api, start

NOW = dt.datetime.now(dt.UTC)


def ago(days: float) -> str:
    return (NOW - dt.timedelta(days=days)).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def old(mid: str, days: float, **fields) -> dict:
    return {"id": mid, "title": f"Record {mid}", "created_at": ago(days),
            "updated_at": ago(days), **fields}


def test_kinds_have_default_importance_and_filter_list_and_search(api):
    made = {k: api.create(title=f"A {k} about caching", kind=k.upper())
            for k in ("decision", "fact", "preference", "procedure", "episode")}
    assert {k: m["importance"] for k, m in made.items()} == {
        "decision": 0.8, "fact": 0.6, "preference": 0.7, "procedure": 0.7, "episode": 0.4}
    assert api.create(kind="fact", importance=0.95)["importance"] == 0.95
    got = {m["id"] for m in api.server.get(api.base + "?kind=fact&kind=episode").json["items"]}
    assert made["fact"]["id"] in got and made["episode"]["id"] in got and len(got) == 3
    found = api.search("caching", mode="keyword", kinds=["episode", "Procedure"])["results"]
    assert {r["id"] for r in found} == {made["episode"]["id"], made["procedure"]["id"]}
    semantic = api.search("caching", mode="semantic", kinds=["fact"])["results"]
    assert {r["kind"] for r in semantic} == {"fact"}
    for bad in ({"kind": "memo"}, {"importance": 1.5}, {"pinned": "often"}):
        r = api.server.post(api.base, {"title": "t", "rationale": "r", **bad})
        assert r.status == 422, bad
    assert api.server.get(api.base + "?kind=memo").status == 422
    r = api.server.patch(api.url(made["episode"]["id"]), {"kind": "fact", "importance": 0.3,
                                                           "pinned": True})
    assert r.status == 200 and (r.json["kind"], r.json["importance"], r.json["pinned"]) == (
        "fact", 0.3, True)
    assert r.json["strength"] == 1.0  # pinned


def test_tags_routes_and_stats(api):
    a = api.create(tags=["db", "perf"], author="ana", agent="claude", kind="fact")
    b = api.create(tags=["db"], agent="claude")
    api.server.post(api.url(b["id"], "invalidate"), {"reason": "old"})
    assert api.server.get(api.base + "/tags").json["items"] == [
        {"tag": "db", "count": 2}, {"tag": "perf", "count": 1}]
    assert api.server.get(api.base + "/tags?status=ACTIVE").json["items"] == [
        {"tag": "db", "count": 1}, {"tag": "perf", "count": 1}]
    r = api.server.post(api.url(a["id"], "tags"), {"tags": ["cache", "db"]})
    assert r.status == 200 and r.json["tags"] == ["db", "perf", "cache"]
    r = api.server.delete(api.url(a["id"], "tags") + "?tag=db&tag=nope")
    assert r.status == 200 and r.json["tags"] == ["perf", "cache"]
    assert api.history(a["id"])[-1]["changes"] == {"tags": [["db", "perf", "cache"],
                                                             ["perf", "cache"]]}
    assert api.server.post(api.url(a["id"], "tags"), {"tags": []}).status == 422
    assert api.server.delete(api.url(a["id"], "tags")).status == 422
    assert api.server.post(api.url("nope", "tags"), {"tags": ["x"]}).status == 404
    stats = api.server.get(api.base + "/stats").json
    assert {k: stats[k] for k in ("total", "by_kind", "by_status", "by_author", "by_agent",
                                  "by_tag")} == {
        "total": 2, "by_kind": {"decision": 1, "fact": 1},
        "by_status": {"ACTIVE": 1, "INVALIDATED": 1}, "by_author": {"ana": 1},
        "by_agent": {"claude": 2}, "by_tag": {"cache": 1, "db": 1, "perf": 1}}
    assert stats["vectors"]["embedded"] + stats["vectors"]["pending"] == 2
    assert stats["vectors"]["model_id"]


def test_decay_policy_is_per_project_and_validated(api, server, tmp_path):
    url = api.url(tail="decay-policy")
    policy = api.server.get(url).json
    assert policy == {"enabled": True, "half_life_days": {
        "decision": 180.0, "fact": 120.0, "preference": 365.0, "procedure": 180.0,
        "episode": 14.0}, "access_boost": 0.1, "archive_threshold": 0.05}
    r = api.server.request("PUT", url, json_body={"half_life_days": {"episode": 7},
                                                  "archive_threshold": 0.1})
    assert r.status == 200
    assert r.json["half_life_days"]["episode"] == 7.0 and r.json["half_life_days"]["fact"] == 120
    for bad in ({"half_life_days": {"memo": 3}}, {"half_life_days": {"fact": 0}},
                {"access_boost": -1}, {"archive_threshold": 2}, {"enabled": "maybe"}):
        assert api.server.request("PUT", url, json_body=bad).status == 422, bad
    assert api.server.get(url).json == r.json
    empty = api.server.request("PUT", url, json_body={"half_life_days": {}})
    assert (empty.status, empty.json) == (200, r.json)  # no kind given: none changes
    made = api.create(title="Still readable")  # strength still has every kind's half-life
    assert api.server.get(api.base).json["items"][0]["strength"] == made["strength"]
    (tmp_path / "other").mkdir()
    other = Api(server, tmp_path / "other")
    assert api.server.get(other.url(tail="decay-policy")).json == policy  # per project


def test_a_decayed_record_ranks_below_a_fresh_one_and_a_recall_refreshes_it(api):
    text = {"rationale": "Connection pools are sized to the worker count."}
    api.load(old("aged", 400, title="Size the connection pool per worker", **text))
    fresh = api.create(title="Size the connection pool per worker", **text)
    before = api.get("aged")
    assert before["strength"] < 0.2 < 0.79 < fresh["strength"]
    order = [r["id"] for r in api.search("connection pool size")["results"]]
    assert order == [fresh["id"], "aged"]
    # the search recalled both: the aged record's strength is back (beside the request)
    deadline = time.monotonic() + 10
    while (now := api.get("aged"))["access_count"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert now["last_accessed_at"] > before["updated_at"] and now["strength"] > 0.85
    api.server.request("PUT", api.url(tail="decay-policy"), json_body={"enabled": False})
    off = api.search("connection pool size")["results"]
    assert off[0]["score"] == off[1]["score"]  # no decay: the twins tie


def test_sweep_archives_what_fell_below_the_threshold_and_restore_brings_it_back(api):
    api.load(old("ep-old", 100, kind="episode", title="Debugged the flaky upload test"),
             old("ep-pinned", 100, kind="episode", pinned=True, title="Pinned episode"),
             old("dec-old", 100, title="Keep uploads idempotent"),
             old("ep-recalled", 100, kind="episode", title="Recalled episode",
                 last_accessed_at=ago(1)))
    dry = api.job("decay", {"dry_run": True})
    assert dry["dry_run"] is True and dry["checked"] == 3 and dry["archived"] == 1
    [change] = dry["changes"]
    assert change["id"] == "ep-old" and change["status"] == ["ACTIVE", "ARCHIVED"]
    assert change["strength"] < 0.05
    assert api.get("ep-old")["status"] == "ACTIVE"  # a dry run changes nothing
    done = api.job("decay")
    assert done["archived"] == 1 and [c["id"] for c in done["changes"]] == ["ep-old"]
    assert api.get("ep-old")["status"] == "ARCHIVED"
    event = api.history("ep-old")[-1]
    assert event["kind"] == "archived" and event["note"].startswith("strength 0.0")
    assert api.search("flaky debugged", mode="keyword")["results"] == []
    assert [r["id"] for r in api.search("flaky debugged", mode="keyword",
                                        status="ARCHIVED")["results"]] == ["ep-old"]
    assert api.get("ep-pinned")["status"] == "ACTIVE" and api.get("dec-old")["status"] == "ACTIVE"
    restored = api.server.post(api.url("ep-old", "restore"), {}).json
    assert restored["status"] == "ACTIVE" and restored["strength"] > 0.39
    assert api.job("decay")["archived"] == 0  # restored is fresh again
    api.server.request("PUT", api.url(tail="decay-policy"), json_body={"enabled": False})
    api.load(old("ep-older", 300, kind="episode"))
    assert api.job("decay") == {"dry_run": False, "enabled": False, "checked": 4,
                                "archived": 0, "changes": []}
    r = api.server.post(api.url(tail="decay"))
    assert r.status == 202 and r.headers["location"].startswith("/v1/jobs/")


def test_the_daily_sweep_runs_once_a_period_under_a_lease(tmp_path):
    srv = start(tmp_path / "home", memory={"decay_sweep_hours": 0})
    try:
        (tmp_path / "proj").mkdir()
        api = Api(srv, tmp_path / "proj")
        api.load(old("ep", 100, kind="episode"))
        service = memories(srv.kernel)
        project = srv.kernel.projects.get(api.pid)
        store = service.store(project)
        assert service.sweeps.run_due(project, 0.05) is None  # first seen: the clock starts
        time.sleep(0.06)
        assert store.lease("decay", "another-worker", time.time(), 60)
        assert service.sweeps.run_due(project, 0.05) is None  # another worker holds it
        store.release("decay", "another-worker")
        result = service.sweeps.run_due(project, 0.05)
        assert result["archived"] == 1 and api.get("ep")["status"] == "ARCHIVED"
        assert api.history("ep")[-1]["actor"] == "decay-sweep"
        # swept this period (a longer one: the sweep itself may outlast 0.05 s on a busy machine)
        assert service.sweeps.run_due(project, 60) is None
        jobs = srv.get(f"/v1/jobs?project={api.pid}").json["items"]
        assert [j["kind"] for j in jobs] == ["memory.decay"]
    finally:
        srv.stop()
    # the thread itself, with a period of 0.72 s
    srv = start(tmp_path / "home2", memory={"decay_sweep_hours": 0.0002})
    try:
        (tmp_path / "proj2").mkdir()
        api = Api(srv, tmp_path / "proj2")
        api.load(old("ep", 100, kind="episode"))
        deadline = time.monotonic() + 20
        while api.get("ep")["status"] != "ARCHIVED":
            assert time.monotonic() < deadline, "the daily sweep did not run"
            time.sleep(0.1)
    finally:
        srv.stop()
