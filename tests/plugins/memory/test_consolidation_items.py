"""Consolidation keeps records about different numbered items apart: "Bug 191 is fixed in the
parser" and "Bug 221 is fixed in the parser" read alike (cosine 0.93 with the packaged model,
above the 0.85 threshold) and the detector finds no contradiction between them, so they were
clustered and merged into one record, retiring both. And a `merged_into` link, which retires
its source, no longer retires it into a record that is itself out of force."""

from __future__ import annotations

BUG_191 = {"title": "Bug 191 is fixed in the parser",
           "rationale": "The parser crash reported as bug 191 was fixed."}
BUG_221 = {"title": "Bug 221 is fixed in the parser",
           "rationale": "The parser crash reported as bug 221 was fixed."}


def clustered(result: dict) -> list[set[str]]:
    return [set(c["ids"]) for c in result["clusters"]]


def test_records_about_different_items_are_never_merged(api):
    bug191 = api.create(**BUG_191, kind="episode")["id"]
    bug221 = api.create(**BUG_221, kind="episode")["id"]
    again191 = api.create(title="Bug 191 is fixed in the parser", kind="episode",
                          rationale="The crash in the parser reported as bug 191 is fixed.")["id"]
    order1 = api.create(title="Order 1234 shipped to Berlin", kind="episode",
                        rationale="The customer order 1234 left the warehouse.")["id"]
    order2 = api.create(title="Order 5678 shipped to Berlin", kind="episode",
                        rationale="The customer order 5678 left the warehouse.")["id"]

    dry = api.job("consolidate", {"dry_run": True})
    assert clustered(dry) == [{bug191, again191}], dry  # one item told twice still merges
    assert dry["merged"] == 0

    done = api.job("consolidate", {})
    assert clustered(done) == [{bug191, again191}] and done["merged"] == 2, done
    for apart in (bug221, order1, order2):
        assert api.get(apart)["status"] == "ACTIVE"
        assert [e["kind"] for e in api.history(apart)] == ["created"]
    assert api.get(bug191)["status"] == "MERGED"


def test_a_seed_gathers_no_two_members_about_different_items(api):
    """A cluster is a star: each member was judged with the seed alone, so a record naming no
    number gathered both bugs, and the merge joined them all the same."""
    seed = api.create(title="Bug fixed in the parser", importance=0.9,
                      rationale="The parser crash reported as a bug was fixed.")["id"]
    bug191 = api.create(**BUG_191)["id"]
    bug221 = api.create(**BUG_221)["id"]

    dry = api.job("consolidate", {"dry_run": True})
    # records are taken in order of importance, then newest: bug 221 joins, and keeps 191 out
    assert clustered(dry) == [{seed, bug221}], dry
    done = api.job("consolidate", {})
    assert clustered(done) == [{seed, bug221}], done
    assert api.get(bug191)["status"] == "ACTIVE"


def test_a_record_is_not_merged_into_one_out_of_force(api):
    """`merged_into` (as consolidation writes it) retires its source in favour of its target:
    into an INVALIDATED or MERGED record it left the source's content in no record in force.
    Refused as a resolution keeping such a record is, and as `supersedes` now is from one."""
    live = api.create(title="Cache tokens for an hour", rationale="Fewer auth calls.")["id"]
    gone = api.create(title="Cache tokens for a day", rationale="Even fewer.")["id"]
    assert api.server.post(api.url(gone, "invalidate"), {"reason": "too long"}).status == 200
    for source, target, kind, retired in ((live, gone, "merged_into", live),
                                          (gone, live, "supersedes", live)):
        r = api.server.post(api.url(source, "links"), {"target": target, "type": kind})
        assert (r.status, r.error["code"]) == (409, "invalid_transition"), r.body
        assert r.error["message"] == (
            f"a {kind} link would retire {retired} in favour of {gone}, which is INVALIDATED, "
            f"no longer in force (ACTIVE or STALE): restore {gone} first, or link {retired} "
            "with a record in force")
        assert r.error["details"] == {"memory_id": gone, "status": "INVALIDATED", "type": kind}
    r = api.server.patch(api.url(gone), {"supersedes": [live]})
    assert (r.status, r.error["code"]) == (409, "invalid_transition"), r.body
    assert api.get(live)["status"] == "ACTIVE" and api.get(gone)["rationale"] == "Even fewer."
    assert [e["kind"] for e in api.history(live)] == ["created"]
    assert api.server.get(api.url(live, "links")).json["items"] == []

    # the other way round retires nothing in force; once restored, the target takes it
    r = api.server.post(api.url(gone, "links"), {"target": live, "type": "merged_into"})
    assert r.status == 201 and api.get(gone)["status"] == "INVALIDATED"
    assert api.server.post(api.url(gone, "restore"), {}).status == 200
    other = api.create(title="Cache tokens for a minute", rationale="Fresh.")["id"]
    assert api.server.post(api.url(other, "links"),
                           {"target": gone, "type": "merged_into"}).status == 201
    assert api.get(other)["status"] == "MERGED"
