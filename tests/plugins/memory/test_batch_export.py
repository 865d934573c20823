"""Batch atomicity, list filters and paging over 500 records, export → import round trip."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time

import pytest

from tests.plugins.memory.conftest import Api

TYPES = ["ARCHITECTURE", "DEPENDENCY", "TEST", "REFACTOR", "BUGFIX", "CONFIG"]


@pytest.fixture(scope="module")
def filled(server, tmp_path_factory):
    """500 records made by two batches, with known types, tags, files, authors, confidence."""
    api = Api(server, tmp_path_factory.mktemp("filled"))
    items = [{"op": "create", "id": f"r{i:03d}", "title": f"Decision {i}",
              "rationale": f"Reason number {i}", "decision_type": TYPES[i % 6],
              "tags": [f"t{i % 5}"], "files_affected": [f"src/f{i % 10}.py"],
              "author": "ana" if i % 2 else "bo", "agent": f"agent{i % 3}",
              "session_id": f"s{i % 4}", "confidence": round((i % 10) / 10 + 0.05, 2)}
             for i in range(500)]
    for part in (items[:250], items[250:]):
        r = api.server.post(api.url(tail="batch"), {"items": part})
        assert r.status == 200, r.body
        assert r.json["items"] == [{"op": "create", "id": it["id"], "status": "ok", "errors": []}
                                   for it in part]
    return api


def list_all(api, query: str) -> list[dict]:
    out, cursor = [], None
    while True:
        r = api.server.get(api.base + "?" + query + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r.body
        out += r.json["items"]
        cursor = r.json["next_cursor"]
        if cursor is None:
            return out


def test_paging_visits_every_record_once_newest_first(filled):
    rows = list_all(filled, "limit=37")
    assert len(rows) == 500 and len({r["id"] for r in rows}) == 500
    keys = [(r["created_at"], r["id"]) for r in rows]
    assert keys == sorted(keys, reverse=True)
    assert len(filled.server.get(filled.base + "?limit=200").json["items"]) == 200
    assert filled.server.get(filled.base + "?limit=201").status == 422
    assert filled.server.get(filled.base + "?cursor=bm90LWEtY3Vyc29y").status == 422


@pytest.mark.parametrize("query, expect", [
    ("type=bugfix", lambda i: i % 6 == 4),
    ("tag=t1&tag=t3", lambda i: i % 5 in (1, 3)),
    ("file=src/f2.py&file=src/f7.py", lambda i: i % 10 in (2, 7)),
    ("author=ana&agent=agent0", lambda i: i % 2 == 1 and i % 3 == 0),
    ("session_id=s2", lambda i: i % 4 == 2),
    ("min_confidence=0.85", lambda i: i % 10 >= 8),
    ("type=TEST&tag=t0&min_confidence=0.5", lambda i: i % 6 == 2 and i % 5 == 0 and i % 10 >= 5),
])
def test_filters_combine_with_and(filled, query, expect):
    got = {r["id"] for r in list_all(filled, query + "&limit=200")}
    assert got == {f"r{i:03d}" for i in range(500) if expect(i)}


def test_status_and_date_filters(filled):
    today = dt.datetime.now(dt.UTC).date()
    assert len(list_all(filled, f"created_after={today}&created_before={today}&limit=200")) == 500
    assert list_all(filled, f"created_after={today + dt.timedelta(days=1)}") == []
    assert list_all(filled, "status=invalidated") == []
    assert len(list_all(filled, "status=ALL&limit=200")) == 500
    assert filled.server.get(filled.base + "?status=DONE").status == 422
    assert filled.server.get(filled.base + "?created_after=yesterday").status == 422


def test_batch_is_all_or_nothing(api):
    keep = api.create(id="keep")
    r = api.server.post(api.url(tail="batch"), {"items": [
        {"op": "create", "id": "n1", "title": "ok", "rationale": "ok"},
        {"op": "patch", "id": "keep", "rationale": "changed"},
        {"op": "create", "title": "no rationale"},
        {"op": "patch", "id": "missing", "rationale": "x"},
        {"op": "delete"},
        {"op": "create", "id": "keep", "title": "t", "rationale": "r"},
        {"op": "create", "title": "t", "rationale": "r", "files_affected": ["../x"]},
    ]})
    assert r.status == 422, r.body
    bad = sorted({tuple(e["loc"][:3]) for e in r.error["details"]["errors"]})
    assert bad == [("body", "items", i) for i in (2, 3, 4, 5, 6)]
    assert api.server.get(api.url("n1")).status == 404
    assert api.server.get(api.url("keep")).json["rationale"] == keep["rationale"]
    r = api.server.post(api.url(tail="batch"), {"items": [{"op": "create", "title": "t",
                                                            "rationale": "r"}, {"op": "fly"}]})
    assert r.status == 422 and r.error["details"]["errors"][0]["loc"][:3] == ["body", "items", 1]
    assert api.server.post(api.url(tail="batch"), {"items": []}).status == 422
    big = [{"op": "create", "title": "t", "rationale": "r"}] * 1001
    assert api.server.post(api.url(tail="batch"), {"items": big}).status == 422


def test_a_bad_create_among_many_names_its_index_and_field_and_writes_nothing(api):
    """The create items are validated together; a bad one still answers alone, at its own
    index and field, and an atomic batch writes none of the good ones."""
    items = [{"op": "create", "id": f"m{i}", "title": f"Decision {i}", "rationale": "r"}
             for i in range(300)]
    items[150] = {**items[150], "title": "a\x00b"}
    items[200] = {**items[200], "confidence": 1.5, "tags": ["ok", " "]}
    r = api.server.post(api.url(tail="batch"), {"items": items})
    assert r.status == 422, r.body
    assert sorted(e["loc"] for e in r.error["details"]["errors"]) == [
        ["body", "items", 150, "title"], ["body", "items", 200, "confidence"],
        ["body", "items", 200, "tags", 1]]
    assert api.server.get(api.base + "?status=ALL").json["items"] == []
    r = api.server.post(api.url(tail="batch"), {"items": items, "atomic": False})
    assert r.status == 200, r.body
    bad = {i: [e["loc"] for e in it["errors"]] for i, it in enumerate(r.json["items"])
           if it["status"] == "error"}
    assert bad == {150: [["items", 150, "title"]],
                   200: [["items", 200, "confidence"], ["items", 200, "tags", 1]]}
    assert api.server.get(api.url("m150")).status == 404
    assert [e["kind"] for e in api.history("m299")] == ["created"]


def test_a_batch_create_stores_what_a_single_create_stores(api):
    fields = {"title": " Use WAL ", "rationale": "Readers never block.", "kind": "FACT",
              "decision_type": "config", "tags": ["db", "db", "wal"],
              "files_affected": ["./src/db.py", "src/db.py"], "evidence": ["bench 1"],
              "review_by": str(dt.date.today() + dt.timedelta(days=30)), "author": "ana"}
    single = api.create(id="single", **fields)
    r = api.server.post(api.url(tail="batch"), {"items": [{"op": "create", "id": "batched",
                                                           **fields}]})
    assert r.status == 200, r.body
    batched = api.server.get(api.url("batched")).json
    differ = {k for k in single if k in batched and single[k] != batched[k]}
    assert differ <= {"id", "created_at", "updated_at", "strength"}, differ
    assert (batched["title"], batched["kind"], batched["decision_type"], batched["tags"],
            batched["files_affected"]) == ("Use WAL", "fact", "CONFIG", ["db", "wal"],
                                           ["src/db.py"])


def test_batch_items_are_validated_as_strictly_as_a_single_request(api):
    """Batch items were validated laxly: a Unix time stored as a review date, "yes" as true,
    "0.5" as a confidence; and their errors kept pydantic's "Value error, " prefix."""
    api.create(id="kept", confidence=0.9)
    lax = {"review_by": 1798761600, "pinned": "yes", "confidence": "0.5"}
    single = api.server.post(api.base, {"title": "t", "rationale": "r", **lax, "tags": ["a"],
                                        "files_affected": ["x.py"]})
    assert single.status == 422
    said = sorted((e["loc"][-1], e["msg"], e["type"]) for e in single.error["details"]["errors"])
    assert said == [("confidence", "Input should be a valid number", "float_type"),
                    ("pinned", "Input should be a valid boolean", "bool_type"),
                    ("review_by", "a date is written YYYY-MM-DD", "value_error")]
    r = api.server.post(api.url(tail="batch"), {"atomic": False, "items": [
        {"op": "create", "id": "lax", "title": "t", "rationale": "r", **lax},
        {"op": "patch", "id": "kept", **lax},
        {"op": "patch", "id": "kept", "review_by": "0"}]})
    assert r.status == 200, r.body
    create, patch, epoch = r.json["items"]
    assert sorted((e["loc"][-1], e["msg"], e["type"]) for e in create["errors"]) == said
    assert sorted((e["loc"][-1], e["msg"], e["type"]) for e in patch["errors"]) == said
    assert epoch["errors"] == [{"loc": ["items", 2, "review_by"], "type": "value_error",
                                "msg": "a date is written YYYY-MM-DD"}]
    assert api.server.get(api.url("lax")).status == 404
    kept = api.get("kept")
    assert (kept["confidence"], kept["pinned"], kept["review_by"]) == (0.9, False, None)


def test_batch_mixes_ops_with_history(api):
    api.create(id="old")
    r = api.server.post(api.url(tail="batch"), {"items": [
        {"op": "create", "id": "new", "title": "t", "rationale": "r"},
        {"op": "patch", "id": "new", "tags": ["x"]},
        {"op": "patch", "id": "old", "evidence_append": ["seen"]},
        {"op": "delete", "id": "old"}]})
    assert r.status == 200, r.body
    assert [i["op"] for i in r.json["items"]] == ["create", "patch", "patch", "delete"]
    assert api.server.get(api.url("new")).json["tags"] == ["x"]
    assert [e["kind"] for e in api.history("new")] == ["created", "amended"]
    assert [e["kind"] for e in api.history("old")] == ["created", "amended", "deleted"]


def test_a_batch_racing_single_patches_on_a_record_loses_none_of_them(api):
    """A batch read its records before validating and wrote them back whole: a PATCH landing
    meanwhile was undone, and no event said so (its rationale went back, the next event's
    old value skipped it)."""
    target = api.create(title="Raced", rationale="r0")["id"]
    done, patched = threading.Event(), []

    def patches():
        while not done.is_set():
            text = f"r{len(patched) + 1}"
            assert api.server.patch(api.url(target), {"rationale": text}).status == 200
            patched.append(text)

    racer = threading.Thread(target=patches)
    racer.start()
    try:
        while not patched:  # the race is on before the first batch
            time.sleep(0.005)
        for b in range(4):  # many creates: the batch takes long enough for patches to land
            items = [{"op": "create", "title": f"filler {b}-{i}", "rationale": "f"}
                     for i in range(300)] + [{"op": "patch", "id": target,
                                              "evidence_append": [f"batch {b}"]}]
            assert api.server.post(api.url(tail="batch"), {"items": items}).status == 200
    finally:
        done.set()
        racer.join()
    history = api.history(target)
    said = [e["changes"]["rationale"] for e in history if "rationale" in e["changes"]]
    assert [old for old, _ in said] == ["r0", *patched[:-1]]  # each change read the one before
    assert [e["at"] for e in history] == sorted(e["at"] for e in history)
    now = api.get(target)
    assert (now["rationale"], now["evidence"]) == (patched[-1], [f"batch {b}" for b in range(4)])


def test_export_import_round_trip_is_identical(server, filled, tmp_path):
    mid = "r007"
    filled.server.post(filled.url(mid, "feedback"), {"helpful": False, "note": "meh"})
    filled.server.post(filled.url("r008", "invalidate"), {"reason": "obsolete"})
    exported = filled.server.get(filled.url(tail="export"))
    assert exported.status == 200
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    lines = exported.body.decode().splitlines()
    assert len(lines) == 500
    first = json.loads(next(line for line in lines if '"r007"' in line))
    assert [e["kind"] for e in first["history"]] == ["created", "feedback"]

    target = Api(server, tmp_path)
    jsonl = {"Content-Type": "application/x-ndjson"}
    r = server.post(target.url(tail="import"), body=exported.body, headers=jsonl)
    assert r.status == 200 and r.json == {"created": 500, "overwritten": 0, "skipped": 0}
    again = server.get(target.url(tail="export"))
    assert again.body == exported.body
    assert server.get(target.url("r008")).json["status"] == "INVALIDATED"

    r = server.post(target.url(tail="import"), body=exported.body, headers=jsonl)
    assert r.json == {"created": 0, "overwritten": 0, "skipped": 500}
    server.patch(target.url("r001"), {"rationale": "local edit"})
    r = server.post(target.url(tail="import") + "?mode=overwrite", body=exported.body,
                    headers=jsonl)
    assert r.json == {"created": 0, "overwritten": 500, "skipped": 0}
    assert server.get(target.url("r001")).json["rationale"] == "Reason number 1"


def test_overwriting_a_record_keeps_what_other_records_hold_about_it(api):
    """An export line carries a record, its history and its own links; overwriting it must not
    take along the links other records have to it, nor its contradictions (each once vanished
    with the delete that makes room for the line)."""
    from tests.plugins.memory.test_contradictions import MD5, SCRAM
    md5, scram = api.create(**MD5), api.create(**SCRAM)
    (found,) = scram["contradictions"]["items"]
    user = api.create(title="Connection pool settings", rationale="r")
    assert api.server.post(api.url(user["id"], "links"),
                           {"target": md5["id"], "type": "depends_on"}).status == 201
    line = next(x for x in api.server.get(api.url(tail="export")).body.decode().splitlines()
                if f'"id": "{md5["id"]}"' in x or f'"id":"{md5["id"]}"' in x)
    r = api.server.post(api.url(tail="import") + "?mode=overwrite", body=line.encode(),
                        headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 200 and r.json == {"created": 0, "overwritten": 1, "skipped": 0}
    into = api.server.get(api.url(md5["id"], "links")).json["items"]
    assert [(x["direction"], x["type"]) for x in into] == [("in", "depends_on")]
    kept = api.server.get(f"/v1/projects/{api.pid}/contradictions/{found['id']}")
    assert kept.status == 200 and kept.json == found


def test_an_overwrite_that_changes_a_record_says_so_in_its_history(api):
    """The record read as exported again while its history still ended with the edit it undid;
    its updated_at went back (an If-Match read before held again); a link it lost, unsaid."""
    jsonl = {"Content-Type": "application/x-ndjson"}
    other = api.create(title="Other")["id"]
    made = api.create(title="Overwritten", rationale="v1")
    line = api.server.get(api.url(tail="export")).body.decode().splitlines()
    line = next(x for x in line if made["id"] in x and '"Overwritten"' in x)
    edited = api.server.patch(api.url(made["id"]), {"rationale": "v2", "tags": ["t"]}).json
    assert api.server.post(api.url(made["id"], "links"),
                           {"target": other, "type": "relates_to"}).status == 201
    r = api.server.post(api.url(tail="import") + "?mode=overwrite", body=line.encode(),
                        headers=jsonl)
    assert r.json == {"created": 0, "overwritten": 1, "skipped": 0}
    now = api.get(made["id"])
    assert (now["rationale"], now["tags"]) == ("v1", [])
    assert now["updated_at"] > edited["updated_at"]
    history = api.history(made["id"])
    imported = next(e for e in history if e["kind"] == "imported")
    assert imported["changes"] == {"rationale": ["v2", "v1"], "tags": [["t"], []]}
    assert imported["note"] == "overwritten by an import"
    for mid in (made["id"], other):
        last = api.history(mid)[-1]
        assert (last["kind"], last["note"]) == ("unlinked", "overwritten by an import")
    stale = api.server.patch(api.url(made["id"]), {"rationale": "v3"},
                             headers={"If-Match": edited["updated_at"]})
    assert stale.status == 412
    again = api.server.post(api.url(tail="import") + "?mode=overwrite",
                            body=api.server.get(api.url(tail="export")).body, headers=jsonl)
    assert again.json["overwritten"] == 2  # the same lines again: nothing changes, nothing said
    assert api.history(made["id"]) == history


def test_contradictions_go_with_an_export_into_a_fresh_project(api, server, tmp_path):
    """They were left out: the fresh project had none open while both records' histories named
    one (404 when asked for), and a pair settled as keep_both would be raised again."""
    from tests.plugins.memory.test_contradictions import MD5, SCRAM
    md5 = api.create(**MD5)
    (found,) = api.create(**SCRAM)["contradictions"]["items"]
    settled = api.create(**{**SCRAM, "title": "Use password_encryption = sha-512"})
    (other,) = [c for c in settled["contradictions"]["items"] if c["a"] == md5["id"]]
    path = f"/v1/projects/{api.pid}/contradictions/{other['id']}/resolve"
    assert api.server.post(path, {"strategy": "keep_both"}).status == 200
    exported = api.server.get(api.url(tail="export")).body
    fresh = Api(server, tmp_path)
    r = server.post(fresh.url(tail="import"), body=exported,
                    headers={"Content-Type": "application/x-ndjson"})
    assert r.json["created"] == 3
    for c in (found, api.server.get(f"/v1/projects/{api.pid}/contradictions/{other['id']}").json):
        assert server.get(f"/v1/projects/{fresh.pid}/contradictions/{c['id']}").json == c
    assert server.get(fresh.url(tail="export")).body == exported
    line = json.loads(exported.decode().splitlines()[0])  # a line naming another pair: refused
    line["contradictions"] = [found]
    r = server.post(fresh.url(tail="import") + "?mode=overwrite", body=json.dumps(line).encode(),
                    headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 422 and r.error["details"]["errors"][0]["type"] == "contradiction_pair"
    # checked as the record's own fields are: times sort and page the list
    newest = json.loads(exported.decode().splitlines()[-1])
    own = newest["contradictions"][0]
    taken = next(c["id"] for c in (found, other) if (c["a"], c["b"]) != (own["a"], own["b"]))
    for bad, where in (({"detected_at": "yesterday"}, "detected_at"),
                       ({"confidence": 42}, "confidence"), ({"kind": "vibes"}, "kind"),
                       ({"status": "resolved", "resolved_at": None}, None),
                       ({"id": taken}, "id")):  # another pair's id: it would be dropped
        line = {**newest, "contradictions": [{**own, **bad}]}
        r = server.post(fresh.url(tail="import") + "?mode=overwrite",
                        body=json.dumps(line).encode(),
                        headers={"Content-Type": "application/x-ndjson"})
        assert r.status == 422, (bad, r.body)
        locs = [e["loc"] for e in r.error["details"]["errors"]]
        assert all(loc[1:4] == ["line 1", "contradictions", 0] for loc in locs), locs
        assert where is None or any(loc[-1] == where for loc in locs), locs
    # an overwrite takes the line's state of a pair it holds (the project had resolved it)
    path = f"/v1/projects/{fresh.pid}/contradictions/{found['id']}"
    assert server.post(path + "/resolve", {"strategy": "keep_both"}).status == 200
    line = next(x for x in exported.decode().splitlines()
                if found["id"] in [c["id"] for c in json.loads(x)["contradictions"]])
    r = server.post(fresh.url(tail="import") + "?mode=overwrite", body=line.encode(),
                    headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 200 and server.get(path).json == found


def test_import_rejects_bad_input_and_writes_nothing(api):
    good = json.dumps({"memory": {"id": "i1", "title": "t", "rationale": "r",
                                  "created_at": "2024-01-01T00:00:00.000Z",
                                  "updated_at": "2024-01-01T00:00:00.000Z"}, "history": []})
    bad = json.dumps({"memory": {"id": "i2", "title": "t"}, "history": []})
    r = api.server.post(api.url(tail="import"), body=f"{good}\n{bad}\nnot json\n".encode(),
                        headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 422
    assert {e["loc"][1] for e in r.error["details"]["errors"]} == {"line 2", "line 3"}
    assert api.server.get(api.url("i1")).status == 404
    r = api.server.post(api.url(tail="import"), body=good.encode(),
                        headers={"Content-Type": "application/json"})
    assert r.status == 415 and r.error["code"] == "unsupported_media_type"
    r = api.server.post(api.url(tail="import") + "?mode=merge", body=good.encode(),
                        headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 422


def _line(mid: str, **memory) -> dict:
    at = "2024-01-01T00:00:00.000Z"
    return {"memory": {"id": mid, "title": "t", "rationale": "r", "created_at": at,
                       "updated_at": at, **memory},
            "history": [{"id": f"ev_{mid}", "at": at, "kind": "created", "actor": None,
                         "changes": {}, "note": None}]}


@pytest.mark.parametrize("lines, where, says", [
    ([_line("d1"), _line("d1")], ("line 2", "memory", "id"), "line 1 has this id too"),
    ([_line("stats")], ("line 1", "memory", "id"), "stats names a route"),
    ([_line("big", access_count=2 ** 63)], ("line 1", "memory", "access_count"), "less than"),
    ([_line("t1", created_at="\u0000garbage")], ("line 1", "memory", "created_at"),
     "not an ISO 8601 time"),
    ([_line("t2", last_accessed_at="yesterday")], ("line 1", "memory", "last_accessed_at"),
     "not an ISO 8601 time"),
    ([{**_line("t3"), "history": [{**_line("t3")["history"][0], "at": "garbage"}]}],
     ("line 1", "history", 0, "at"), "not an ISO 8601 time"),
    ([{**_line("l1"), "links": [{"source": "other", "target": "l1", "type": "relates_to",
                                 "created_at": "2024-01-01T00:00:00Z", "actor": None,
                                 "note": None}]}], ("line 1", "links", 0, "source"),
     "a line's links start at its memory"),
    ([{**_line("l2"), "links": [{"source": "l2", "target": "l2", "type": "supersedes",
                                 "created_at": "2024-01-01T00:00:00Z", "actor": None,
                                 "note": None}]}], ("line 1", "links", 0, "target"),
     "cannot link to itself"),
    ([{**_line("l3"), "links": [{"source": "l3", "target": "x", "type": "bogus",
                                 "created_at": "2024-01-01T00:00:00Z", "actor": None,
                                 "note": None}]}], ("line 1", "links", 0, "type"), "Input should"),
    # a date is YYYY-MM-DD, as a request's: 0 and "0" were stored as 1970-01-01
    ([_line("rb0", review_by=0)], ("line 1", "memory", "review_by"),
     "a date is written YYYY-MM-DD"),
    ([_line("rb1", review_by="0")], ("line 1", "memory", "review_by"),
     "a date is written YYYY-MM-DD"),
    ([_line("rb2", review_by="20260601")], ("line 1", "memory", "review_by"),
     "a date is written YYYY-MM-DD"),
    ([_line("t4", created_at="2026-06-01T10:00:00")], ("line 1", "memory", "created_at"),
     "with its zone"),
    ([_line("t5", updated_at="0001-01-01T00:00:00+05:00")], ("line 1", "memory", "updated_at"),
     "between the years 0001 and 9998"),
])
def test_import_refuses_what_no_export_writes(api, lines, where, says):
    body = "\n".join(json.dumps(line) for line in lines).encode()
    r = api.server.post(api.url(tail="import"), body=body,
                        headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 422, r.body
    errors = r.error["details"]["errors"]
    assert any(e["loc"][1:] == list(where) and says in e["msg"] for e in errors), errors
    assert api.server.get(api.url()).json["items"] == []


def test_import_keeps_every_memory_its_history(api):
    taken = api.create(title="Owner of the event")
    event = api.history(taken["id"])[0]["id"]
    stolen = {**_line("thief"), "history": [{**_line("thief")["history"][0], "id": event}]}
    r = api.server.post(api.url(tail="import"), body=json.dumps(stolen).encode(),
                        headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 422
    assert r.error["details"]["errors"][0]["msg"] == f"an event of memory {taken['id']} has this id"
    bare = {**_line("bare"), "history": []}  # an export line with no history: nothing to show
    r = api.server.post(api.url(tail="import"), body=json.dumps(bare).encode(),
                        headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 200
    assert api.server.get(api.url("bare", "history")).json["items"] == []
    assert api.server.get(api.url("bare", "timeline")).status == 200


def test_import_stores_every_time_as_the_server_writes_times(api):
    """An import stored times as written (an offset, the basic format, a space for T), and
    every reader compares times as text: the order, the date filters, decay's last touch."""
    now = dt.datetime.now(dt.UTC)
    written = {  # as a file may hold them → as the server writes them
        "utc": ("2026-06-01T07:30:00.000Z", "2026-06-01T07:30:00.000Z"),
        "pst": ("2026-05-31T23:30:00-08:00", "2026-06-01T07:30:00.000Z"),
        "ist": ("2026-06-01T03:00:00+05:30", "2026-05-31T21:30:00.000Z"),
        "basic": ("20260601T120000Z", "2026-06-01T12:00:00.000Z"),
        "spaced": ("2026-06-01 09:15:30.5+00:00", "2026-06-01T09:15:30.500Z"),
        "seconds": ("2026-06-01T10Z", "2026-06-01T10:00:00.000Z"),
        "odd": ("2026-06-01T05:30:15+05:30:15", "2026-06-01T00:00:00.000Z"),
    }
    lines = [_line(mid, created_at=given, updated_at=given) for mid, (given, _) in written.items()]
    lines[2]["history"][0]["at"] = "2026-06-01T03:00:00+05:30"
    lines[2]["links"] = [{"source": "ist", "target": "utc", "type": "relates_to",
                          "created_at": "2026-06-01T09:00:00+02:00", "actor": None,
                          "note": None}]
    # recalled just now, last written 20 days ago: the recall is its last touch
    lines.append(_line("episode", kind="episode", access_count=1,
                       updated_at=f"{now - dt.timedelta(days=20):%Y%m%dT%H%M%SZ}",
                       last_accessed_at=now.isoformat()))
    r = api.server.post(api.url(tail="import"), body="\n".join(map(json.dumps, lines)).encode(),
                        headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 200, r.body
    for mid, (_, stored) in written.items():
        rec = api.get(mid)
        assert (rec["created_at"], rec["updated_at"]) == (stored, stored), mid
    listed = api.server.get(api.base + "?status=ALL&limit=200").json["items"]
    assert [m["created_at"] for m in listed] == sorted((m["created_at"] for m in listed),
                                                       reverse=True)
    on = {day: {m["id"] for m in api.server.get(
        api.base + f"?created_after={day}&created_before={day}").json["items"]}
        for day in ("2026-05-31", "2026-06-01")}
    assert on == {"2026-05-31": {"ist"}, "2026-06-01": set(written) - {"ist"}}
    assert api.history("ist")[0]["at"] == "2026-05-31T21:30:00.000Z"
    assert api.server.get(api.url("ist", "links")).json["items"][0]["created_at"] == \
        "2026-06-01T07:00:00.000Z"
    episode = api.get("episode")
    assert episode["last_accessed_at"] == now.isoformat(timespec="milliseconds")[:-6] + "Z"
    assert episode["strength"] > 0.49  # 0.4 + one recall's 0.1, touched just now


def test_appends_stop_where_a_create_would(api):
    mid = api.create(evidence=[f"e{i}" for i in range(150)])["id"]
    r = api.server.patch(api.url(mid), {"evidence_append": [f"x{i}" for i in range(51)]})
    assert r.status == 422
    said = r.error["details"]["errors"][0]["msg"]
    assert said == "a record holds at most 200 evidence; it has 150"
    assert len(api.server.get(api.url(mid)).json["evidence"]) == 150
    assert api.server.patch(api.url(mid), {"evidence_append": ["x"] * 50}).status == 200
