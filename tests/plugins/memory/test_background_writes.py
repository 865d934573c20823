"""Background status changes (a decay sweep archiving, consolidation merging) read their
records, judge them, then write: a change answered 2xx between the read and the write is never
overwritten, and two consolidations never merge one record twice. Each test makes the change
land between the two phases through the functions' ``before_write`` hook — real requests to
the server, no threads racing."""

from __future__ import annotations

import datetime as dt

from kernel.auth import Actor
from plugins.memory.plugin import memories
from plugins.memory.sweeps import SWEEP_ACTOR

ACTOR = Actor("tester", role="admin")
REDIS = "Redis keeps the web sessions; it is fast and shared by every web node."


def ago(days: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(days=days)).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def forgotten(mid: str, **fields) -> dict:
    """An episode untouched for 100 days: far below the default archive threshold."""
    return {"id": mid, "title": f"Episode {mid}", "kind": "episode", "created_at": ago(100),
            "updated_at": ago(100), **fields}


def service_of(api):
    kernel = api.server.kernel
    return memories(kernel), kernel.projects.get(api.pid)


def ok(response, status: int = 200):
    assert response.status == status, response.body
    return response.json


def merged_into(api, mid: str) -> list[str]:
    links = ok(api.server.get(api.url(mid, "links")))["items"]
    return [lk["target"] for lk in links if lk["type"] == "merged_into" and lk["source"] == mid]


def test_a_sweep_keeps_what_changed_after_it_read_its_candidates(api):
    api.load(forgotten("pin-me"), forgotten("edit-me"), forgotten("drop-me"),
             forgotten("stale-one", status="STALE"), forgotten("plain"))
    service, project = service_of(api)

    def meanwhile():  # answered 200 after the sweep read and judged all five
        ok(api.server.patch(api.url("pin-me"), {"pinned": True, "tags": ["keep"]}))
        ok(api.server.patch(api.url("edit-me"), {"tags": ["keep"], "confidence": 0.5}))
        ok(api.server.post(api.url("drop-me", "invalidate"), {"reason": "wrong"}))

    result = service.sweeps.sweep(project, False, SWEEP_ACTOR, before_write=meanwhile)

    assert sorted(c["id"] for c in result["changes"]) == ["plain", "stale-one"]
    strengths = [c["strength"] for c in result["changes"]]
    assert strengths == sorted(strengths)  # weakest first (the two are near-equal: no order)
    assert result["archived"] == 2 and result["checked"] == 5
    assert {c["id"]: c["status"][0] for c in result["changes"]} == {"plain": "ACTIVE",
                                                                    "stale-one": "STALE"}
    pinned = api.get("pin-me")
    assert (pinned["status"], pinned["pinned"], pinned["tags"]) == ("ACTIVE", True, ["keep"])
    edited = api.get("edit-me")  # the edit refreshed it: judged again, kept
    assert (edited["status"], edited["tags"], edited["confidence"]) == ("ACTIVE", ["keep"], 0.5)
    assert api.get("drop-me")["status"] == "INVALIDATED"
    for mid, last in (("pin-me", "amended"), ("edit-me", "amended"), ("drop-me", "invalidated")):
        kinds = [e["kind"] for e in api.history(mid)]
        assert kinds[-1] == last and "archived" not in kinds, (mid, kinds)
    for mid, old in (("plain", "ACTIVE"), ("stale-one", "STALE")):  # history matches the row
        assert api.get(mid)["status"] == "ARCHIVED"
        event = api.history(mid)[-1]
        assert event["kind"] == "archived" and event["changes"] == {"status": [old, "ARCHIVED"]}
        assert event["actor"] == "decay-sweep"


def test_a_sweep_writes_500_records_a_transaction_each_judged_on_its_current_row(api):
    ids = [f"ep{i:04d}" for i in range(510)]  # equal strengths: written in id order
    api.load(*(forgotten(mid) for mid in ids))
    service, project = service_of(api)
    seen = []

    def meanwhile():  # before each write transaction
        seen.append({mid: api.get(mid)["status"] for mid in (ids[0], ids[499], ids[500])})
        if len(seen) == 1:  # after the read, before the first batch
            ok(api.server.patch(api.url(ids[3]), {"pinned": True}))
        else:  # after the first batch, before the second
            ok(api.server.post(api.url(ids[505], "invalidate"), {"reason": "wrong"}))

    result = service.sweeps.sweep(project, False, SWEEP_ACTOR, before_write=meanwhile)

    assert seen == [dict.fromkeys((ids[0], ids[499], ids[500]), "ACTIVE"),
                    {ids[0]: "ARCHIVED", ids[499]: "ARCHIVED", ids[500]: "ACTIVE"}]
    assert result["archived"] == 508
    assert {c["id"] for c in result["changes"]} == set(ids) - {ids[3], ids[505]}
    assert api.get(ids[3])["pinned"] is True and api.get(ids[3])["status"] == "ACTIVE"
    assert api.get(ids[505])["status"] == "INVALIDATED"
    assert api.history(ids[505])[-1]["kind"] == "invalidated"
    assert api.get(ids[509])["status"] == "ARCHIVED"


def redis_cluster(api, tag: str, importances=(0.9, 0.8, 0.7, 0.6)) -> list[str]:
    """Near-identical facts that consolidation clusters, most important (the lead) first."""
    return [api.create(title="Use Redis for the session cache", rationale=REDIS, kind="fact",
                       tags=[tag], importance=imp)["id"] for imp in importances]


def test_a_merge_leaves_out_members_changed_after_it_read_them(api):
    lead, edited, dropped, plain = redis_cluster(api, "cache")
    service, project = service_of(api)

    def meanwhile():
        ok(api.server.patch(api.url(edited), {"tags": ["cache", "reviewed"], "confidence": 0.42}))
        ok(api.server.post(api.url(dropped, "invalidate"), {"reason": "not any more"}))

    result = service.consolidation.run(project, False, ["fact"], 0.85, ACTOR,
                                       before_write=meanwhile)

    [cluster] = result["clusters"]
    assert cluster["ids"] == [lead, edited, dropped, plain]
    assert cluster["skipped"] == [edited, dropped] and result["merged"] == 2
    new = api.get(cluster["merged_into"])
    assert new["status"] == "ACTIVE" and new["tags"] == ["cache"] and new["confidence"] == 1.0
    merged_event = api.history(new["id"])[1]
    assert merged_event["kind"] == "merged"
    assert sorted(merged_event["changes"]["merged_from"]) == sorted([lead, plain])
    for mid in (lead, plain):
        assert api.get(mid)["status"] == "MERGED" and merged_into(api, mid) == [new["id"]]
    kept = api.get(edited)  # the patch answered 200 holds, and the record was not merged
    assert (kept["status"], kept["tags"], kept["confidence"]) == ("ACTIVE", ["cache", "reviewed"],
                                                                  0.42)
    assert api.history(edited)[-1]["kind"] == "amended" and merged_into(api, edited) == []
    assert api.get(dropped)["status"] == "INVALIDATED" and merged_into(api, dropped) == []
    assert api.history(dropped)[-1]["kind"] == "invalidated"


def test_a_cluster_whose_lead_changed_is_not_merged(api):
    lead, *others = redis_cluster(api, "lead", (0.9, 0.8, 0.7))
    service, project = service_of(api)

    def meanwhile():
        ok(api.server.patch(api.url(lead), {"pinned": True}))

    result = service.consolidation.run(project, False, ["fact"], 0.85, ACTOR,
                                       before_write=meanwhile)

    [cluster] = result["clusters"]
    assert cluster["merged_into"] is None and cluster["skipped"] == [lead]
    assert result["merged"] == 0
    for mid in (lead, *others):
        assert api.get(mid)["status"] == "ACTIVE" and merged_into(api, mid) == []
    assert api.get(lead)["pinned"] is True


def test_two_consolidations_at_once_merge_a_cluster_once(api):
    ids = redis_cluster(api, "twice", (0.9, 0.8, 0.7))
    service, project = service_of(api)
    other = {}

    def meanwhile():  # another consolidation of the project runs whole, through HTTP
        assert not other, "one cluster, one merge"
        other.update(api.job("consolidate", {"kinds": ["fact"]}))

    result = service.consolidation.run(project, False, ["fact"], 0.85, ACTOR,
                                       before_write=meanwhile)

    [theirs] = other["clusters"]
    assert theirs["merged_into"] and other["merged"] == 3
    [ours] = result["clusters"]
    assert ours["merged_into"] is None and ours["skipped"] == ids and result["merged"] == 0
    tagged = ok(api.server.get(api.url() + "?tag=twice&status=ALL&limit=50"))["items"]
    assert sorted((r["id"], r["status"]) for r in tagged) == sorted(
        [(theirs["merged_into"], "ACTIVE"), *((mid, "MERGED") for mid in ids)])
    for mid in ids:
        assert merged_into(api, mid) == [theirs["merged_into"]]
        assert [e["kind"] for e in api.history(mid)].count("merged") == 1
