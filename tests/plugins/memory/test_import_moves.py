"""Moving memories with export → import: what an import must refuse (a ``commit_sha`` git would
read as an option, what no export writes), the links an overwrite drops whatever the order of
its lines, docs/client.md's recipe for an export larger than a request, and the history of an
id that never existed."""

from __future__ import annotations

import json

import pytest

from kernel import gitinfo
from tests.plugins.memory.conftest import Api, git, memory_database
from tests.support import ROOT

JSONL = {"Content-Type": "application/x-ndjson"}
AT = "2024-01-01T00:00:00.000Z"


def line(mid: str, history: list | None = None, **memory) -> dict:
    return {"memory": {"id": mid, "title": "t", "rationale": "r", "created_at": AT,
                       "updated_at": AT, **memory},
            "history": history if history is not None else [
                {"id": f"ev_{mid}", "at": AT, "kind": "created", "actor": None, "changes": {},
                 "note": None}]}


def post(api: Api, lines: list[dict], mode: str = "skip"):
    return api.server.post(api.url(tail="import") + f"?mode={mode}",
                           body="".join(json.dumps(x) + "\n" for x in lines).encode(),
                           headers=JSONL)


def test_import_refuses_a_commit_sha_that_is_not_hex(api, tmp_path):
    """It was stored, and maintenance handed it to ``git diff``, which read it as an option:
    ``--output=FILE`` made the server write FILE."""
    bad = line("inj", commit_sha=f"--output={tmp_path / 'written'}", files_affected=["m.py"])
    r = post(api, [line("fine", commit_sha="ab12"), bad])
    assert r.status == 422, r.body
    (error,) = r.error["details"]["errors"]
    assert error["loc"] == ["body", "line 2", "memory", "commit_sha"]
    assert api.server.get(api.url()).json["items"] == []


def test_git_never_reads_a_stored_commit_sha_as_an_option(server, tmp_path):
    """A value an import stored before it was refused: maintenance asks git nothing with it,
    and ``changed_since`` still answers for a real commit."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "m.py").write_text("x = 1\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    first = git(root, "rev-parse", "HEAD")
    (root / "m.py").write_text("x = 2\n")
    git(root, "commit", "-qam", "two")
    written = tmp_path / "written"
    assert gitinfo.changed_since(root, first) == {"m.py"}
    assert gitinfo.changed_since(root, first[:7]) == {"m.py"}
    assert gitinfo.changed_since(root, f"--output={written}") is None
    assert not list(tmp_path.glob("written*"))
    api = Api(server, root)
    made = api.create(title="On m.py", files_affected=["m.py"], commit_sha=first)
    with memory_database(server.home, root, api.pid) as db, db.transaction() as conn:
        conn.execute("UPDATE memories SET commit_sha = ? WHERE id = ?",
                     (f"--output={written}", made["id"]))
    assert api.job("maintenance")["stale_files_changed"] == 0
    assert not list(tmp_path.glob("written*"))


@pytest.mark.parametrize("source_first", [True, False])
def test_an_overwrite_says_it_dropped_a_link_whatever_the_order_of_its_lines(api, source_first):
    """With the link's target on the earlier line, its delete took the link along before the
    source's line was read: the link vanished without an event, updated_at unmoved."""
    older, newer = api.create(title="Older", id="g-old"), api.create(title="Newer", id="g-new")
    exported = api.server.get(api.url(tail="export")).body
    source, target = (older, newer) if source_first else (newer, older)
    assert api.server.post(api.url(source["id"], "links"),
                           {"target": target["id"], "type": "depends_on"}).status == 201
    before = api.get(source["id"])["updated_at"]
    r = api.server.post(api.url(tail="import") + "?mode=overwrite", body=exported, headers=JSONL)
    assert r.json == {"created": 0, "overwritten": 2, "skipped": 0}
    assert api.server.get(api.url(source["id"], "links")).json["items"] == []
    for mid in (source["id"], target["id"]):
        last = api.history(mid)[-1]
        assert (last["kind"], last["note"]) == ("unlinked", "overwritten by an import")
        assert last["changes"] == {"link": {"source": source["id"], "target": target["id"],
                                            "type": "depends_on"}}
    assert api.get(source["id"])["updated_at"] > before


def test_the_recipe_for_a_large_export_keeps_every_link(server, tmp_path, monkeypatch):
    """docs/client.md, run as written: a link from a record to one of a later part was left
    out of its part, and no later part carried it."""
    from neuralmind.client import NeuralMindClient
    (tmp_path / "old").mkdir()
    src = Api(server, tmp_path / "old")
    first = src.create(title="First record: structured logging", id="d-first")
    for i in range(3):  # ~400 KB each: three parts under the 1 MiB cap
        src.create(title=f"Filler {i}", evidence=[f"e{i} " * 600] * 200)
    last = src.create(title="Last record: the log schema", id="d-last")
    for a, b, kind in ((first, last, "depends_on"), (last, first, "relates_to")):
        assert src.server.post(src.url(a["id"], "links"),
                               {"target": b["id"], "type": kind}).status == 201
    (tmp_path / "memories.ndjson").write_bytes(server.get(src.url(tail="export")).body)
    doc = (ROOT / "docs" / "client.md").read_text()
    (recipe,) = [block.split("```")[0] for block in doc.split("```python\n")[1:]
                 if 'open("memories.ndjson"' in block.split("```")[0]]
    dst = tmp_path / "new"
    dst.mkdir()
    nm = NeuralMindClient(server.url, token=server.token)
    monkeypatch.chdir(tmp_path)
    exec(recipe.replace('NeuralMindClient().project(".")', "nm.project(dst)"),
         {"nm": nm, "dst": dst, "print": lambda *a: None})
    moved = Api(server, dst)
    links = sorted((x["source"], x["type"], x["target"])
                   for x in server.get(moved.url("d-first", "links")).json["items"])
    assert links == [("d-first", "depends_on", "d-last"), ("d-last", "relates_to", "d-first")]
    assert server.get(moved.url(tail="export")).body == (tmp_path / "memories.ndjson").read_bytes()


@pytest.mark.parametrize("lines, where, says", [
    ([line("a"), line("b", history=line("a")["history"])], ("line 2", "history", 0, "id"),
     "event 0 of line 1 has this id too"),
    ([line("c", history=line("c")["history"] * 2)], ("line 1", "history", 1, "id"),
     "event 0 of line 1 has this id too"),
    ([line("f", files_affected=["ok.py", "../../outside.py"])],
     ("line 1", "memory", "files_affected", 1), "is not inside the project"),
    ([line("k", history=[{**line("k")["history"][0], "kind": "teleported"}])],
     ("line 1", "history", 0, "kind"), "Input should be"),
])
def test_import_refuses_what_no_export_writes(api, lines, where, says):
    """Each was taken: a repeated event id dropped the event, a path outside the project was
    stored as it was, an unknown kind of event went into the history."""
    r = post(api, lines)
    assert r.status == 422, r.body
    errors = r.error["details"]["errors"]
    assert any(e["loc"] == ["body", *where] and says in e["msg"] for e in errors), errors
    assert api.server.get(api.url()).json["items"] == []


def test_history_of_an_id_that_never_existed_is_404_with_a_cursor_too(api):
    made = api.create(title="Kept")
    for i in range(2):
        api.server.patch(api.url(made["id"]), {"rationale": f"again {i}"})
    page = api.server.get(api.url(made["id"], "history") + "?limit=1").json
    cursor = page["next_cursor"]
    for mid in ("nope", made["id"]):
        r = api.server.get(api.url(mid, "history") + f"?cursor={cursor}")
        assert r.status == (404 if mid == "nope" else 200), r.body
    assert api.server.get(api.url("nope", "history")).error["code"] == "memory_not_found"
    assert api.server.delete(api.url(made["id"])).status == 204  # its history still answers
    assert api.server.get(api.url(made["id"], "history") + f"?cursor={cursor}").status == 200
