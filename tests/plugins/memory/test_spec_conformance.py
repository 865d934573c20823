"""Spec 000 §4.2, G8, G9 through HTTP: batch invalidate and per-item results (atomic or not),
export formats, the timeline with git commits, the loopback history actor; collections;
``neuralmind eval decisions`` on the shipped set."""

from __future__ import annotations

import json
import sqlite3
import time
from urllib.parse import quote

from tests.plugins.memory.conftest import git
from tests.support import ROOT, run_cli, seed_models

EVAL = ROOT / "tests" / "fixtures" / "decisions_eval"


def test_batch_invalidates_and_answers_per_item(api):
    keep = api.create(id="keep")
    r = api.server.post(api.url(tail="batch"), {"items": [
        {"op": "invalidate", "id": "keep", "reason": "superseded by ADR-9"},
        {"op": "create", "id": "n1", "title": "t", "rationale": "r"}]})
    assert r.status == 200, r.body
    assert [(i["op"], i["id"], i["status"]) for i in r.json["items"]] == [
        ("invalidate", "keep", "ok"), ("create", "n1", "ok")]
    assert api.get("keep")["status"] == "INVALIDATED"
    event = api.history("keep")[-1]
    assert (event["kind"], event["note"], event["changes"]) == (
        "invalidated", "superseded by ADR-9", {"status": ["ACTIVE", "INVALIDATED"]})
    bad = [{"op": "create", "id": "n2", "title": "t", "rationale": "r"},
           {"op": "invalidate", "id": "keep", "reason": "again"},  # already INVALIDATED
           {"op": "invalidate", "id": "n1"},  # no reason
           {"op": "patch", "id": "n1", "tags": ["x"]}]
    r = api.server.post(api.url(tail="batch"), {"items": bad})  # atomic by default
    assert r.status == 422
    assert sorted({tuple(e["loc"][:3]) for e in r.error["details"]["errors"]}) == [
        ("body", "items", 1), ("body", "items", 2)]
    assert api.server.get(api.url("n2")).status == 404
    r = api.server.post(api.url(tail="batch"), {"items": bad, "atomic": False})
    assert r.status == 200
    assert [(i["status"], [e["type"] for e in i["errors"]]) for i in r.json["items"]] == [
        ("ok", []), ("error", ["invalid_transition"]), ("error", ["missing"]), ("ok", [])]
    assert r.json["items"][2]["errors"][0]["loc"] == ["items", 2, "reason"]
    assert api.get("n2")["title"] == "t" and api.get("n1")["tags"] == ["x"]
    assert keep["status"] == "ACTIVE"


def test_export_formats(api):
    a = api.create(title="Use WAL", rationale="Readers never block.", files_affected=["db.py"],
                   tags=["sqlite"], evidence=["bench 1"], author="ana")
    b = api.create(title="Checkpoint hourly", rationale="Keeps the WAL small.")
    api.server.post(api.url(b["id"], "links"), {"target": a["id"], "type": "depends_on"})
    nd = api.server.get(api.url(tail="export"))
    assert nd.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(x) for x in nd.body.decode().splitlines()]
    as_json = api.server.get(api.url(tail="export") + "?format=json")
    assert as_json.headers["content-type"].startswith("application/json")
    assert as_json.json == lines
    assert lines[1]["links"][0]["type"] == "depends_on" and lines[0]["links"] == []
    md = api.server.get(api.url(tail="export") + "?format=md")
    assert md.headers["content-type"].startswith("text/markdown")
    text = md.body.decode()
    assert text.startswith("# Memories\n\n## Use WAL\n")
    assert text.count("\n## ") == 2
    assert f"`{a['id']}` · decision · ACTIVE" in text and "Files: `db.py` — Tags: sqlite" in text
    assert "**Evidence**\n\n- bench 1" in text and f"depends_on `{a['id']}`" in text
    assert "created by ana" in text  # the loopback actor is the record's author
    assert api.server.get(api.url(tail="export") + "?format=xml").status == 422


def test_history_actor_in_loopback_mode_is_the_records_agent_or_author(api):
    by_agent = api.create(agent="claude-code", author="ana")
    by_author = api.create(author="ana")
    anonymous = api.create()
    assert [e["actor"] for e in api.history(by_agent["id"])] == ["claude-code"]
    assert [e["actor"] for e in api.history(by_author["id"])] == ["ana"]
    assert [e["actor"] for e in api.history(anonymous["id"])] == ["local"]
    api.server.post(api.url(by_author["id"], "feedback"), {"signal": "helpful"})
    assert api.history(by_author["id"])[-1]["actor"] == "ana"


def test_timeline_merges_history_with_the_commits_on_the_records_files(api):
    git(api.dir, "init", "-q")
    (api.dir / "db.py").write_text("v1\n")
    git(api.dir, "add", ".")
    git(api.dir, "commit", "-qm", "add the store")
    time.sleep(1.05)  # git dates are in seconds
    rec = api.create(title="Use WAL", files_affected=["db.py"])
    time.sleep(1.05)
    (api.dir / "db.py").write_text("v2\n")
    (api.dir / "other.py").write_text("x\n")
    git(api.dir, "add", ".")
    git(api.dir, "commit", "-qm", "tune the store")
    time.sleep(1.05)
    api.server.patch(api.url(rec["id"]), {"rationale": "Checked again"})
    items = api.server.get(api.url(rec["id"], "timeline")).json["items"]
    assert [(i["source"], i["kind"]) for i in items] == [
        ("git", "commit"), ("history", "created"), ("git", "commit"), ("history", "amended")]
    assert [i["note"] for i in items if i["source"] == "git"] == ["add the store",
                                                                 "tune the store"]
    assert items[2]["commit"]["files"] == ["db.py"] and items[2]["actor"] == "t"
    assert all(i["at"].endswith("Z") for i in items)
    bare = api.create(title="No files")
    assert [i["source"] for i in api.server.get(api.url(bare["id"], "timeline")).json["items"]] \
        == ["history"]
    assert api.server.get(api.url("nope", "timeline")).error["code"] == "memory_not_found"


def test_collections_are_saved_filters_for_list_and_search(api):
    base = f"/v1/projects/{api.pid}/collections"
    db = api.create(title="Pool connections", tags=["db"], kind="fact")
    api.create(title="Pool threads", tags=["ops"])
    gone = api.create(title="Pool sockets", tags=["db"])
    api.server.post(api.url(gone["id"], "invalidate"), {"reason": "x"})
    r = api.server.request("PUT", base + "/db-facts",
                           json_body={"filters": {"tag": ["db"], "kind": ["fact"]},
                                      "description": "database facts"})
    assert r.status == 201 and r.json["filters"]["tag"] == ["db"]
    assert r.json["description"] == "database facts"
    listed = api.server.get(api.base + "?collection=db-facts").json["items"]
    assert [m["id"] for m in listed] == [db["id"]]
    found = api.search("pool", mode="keyword", collection="db-facts")["results"]
    assert [m["id"] for m in found] == [db["id"]]
    r = api.server.request("PUT", base + "/db-facts",
                           json_body={"filters": {"tag": ["db"], "status": "ALL"}})
    assert r.status == 200  # replaced
    listed = api.server.get(api.base + "?collection=db-facts").json["items"]
    assert {m["id"] for m in listed} == {db["id"], gone["id"]}
    listed = api.server.get(api.base + "?collection=db-facts&status=ACTIVE").json["items"]
    assert [m["id"] for m in listed] == [db["id"]]  # a filter given overrides the saved one
    assert [c["name"] for c in api.server.get(base).json["items"]] == ["db-facts"]
    assert api.server.get(base + "/db-facts").json["filters"]["status"] == "ALL"
    assert api.server.delete(base + "/db-facts").status == 204
    for r in (api.server.get(base + "/db-facts"), api.server.delete(base + "/db-facts"),
              api.server.get(api.base + "?collection=db-facts")):
        assert r.status == 404 and r.error["code"] == "collection_not_found"
    for name, body in [("bad%20name!", {"filters": {}}), ("x", {"filters": {"kind": ["memo"]}}),
                       ("x", {}), ("x", {"filters": {"status": "GONE"}})]:
        assert api.server.request("PUT", f"{base}/{name}", json_body=body).status in (404, 422)
    assert api.server.get(api.base + "?collection=bad%20name").status == 422
    for date in ("0", "1798761600", "20260601", "２０２６-０６-０１"):  # "0" was saved as 1970-01-01
        listed = api.server.get(api.base + f"?created_after={quote(date)}")
        saved = api.server.request("PUT", base + "/epoch",
                                   json_body={"filters": {"created_after": date}})
        assert (listed.status, saved.status) == (422, 422), (date, saved.body)
        assert [e["msg"] for e in saved.error["details"]["errors"]] == \
            [e["msg"] for e in listed.error["details"]["errors"]], date
    assert api.server.get(base + "/epoch").status == 404


def test_reserved_ids_are_refused(api):
    for reserved in ("stats", "tags", "decay", "search"):
        r = api.server.post(api.base, {"id": reserved, "title": "t", "rationale": "r"})
        assert r.status == 422 and r.error["details"]["errors"][0]["type"] == "reserved_id"


def test_paraphrases_of_the_shipped_set_share_no_search_word():
    """What keyword search finds for each paraphrase query in its answer: nothing (FTS5 with
    the store's tokenizer, words ORed with prefix match)."""
    from plugins.memory.search import match_expression, terms
    corpus = json.loads((EVAL / "corpus.json").read_text())
    qset = json.loads((EVAL / "queries.json").read_text())
    by_id = {d["id"]: d for d in corpus + qset["extra_decisions"]}
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(title, rationale, tags, "
               "tokenize='porter unicode61')")
    paraphrases = [q for q in qset["queries"] if q["kind"] == "paraphrase"]
    assert len(paraphrases) == 10
    for q in paraphrases:
        for gold in q["gold"]:
            d = by_id[gold]
            db.execute("DELETE FROM t")
            db.execute("INSERT INTO t VALUES (?, ?, ?)", (d["title"], d["rationale"],
                                                         " ".join(d["tags"])))
            hits = db.execute("SELECT count(*) FROM t WHERE t MATCH ?",
                              (match_expression(terms(q["query"])),)).fetchone()[0]
            assert hits == 0, (q["id"], gold)


def test_eval_decisions_command(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    seed_models(tmp_path / "neuralmind-eval-decisions" / "home")
    args = ("eval", "decisions", "--corpus", str(EVAL / "corpus.json"),
            "--queries", str(EVAL / "queries.json"))
    code, out, err = run_cli(*args, "--mode", "keyword,hybrid", "--json")
    assert code == 0, err
    result = json.loads(out)["by_kind"]
    assert result["sentence"]["n"] == 14 and result["paraphrase"]["n"] == 10
    assert result["negative"]["n"] == 8 and result["title"]["n"] == 44
    assert result["paraphrase"]["keyword"] == 0.0  # by construction
    assert result["sentence"]["hybrid"] >= 0.9 and result["paraphrase"]["hybrid"] >= 0.3
    assert result["negative"]["keyword"] >= 0.8 and result["negative"]["hybrid"] >= 0.5
    assert result["title"]["first"] == {"keyword": 44, "hybrid": 44}
    # a stricter floor ([memory] from --config) answers every negative with nothing
    (tmp_path / "floor.toml").write_text("[memory]\nfloor_cosine = 0.35\n"
                                         "floor_probability = 1.0\n")
    code, out, err = run_cli(*args, "--mode", "hybrid", "--json", "--config",
                             str(tmp_path / "floor.toml"))
    assert code == 0, err
    assert json.loads(out)["by_kind"]["negative"]["hybrid"] == 1.0
    code, out, _ = run_cli(*args, "--mode", "keyword")
    assert code == 0 and "titles ranking their own record first: keyword 44/44" in out
    (tmp_path / "q.json").write_text(json.dumps({"queries": [
        {"id": "x", "kind": "negative", "query": "q", "gold": ["dec-ci-001"]}]}))
    code, _, err = run_cli("eval", "decisions", "--corpus", str(EVAL / "corpus.json"),
                           "--queries", str(tmp_path / "q.json"))
    assert code == 2 and "a negative has no gold" in err
    code, _, err = run_cli("eval", "decisions", "--corpus", str(tmp_path / "none.json"),
                           "--queries", str(tmp_path / "q.json"))
    assert code == 2 and "cannot read" in err and "none.json" in err
    code, _, err = run_cli(*args, "--mode", "fuzzy")
    assert code == 2 and "--mode" in err
