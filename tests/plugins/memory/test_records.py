"""Records through HTTP: create rules, reads, patch, lifecycle, history, delete, 404s."""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor

from neuralmind import encode_cursor
from tests.plugins.memory.conftest import git
from tests.support import kernel_database

TODAY = dt.datetime.now(dt.UTC).date()


def test_create_normalises_and_reads_back(api):
    (api.dir / "src").mkdir()
    r = api.server.post(api.base, {
        "title": "  Use SQLite WAL  ", "rationale": "Writers run concurrently",
        "files_affected": ["src/./a.py", str(api.dir / "src" / "b.py"), "src/a.py"],
        "decision_type": "bugfix", "status": "active", "tags": ["db", "db", "wal"],
        "author": "ana", "agent": "claude", "session_id": "s1", "review_by": str(TODAY)})
    assert r.status == 201, r.body
    rec = r.json
    assert r.headers["location"] == f"{api.base}/{rec['id']}"
    assert rec["title"] == "Use SQLite WAL"
    assert rec["files_affected"] == ["src/a.py", "src/b.py"]
    assert rec["decision_type"] == "BUGFIX" and rec["status"] == "ACTIVE"
    assert rec["tags"] == ["db", "wal"]
    assert rec["commit_sha"] == ""  # not a git repository
    assert rec["effective_status"] == "ACTIVE" and rec["review_by"] == str(TODAY)
    assert rec["possible_duplicates"] == []
    got = api.server.get(api.url(rec["id"]))
    assert got.status == 200
    assert {k: v for k, v in got.json.items()} == {
        k: v for k, v in rec.items() if k not in ("possible_duplicates", "contradictions")}
    assert rec["contradictions"] == {"count": 0, "items": []}
    assert (rec["kind"], rec["importance"], rec["pinned"], rec["strength"]) == \
        ("decision", 0.8, False, 0.8)
    assert got.headers["etag"] == f'"{rec["updated_at"]}"'


def test_create_answers_the_record_as_stored(api):
    """A create answers the record it built, without reading it back: every field of the
    answer is the stored one (what a GET reads), whatever form the body gave it in."""
    old = api.create(title="The old way")
    r = api.server.post(api.base, {
        "id": "rec-as-stored", "title": "Every field", "rationale": "set by the client",
        "commit_sha": "ABC123", "files_affected": ["./x.py", "x.py"], "kind": "fact",
        "importance": 1, "pinned": True, "confidence": 0, "status": "ACTIVE",
        "author": "ana", "agent": "bot", "session_id": "s", "review_by": str(TODAY),
        "evidence": ["e1", "e1"], "rejected_alternatives": ["r"],
        "dependency_constraints": ["d"], "tags": ["t", "t"], "supersedes": [old["id"]]})
    assert r.status == 201, r.body
    got = api.get("rec-as-stored")
    assert got == {k: v for k, v in r.json.items()
                   if k not in ("possible_duplicates", "contradictions")}
    assert (got["importance"], got["confidence"], got["files_affected"], got["evidence"]) == \
        (1.0, 0.0, ["x.py"], ["e1", "e1"])
    assert api.get(old["id"])["status"] == "SUPERSEDED"


def test_commit_sha_defaults_to_head_in_a_git_repository(api):
    git(api.dir, "init", "-q")
    (api.dir / "f.txt").write_text("x")
    git(api.dir, "add", "f.txt")
    git(api.dir, "commit", "-qm", "one")
    head = git(api.dir, "rev-parse", "HEAD")
    assert api.create()["commit_sha"] == head
    assert api.create(commit_sha="abc123")["commit_sha"] == "abc123"


def test_create_rejects_bad_input_and_writes_nothing(api):
    bad = [
        ({"rationale": "r"}, ["body", "title"]),
        ({"title": "", "rationale": "r"}, ["body", "title"]),
        ({"title": "t" * 301, "rationale": "r"}, ["body", "title"]),
        ({"title": "t", "rationale": "r", "decision_type": "BUG"}, ["body", "decision_type"]),
        ({"title": "t", "rationale": "r", "status": "DONE"}, ["body", "status"]),
        ({"title": "t", "rationale": "r", "confidence": 1.5}, ["body", "confidence"]),
        ({"title": "t", "rationale": "r", "files_affected": ["../outside.py"]},
         ["body", "files_affected", 0]),
        ({"title": "t", "rationale": "r", "files_affected": ["ok.py", "/etc/passwd"]},
         ["body", "files_affected", 1]),
        ({"title": "t", "rationale": "r", "review_by": str(TODAY - dt.timedelta(days=1))},
         ["body", "review_by"]),
        ({"title": "t", "rationale": "r", "id": "bad id!"}, ["body", "id"]),
        # PostgreSQL's text holds no NUL: refused alike on both backends, never a 500 later
        ({"title": "a\x00b", "rationale": "r"}, ["body", "title"]),
        ({"title": "t", "rationale": "r", "tags": ["ok", "t\x00g"]}, ["body", "tags", 1]),
    ]
    for body, loc in bad:
        r = api.server.post(api.base, body)
        assert r.status == 422, (body, r.body)
        assert r.error["code"] == "validation_error"
        assert loc in [e["loc"] for e in r.error["details"]["errors"]], (body, r.error)
    worded = api.server.post(api.base, {"title": "t", "rationale": "r", "review_by": "soon"})
    assert worded.error["details"]["errors"] == [  # a validator's own words, as they stand
        {"loc": ["body", "review_by"], "msg": "a date is written YYYY-MM-DD",
         "type": "value_error"}]
    blank = api.server.post(api.base, {"title": "   ", "rationale": "r", "tags": ["ok", "\t"]})
    assert [(e["loc"], e["msg"]) for e in blank.error["details"]["errors"]] == [
        (["body", "title"], "is blank: it holds only whitespace"),  # was "at least 1 character"
        (["body", "tags", 1], "is blank: it holds only whitespace")]
    no_day = api.server.post(api.base, {"title": "t", "rationale": "r", "review_by": "2026-02-30"})
    assert no_day.error["details"]["errors"][0]["msg"] == ("2026-02-30 is no day of the calendar "
                                                           "(YYYY-MM-DD)")
    assert api.server.get(api.base + "?status=ALL").json["items"] == []


def test_client_id_conflict_is_409(api):
    api.create(id="decision-1")
    r = api.server.post(api.base, {"id": "decision-1", "title": "t", "rationale": "r"})
    assert r.status == 409 and r.error["code"] == "conflict"


def test_duplicate_hints_share_a_file_and_are_advisory(api):
    first = api.create(title="Cache parsed templates in memory", files_affected=["tpl.py"])
    other = api.create(title="Cache parsed templates on disk", files_affected=["other.py"])
    hinted = api.create(title="Cache parsed templates per request", files_affected=["tpl.py"])
    assert [d["id"] for d in hinted["possible_duplicates"]] == [first["id"]]
    assert set(hinted["possible_duplicates"][0]) == {"id", "title", "status", "score"}
    no_files = api.create(title="Cache parsed templates forever")
    assert {d["id"] for d in no_files["possible_duplicates"]} == {first["id"], other["id"],
                                                                   hinted["id"]}
    r = api.server.post(api.base + "?duplicates=none", {"title": "Cache parsed templates",
                                                        "rationale": "r"})
    assert r.status == 201 and r.json["possible_duplicates"] == []
    r = api.server.post(api.base + "?duplicates=hybrid", {"title": "Cache parsed templates again",
                                                          "rationale": "r"})
    assert r.status == 201 and len(r.json["possible_duplicates"]) == 3
    assert r.json["id"] not in {d["id"] for d in r.json["possible_duplicates"]}
    # nothing like it: the record itself, found by its own words, once let every other record
    # through the floor as a "duplicate" scored 0.0
    r = api.server.post(api.base + "?duplicates=hybrid", {"title": "Rotate the TLS certificates "
                                                          "monthly", "rationale": "r"})
    assert r.status == 201 and r.json["possible_duplicates"] == [], r.json["possible_duplicates"]


def test_a_stem_in_common_is_no_duplicate_hint(api):
    """"using" matched "uses" (the keyword index stems), scored 0.0, and took a hint's place."""
    api.create(title="Deploy the app using make deploy")
    shared = api.create(title="Redis holds the cache")
    hinted = api.create(title="Cache invalidation uses Redis pubsub")
    assert [d["id"] for d in hinted["possible_duplicates"]] == [shared["id"]]
    assert hinted["possible_duplicates"][0]["score"] > 0


def test_patch_records_a_diff_and_honours_if_match(api):
    rec = api.create(tags=["a"], evidence=["e0"])
    r = api.server.patch(api.url(rec["id"]), {"rationale": "new why", "tags": ["b"],
                                              "evidence_append": ["e1"], "confidence": 0.7,
                                              "files_affected": ["x.py"]})
    assert r.status == 200, r.body
    new = r.json
    assert new["evidence"] == ["e0", "e1"] and new["tags"] == ["b"] and new["confidence"] == 0.7
    assert new["updated_at"] > rec["updated_at"]
    event = api.history(rec["id"])[-1]
    assert event["kind"] == "amended" and event["actor"] == "local"
    assert event["changes"] == {"rationale": ["Because it was measured", "new why"],
                                "tags": [["a"], ["b"]], "evidence": [["e0"], ["e0", "e1"]],
                                "confidence": [1.0, 0.7], "files_affected": [[], ["x.py"]]}
    stale = api.server.patch(api.url(rec["id"]), {"rationale": "lost update"},
                             headers={"If-Match": f'"{rec["updated_at"]}"'})
    assert stale.status == 412 and stale.error["code"] == "precondition_failed"
    ok = api.server.patch(api.url(rec["id"]), {"rejected_append": ["Redis"]},
                          headers={"If-Match": new["updated_at"]})
    assert ok.status == 200 and ok.json["rejected_alternatives"] == ["Redis"]
    assert api.server.get(api.url(rec["id"])).json["rationale"] == "new why"
    bad = api.server.patch(api.url(rec["id"]), {"review_by": "2001-01-01"})
    assert bad.status == 422
    assert len(api.history(rec["id"])) == 3  # created, amended, amended


def test_lifecycle_events_and_conflicts(api):
    rec = api.create()
    mid = rec["id"]
    r = api.server.post(api.url(mid, "invalidate"), {"reason": "superseded by ADR-7"})
    assert r.status == 200 and r.json["status"] == "INVALIDATED"
    again = api.server.post(api.url(mid, "invalidate"), {"reason": "again"})
    assert again.status == 409 and again.error["code"] == "invalid_transition"
    assert api.server.post(api.url(mid, "invalidate"), {}).status == 422
    r = api.server.post(api.url(mid, "restore"), {"commit_sha": "beef"})
    assert r.status == 200 and r.json["status"] == "ACTIVE" and r.json["commit_sha"] == "beef"
    assert api.server.post(api.url(mid, "restore"), {}).status == 409
    kinds = [(e["kind"], e["changes"].get("status"), e["note"]) for e in api.history(mid)]
    assert kinds == [("created", None, None),
                     ("invalidated", ["ACTIVE", "INVALIDATED"], "superseded by ADR-7"),
                     ("restored", ["INVALIDATED", "ACTIVE"], None)]


def test_feedback_follows_the_spec_steps_within_bounds(api):
    """Spec 000 G9: helpful +0.05, unhelpful −0.10, never below 0.10 nor above 1.0; the
    older {helpful: bool} body still reads."""
    mid = api.create(confidence=0.35)["id"]
    seen = []
    for body in ({"signal": "unhelpful", "note": "noise"}, {"signal": "UNHELPFUL"},
                 {"helpful": False}, {"signal": "unhelpful"}):
        r = api.server.post(api.url(mid, "feedback"), body)
        assert r.status == 200, r.body
        seen.append(r.json["confidence"])
    assert seen == [0.25, 0.15, 0.1, 0.1]
    for _ in range(20):
        up = api.server.post(api.url(mid, "feedback"), {"signal": "helpful"}).json["confidence"]
    assert up == 1.0
    events = [e for e in api.history(mid) if e["kind"] == "feedback"]
    assert len(events) == 24
    assert events[0]["changes"]["confidence"] == [0.35, 0.25]
    assert events[0]["note"] == "unhelpful: noise" and events[-1]["note"] == "helpful"
    for bad in ({"helpful": "maybe"}, {"signal": "great"}, {}, {"signal": "helpful",
                                                                "helpful": True}):
        r = api.server.post(api.url(mid, "feedback"), bad)
        assert r.status == 422 and r.error["code"] == "validation_error", bad
    assert "not both" in r.error["details"]["errors"][0]["msg"]  # both spellings: it says so


def test_delete_keeps_history_and_unknown_ids_are_404(api):
    mid = api.create()["id"]
    api.server.patch(api.url(mid), {"rationale": "changed"})
    r = api.server.delete(api.url(mid))
    assert r.status == 204 and r.body == b""
    assert api.server.get(api.url(mid)).error["code"] == "memory_not_found"
    kinds = [e["kind"] for e in api.history(mid)]
    assert kinds == ["created", "amended", "deleted"]
    for method, tail, body in [("GET", "", None), ("PATCH", "", {"rationale": "x"}),
                               ("DELETE", "", None), ("GET", "history", None),
                               ("POST", "invalidate", {"reason": "x"}), ("POST", "restore", {}),
                               ("POST", "feedback", {"signal": "helpful"})]:
        r = api.server.request(method, api.url("nope", tail), json_body=body)
        assert r.status == 404 and r.error["code"] == "memory_not_found", (method, tail)
    assert api.server.delete(api.url(mid)).status == 404
    r = api.server.get("/v1/projects/p_000000000000/memories")
    assert r.status == 404 and r.error["code"] == "project_not_found"


def test_history_pages_oldest_first(api):
    mid = api.create(confidence=0.5)["id"]
    for _ in range(4):
        api.server.post(api.url(mid, "feedback"), {"helpful": True})
    first = api.server.get(api.url(mid, "history") + "?limit=2").json
    assert [e["kind"] for e in first["items"]] == ["created", "feedback"]
    second = api.server.get(api.url(mid, "history") + f"?limit=2&cursor={first['next_cursor']}").json
    third = api.server.get(api.url(mid, "history") + f"?limit=2&cursor={second['next_cursor']}").json
    assert len(second["items"]) == 2 and len(third["items"]) == 1 and third["next_cursor"] is None
    ats = [e["at"] for e in first["items"] + second["items"] + third["items"]]
    assert ats == sorted(ats)
    assert api.server.get(api.url(mid, "history") + "?cursor=%%%").status == 422
    huge = api.server.get(api.url(mid, "history") + f"?cursor={encode_cursor(10 ** 20)}")
    assert huge.status == 422 and huge.error["details"]["errors"][0]["type"] == "cursor_invalid"


def test_writes_emit_kernel_events(api):
    mid = api.create()["id"]
    api.server.post(api.url(mid, "feedback"), {"helpful": True})
    api.server.delete(api.url(mid))
    with kernel_database(api.server.home) as db:
        rows = db.conn.execute("SELECT kind, actor, data FROM events WHERE project_id = ? "
                               "AND kind LIKE 'memory.%' ORDER BY id", (api.pid,)).fetchall()
    assert [(kind, actor, json.loads(data)["id"]) for kind, actor, data in rows] == [("memory.created", "local", mid), ("memory.feedback", "local", mid),
                    ("memory.deleted", "local", mid)]


def test_if_match_holds_for_every_write_to_a_record_and_each_answer_tags_it(api):
    """A stale If-Match on DELETE and on invalidate was ignored (204, 200); `If-Match: *`, which
    any current record matches, was 412; a PATCH answered no ETag to send next."""
    rec = api.create()
    url = api.url(rec["id"])
    stale = {"If-Match": f'"{rec["updated_at"]}"'}
    changed = api.server.patch(url, {"rationale": "moved on"}, headers={"If-Match": "*"})
    assert changed.status == 200 and changed.headers["etag"] == f'"{changed.json["updated_at"]}"'
    for call in (lambda: api.server.delete(url, headers=stale),
                 lambda: api.server.post(url + "/invalidate", {"reason": "r"}, headers=stale)):
        r = call()
        assert (r.status, r.error["code"]) == (412, "precondition_failed")
    assert api.get(rec["id"])["status"] == "ACTIVE"
    fresh = {"If-Match": changed.headers["etag"]}
    gone = api.server.post(url + "/invalidate", {"reason": "r"}, headers=fresh)
    assert gone.status == 200 and gone.headers["etag"] == f'"{gone.json["updated_at"]}"'
    r = api.server.post(url + "/restore", {}, headers=fresh)  # the invalidate moved it
    assert (r.status, r.error["code"]) == (412, "precondition_failed")
    back = api.server.post(url + "/restore", {}, headers={"If-Match": gone.headers["etag"]})
    assert back.status == 200
    weak = api.server.patch(url, {"rationale": "r"},
                            headers={"If-Match": "W/" + back.headers["etag"]})
    assert weak.status == 412  # If-Match compares strongly: a weak tag never holds
    for answer in (api.server.post(api.base, {"title": "t", "rationale": "r"}),
                   api.server.post(url + "/feedback", {"signal": "helpful"}),
                   api.server.post(url + "/tags", {"tags": ["a"]}),
                   api.server.delete(url + "/tags?tag=a")):
        assert answer.status in (200, 201), answer.body
        assert answer.headers["etag"] == f'"{answer.json["updated_at"]}"'
    now = api.server.get(url).headers["etag"]
    assert api.server.delete(url, headers={"If-Match": now}).status == 204
    assert api.server.delete(url, headers={"If-Match": "*"}).status == 404


def test_changes_racing_on_one_memory_all_land_unless_if_match_was_given(api):
    mid = api.create(confidence=0.1)["id"]

    def send(i: int) -> list[int]:
        return [api.server.post(api.url(mid, "tags"), {"tags": [f"t{i}"]}).status,
                api.server.post(api.url(mid, "feedback"), {"signal": "helpful"}).status,
                api.server.patch(api.url(mid), {"evidence_append": [f"e{i}"]}).status]

    with ThreadPoolExecutor(8) as pool:
        statuses = [s for trio in pool.map(send, range(16)) for s in trio]
    assert statuses == [200] * 48  # no 412: the client sent no If-Match
    rec = api.server.get(api.url(mid)).json
    assert sorted(rec["tags"]) == sorted(f"t{i}" for i in range(16))
    assert sorted(rec["evidence"]) == sorted(f"e{i}" for i in range(16))
    assert rec["confidence"] == 0.9  # 0.1 + 16 × 0.05, capped at 1.0 only past 18
    kinds = [e["kind"] for e in api.history(mid)]
    assert kinds.count("feedback") == 16 and kinds.count("amended") == 32


def test_a_refused_amend_links_nothing(api):
    mid, old = api.create()["id"], api.create(title="Old")["id"]
    r = api.server.patch(api.url(mid), {"rationale": "r2", "supersedes": [old]},
                         headers={"If-Match": '"2000-01-01T00:00:00.000Z"'})
    assert r.status == 412
    assert api.server.get(api.url(old)).json["status"] == "ACTIVE"
    assert api.server.get(api.url(mid, "links")).json["items"] == []
    assert [e["kind"] for e in api.history(mid)] == ["created"]


AHEAD = "2999-01-01T00:00:00.000Z"  # a last write the clock has not reached


def test_every_write_moves_updated_at_past_the_last_one_even_when_the_clock_has_not(api):
    """updated_at (the ETag) was the clock's millisecond: two writes in one millisecond left
    it as it was, and an If-Match read before the first held for the second (a lost update).
    A record last written "ahead of the clock" stands for the clock not having moved: each
    write must still stamp it later, so the tag read before no longer holds."""
    api.load({"id": "ahead", "title": "Ahead", "created_at": AHEAD, "updated_at": AHEAD},
             {"id": "newer", "title": "Newer", "created_at": AHEAD, "updated_at": AHEAD})
    url, last = api.url("ahead"), AHEAD
    writes = [
        lambda tag: api.server.patch(url, {"rationale": "B's"}, headers=tag),
        # feedback and tags compare no If-Match (the kernel refuses one there: 412)
        lambda tag: api.server.post(url + "/feedback", {"signal": "unhelpful"}),
        lambda tag: api.server.post(url + "/tags", {"tags": ["a"]}),
        lambda tag: api.server.delete(url + "/tags?tag=a"),
        lambda tag: api.server.post(url + "/invalidate", {"reason": "r"}, headers=tag),
        lambda tag: api.server.post(url + "/restore", {}, headers=tag),
        lambda tag: api.server.post(api.url(tail="batch"), {"items": [
            {"op": "patch", "id": "ahead", "rationale": "batched"},
            {"op": "patch", "id": "ahead", "confidence": 0.5}]}),
        lambda tag: api.server.post(api.url(tail="batch"), {"items": [
            {"op": "invalidate", "id": "ahead", "reason": "r"}]}),
        lambda tag: api.server.post(url + "/restore", {}, headers=tag),
        lambda tag: api.server.post(api.url("newer", "links"),  # a link that sets its status
                                    {"target": "ahead", "type": "supersedes"}),
    ]
    for i, write in enumerate(writes):
        r = write({"If-Match": last})
        assert r.status in (200, 201), (i, r.body)
        now = api.get("ahead")["updated_at"]
        assert now > last, (i, now, last)
        stale = api.server.patch(url, {"rationale": "A's, on the old tag"},
                                 headers={"If-Match": last})
        assert stale.status == 412, (i, stale.body)
        last = now
    assert api.get("ahead")["status"] == "SUPERSEDED"


def test_of_writers_holding_one_etag_exactly_one_lands(api):
    """The If-Match check and the write are one serial transaction, on either backend."""
    rec = api.create(title="Raced for")
    url, tag = api.url(rec["id"]), rec["updated_at"]

    def write(turn: int, i: int) -> int:
        if i % 3 == 2:
            return api.server.post(url + "/invalidate", {"reason": "r"},
                                   headers={"If-Match": tag}).status
        return api.server.patch(url, {"rationale": f"writer {i}, turn {turn}"},
                                headers={"If-Match": tag}).status

    for turn in range(3):
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda i: write(turn, i), range(8)))
        assert sorted(statuses) == [200] + [412] * 7, statuses
        now = api.get(rec["id"])
        assert now["updated_at"] > tag
        tag = now["updated_at"]
        if now["status"] == "INVALIDATED":
            tag = api.server.post(url + "/restore", {}).json["updated_at"]
    kinds = [e["kind"] for e in api.history(rec["id"])]
    assert kinds.count("amended") + kinds.count("invalidated") == 3
