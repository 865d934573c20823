"""review_by and the maintenance job, the query_context hook, roles in server mode, and
property-based bodies: bad input is a 422 envelope and changes nothing, never a 500."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.config import ConfigError
from tests.plugins.auth.helpers import create_token, server_config
from tests.plugins.memory.conftest import Api, git, start
from tests.support import LocalServer, make_kernel

TODAY = dt.datetime.now(dt.UTC).date()
JSONL = {"Content-Type": "application/x-ndjson"}


def imported(api, mid: str, review_by: str) -> None:
    line = {"memory": {"id": mid, "title": f"review {mid}", "rationale": "r",
                       "review_by": review_by, "created_at": "2024-01-01T00:00:00.000Z",
                       "updated_at": "2024-01-01T00:00:00.000Z"}, "history": []}
    r = api.server.post(api.url(tail="import"), body=json.dumps(line).encode(), headers=JSONL)
    assert r.status == 200, r.body


def test_review_by_flips_exactly_at_the_boundary(api):
    """A date in the past cannot be written, so the records come in through import."""
    imported(api, "due-today", str(TODAY))
    imported(api, "due-yesterday", str(TODAY - dt.timedelta(days=1)))
    assert api.server.get(api.url("due-today")).json["effective_status"] == "ACTIVE"
    late = api.server.get(api.url("due-yesterday")).json
    assert late["status"] == "ACTIVE" and late["effective_status"] == "STALE"
    assert [r["id"] for r in api.server.get(api.base + "?status=STALE").json["items"]] == \
        ["due-yesterday"]
    assert [r["id"] for r in api.search("review", mode="keyword")["results"]] == ["due-today"]

    r = api.server.post(api.url(tail="maintenance") + "?wait=true")
    assert r.status == 200 and r.json["job"]["status"] == "done", r.body
    assert r.json["job"]["result"]["stale_review_by"] == 1
    assert api.server.get(api.url("due-yesterday")).json["status"] == "STALE"
    event = api.history("due-yesterday")[-1]
    assert event["kind"] == "stale" and event["changes"] == {"status": ["ACTIVE", "STALE"]}
    restored = api.server.post(api.url("due-yesterday", "restore"), {}).json
    assert restored["effective_status"] == "ACTIVE" and restored["review_by"] is None


def test_an_overdue_record_stays_editable_and_its_date_can_be_cleared(api):
    """A patch sending back an overdue record's own review_by (what an edit form shows) was
    422 date_in_past: the record could not be edited, in one call or in a batch."""
    passed = str(TODAY - dt.timedelta(days=30))
    imported(api, "overdue", passed)
    rec = api.get("overdue")
    r = api.server.patch(api.url("overdue"), {"rationale": "edited", "review_by": passed},
                         headers={"If-Match": rec["updated_at"]})
    assert r.status == 200, r.body
    assert (r.json["rationale"], r.json["review_by"], r.json["effective_status"]) == \
        ("edited", passed, "STALE")
    r = api.server.post(api.url(tail="batch"), {"items": [
        {"op": "patch", "id": "overdue", "rationale": "batched", "review_by": passed}]})
    assert r.status == 200 and r.json["items"][0]["status"] == "ok", r.body
    other = str(TODAY - dt.timedelta(days=1))  # another past date is still refused
    r = api.server.patch(api.url("overdue"), {"review_by": other})
    assert r.status == 422 and r.error["details"]["errors"] == [
        {"loc": ["body", "review_by"], "type": "date_in_past",
         "msg": f"{other} is in the past (today is {TODAY}, in UTC)"}]
    r = api.server.patch(api.url("overdue"), {"review_by": None})
    assert r.status == 200 and (r.json["review_by"], r.json["effective_status"]) == \
        (None, "ACTIVE")
    assert [e["changes"].get("review_by") for e in api.history("overdue")][-1] == [passed, None]


def test_maintenance_marks_decisions_whose_files_changed_in_git(api):
    git(api.dir, "init", "-q")
    for name in ("a.py", "b.py"):
        (api.dir / name).write_text("v1\n")
    git(api.dir, "add", ".")
    git(api.dir, "commit", "-qm", "one")
    on_a = api.create(files_affected=["a.py"])
    on_b = api.create(files_affected=["b.py"])
    (api.dir / "a.py").write_text("v2\n")
    git(api.dir, "commit", "-qam", "two")
    r = api.server.post(api.url(tail="maintenance"))
    assert r.status == 202 and r.headers["location"].startswith("/v1/jobs/")
    deadline = time.monotonic() + 30
    while (job := api.server.get(r.headers["location"]).json)["status"] not in ("done", "error"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert job["status"] == "done" and job["result"]["stale_files_changed"] == 1, job
    assert api.server.get(api.url(on_a["id"])).json["status"] == "STALE"
    assert api.server.get(api.url(on_b["id"])).json["status"] == "ACTIVE"
    assert "a.py" in api.history(on_a["id"])[-1]["note"]


def test_query_context_gives_active_decisions_on_hit_files_within_budget(server, tmp_path):
    api = Api(server, tmp_path)
    first = api.create(title="Parser owns tokens", rationale="x" * 200, files_affected=["p.py"])
    second = api.create(title="Lexer is pure", rationale="y" * 40, files_affected=["l.py", "p.py"],
                        confidence=0.5)
    gone = api.create(title="Old rule", rationale="z", files_affected=["p.py"])
    api.server.post(api.url(gone["id"], "invalidate"), {"reason": "replaced"})
    api.create(title="Elsewhere", rationale="w", files_affected=["other.py"])
    kernel = make_kernel(server.home, plugins=["auth", "memory"])
    try:
        project = kernel.projects.get(api.pid)
        hits = [{"source_file": "l.py", "line": 3, "label": "lex", "score": 0.9},
                {"source_file": str(tmp_path / "p.py"), "line": 1, "label": "parse", "score": 0.5}]

        def ask(budget):
            parts = [p for ps in kernel.pm.hook.query_context(
                kernel=kernel, project=project, question="q", hits=hits, budget=budget) for p in ps]
            return parts

        [part] = ask(1000)
        assert part["title"] == "Decisions on these files"
        text = part["text"]
        assert text.index("Lexer is pure") < text.index("Parser owns tokens")  # best hit first
        assert "Old rule" not in text and "Elsewhere" not in text
        assert part["tokens"] == -(-len(text) // 4)
        [small] = ask(40)
        assert "Lexer is pure" in small["text"] and "Parser owns" not in small["text"]
        assert small["tokens"] <= 40
        assert ask(5) == []
        assert kernel.pm.hook.query_context(kernel=kernel, project=project, question="q",
                                            hits=[], budget=100) == [[]]
        assert first["id"] in text and second["id"] in text
    finally:
        kernel.shutdown()


def test_roles_in_server_mode(tmp_path):
    cfg_text = server_config(tmp_path, {"proj": tmp_path / "repo"})
    srv = start(tmp_path / "home", config=cfg_text)
    try:
        cfg = srv.home / "config.toml"
        tok = {r: create_token(srv.home, cfg, f"{r}-1", r)["token"]
               for r in ("reader", "builder", "admin")}
        base = "/v1/projects/proj/memories"
        body = {"title": "t", "rationale": "r"}
        assert srv.post(base, body, token=tok["reader"]).status == 403
        assert srv.get(base, token=tok["reader"]).status == 200
        made = srv.post(base, body, token=tok["builder"])
        assert made.status == 201
        mid = made.json["id"]
        assert srv.get(f"{base}/{mid}/history", token=tok["builder"]).json["items"][0]["actor"] \
            == "builder-1"
        assert srv.delete(f"{base}/{mid}", token=tok["builder"]).status == 403
        batch = {"items": [{"op": "delete", "id": mid}]}
        assert srv.post(f"{base}/batch", batch, token=tok["builder"]).status == 403
        assert srv.delete(f"{base}/{mid}", token=tok["admin"]).status == 204
        # an import's events name whom the file says; in server mode the history shows who
        # brought them: a builder's import wrote an "approved by admin" event, and nothing else
        srv.post(base, body, token=tok["builder"])
        line = json.loads(srv.get(f"{base}/export", token=tok["admin"]).body)
        line["memory"]["id"] = "imported1"
        line["history"] = [{**ev, "id": ev["id"] + "x"} for ev in line["history"]] + [
            {"id": "ev_forged00000001", "at": "2026-01-02T00:00:00.000Z", "kind": "amended",
             "actor": "admin", "changes": {}, "note": "approved by admin"}]
        r = srv.post(f"{base}/import?mode=skip", body=json.dumps(line).encode(), headers=JSONL,
                     token=tok["builder"])
        assert r.status == 200 and r.json["created"] == 1, r.body
        history = srv.get(f"{base}/imported1/history", token=tok["admin"]).json["items"]
        assert [(e["actor"], e["kind"]) for e in history][-2:] == [("admin", "amended"),
                                                                  ("builder-1", "imported")]
        assert history[-1]["note"] == (f"created by an import; the {len(history) - 1} event(s) "
                                       "before this one are the file's")
    finally:
        srv.stop()


_text = st.one_of(st.none(), st.integers(), st.text(max_size=30), st.lists(st.text(max_size=5)))
bodies = st.fixed_dictionaries({}, optional={
    "title": _text, "rationale": _text, "decision_type": _text, "status": _text,
    "confidence": st.one_of(st.floats(allow_nan=False), _text), "files_affected": _text,
    "tags": _text, "review_by": _text, "id": _text, "evidence": _text})


def test_random_create_bodies_never_500(server, tmp_path):
    api = Api(server, tmp_path)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bodies)
    def check(body):
        r = api.server.post(api.base, body)
        assert r.status in (201, 409, 422), r.body
        if r.status != 201:
            assert set(r.error) == {"code", "message", "status", "request_id", "details"}
        else:
            assert api.server.get(api.url(r.json["id"])).status == 200

    check()
    r = api.server.post(api.base, body=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status == 400 and r.error["code"] == "invalid_json"


def test_bad_memory_section_fails_start_up(tmp_path):
    srv = LocalServer(tmp_path / "home", plugins=["auth", "memory"],
                      config="[memory]\nfusion = \"magic\"\n")
    with pytest.raises(ConfigError, match=r"(?s)\[memory\] in .*config.toml.*fusion"):
        srv.start()
