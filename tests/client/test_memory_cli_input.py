"""Wrong input to ``neuralmind memory …`` (and ``webhook``) refused with a message that says
what is wrong, exit 2, and nothing changed: an id with a ``/`` (it reached another route), an
option of another action given an off or 0 value, a file that is no JSONL export, ``--note``
with ``--remove``, and a ``--limit`` that is not a whole number. In this process against
``served``, from a repository."""

from __future__ import annotations

import io
import json
import sys

import pytest

from tests.client.conftest import git_repo
from tests.support import run_cli


@pytest.fixture
def cli(served, monkeypatch, tmp_path):
    """``neuralmind ARGS`` in this process, pointed at ``served``, inside a repository."""
    repo = git_repo(tmp_path / "repo", {"app.py": "def main():\n    return 1\n"})
    monkeypatch.chdir(repo)
    env = {"NEURALMIND_API_URL": served.url, "NEURALMIND_API_TOKEN": served.token}

    def run(*args: str, plugins: str | None = None) -> tuple[int, str, str]:
        return run_cli(*args, env={**env, **({"NEURALMIND_PLUGINS": plugins} if plugins else {})})

    run.repo = repo
    return run


def added(cli, title: str, *more: str) -> dict:
    code, out, err = cli("memory", "add", title, "-r", f"why {title}", *more, "--json")
    assert code == 0, err
    return json.loads(out)


def shown(cli, mid: str) -> tuple[dict, list]:
    """A record as it stands and its history: what a refused command must leave alone."""
    code, out, err = cli("memory", "show", mid, "--json")
    assert code == 0, err
    code, events, err = cli("memory", "history", mid, "--json")
    assert code == 0, err
    return json.loads(out), json.loads(events)


def refused(cli, args, says: str, plugins: str | None = None) -> None:
    code, out, err = cli(*args, plugins=plugins)
    assert (code, out) == (2, ""), (args, err)
    assert says in err and "Traceback" not in err, (args, err)


def test_an_id_with_a_slash_is_refused_before_any_request(cli):
    """`show ID/history` printed nothing and exited 0, `delete ID/tags` said `tag: Field
    required`, `show a/b` said `no route`: the %2F the client sent came back a separator."""
    mem = added(cli, "Use WAL", "--tag", "db")
    other = added(cli, "Use SQLite")
    mid = mem["id"]
    before = shown(cli, mid), shown(cli, other["id"])
    said = "is not a memory id: an id has no / in it (`neuralmind memory list` shows them)"
    for args in [("show", f"{mid}/history"), ("delete", f"{mid}/tags"), ("show", "a/b"),
                 ("edit", f"{mid}/x", "--rationale", "changed"), ("history", f"{mid}/x"),
                 ("invalidate", f"{mid}/x", "--reason", "r"), ("restore", f"{mid}/x"),
                 ("feedback", f"{mid}/x", "--unhelpful"), ("graph", f"{mid}/x"),
                 ("timeline", f"{mid}/x"), ("tags", f"{mid}/x", "--remove", "db"),
                 ("link", f"{mid}/x", other["id"], "--type", "relates_to"),
                 ("link", mid, f"{other['id']}/x", "--type", "relates_to"),
                 ("edit", mid, "--supersedes", f"{other['id']}/x"),
                 ("add", "t", "-r", "r", "--supersedes", f"{other['id']}/x"),
                 ("add", "t", "-r", "r", "--id", "a/b"),
                 ("contradictions", "--memory", f"{mid}/x")]:
        refused(cli, ("memory", *args), f"'{next(a for a in args if '/' in a)}' {said}")
    for args in [("check", f"{mid}/x"), ("resolve", "c/x", "--strategy", "keep_both")]:
        refused(cli, ("memory", "contradictions", *args), "is not an id: an id has no / in it")
    assert (shown(cli, mid), shown(cli, other["id"])) == before
    code, out, _ = cli("memory", "list", "--json")
    assert code == 0 and sorted(m["id"] for m in json.loads(out)) == sorted([mid, other["id"]])
    code, out, err = cli("memory", "show", "a%2Fb")  # no slash: an id the server looks up
    assert code == 1 and "no memory with id a%2Fb [memory_not_found" in err


@pytest.mark.parametrize("args", [
    ("show", "a/b"), ("update", "wh_1/test", "--disable"), ("delete", "wh_1/x"),
    ("rotate-secret", "a/b"), ("test", "a/b"), ("deliveries", "a/b")])
def test_a_webhook_id_with_a_slash_is_refused(cli, args):
    refused(cli, ("webhook", *args), f"argument id: '{args[1]}' is not a webhook id: an id has "
            "no / in it (`neuralmind webhook list` shows them)", plugins="auth,webhooks")


def test_a_delivery_id_with_a_slash_is_refused(cli):
    refused(cli, ("webhook", "redeliver", "wh_1", "dl_1/x"), "argument delivery: 'dl_1/x' is "
            "not a delivery id", plugins="auth,webhooks")


@pytest.mark.parametrize(("args", "says"), [
    (("decay", "run", "--enabled", "off"), "--enabled is for `memory decay policy`, not `run`"),
    (("decay", "--enabled", "on"), "--enabled is for `memory decay policy`, not `run`"),
    (("decay", "run", "--archive-threshold", "0"),
     "--archive-threshold is for `memory decay policy`, not `run`"),
    (("decay", "run", "--access-boost", "0"),
     "--access-boost is for `memory decay policy`, not `run`"),
    (("decay", "run", "--access-boost", "0.0"),
     "--access-boost is for `memory decay policy`, not `run`"),
    (("contradictions", "list", "--check-on-store", "off"),
     "--check-on-store is for `memory contradictions config`, not `list`"),
    (("contradictions", "check", "m1", "--check-on-store", "off"),
     "--check-on-store is for `memory contradictions config`, not `check`"),
    (("contradictions", "list", "--threshold", "0"),
     "--threshold is for `memory contradictions config`, not `list`"),
])
def test_an_option_of_another_action_is_refused_when_off_or_0(cli, args, says):
    """`0`, `0.0` and off are False to Python: a test of falsiness let them by, unused."""
    added(cli, "Use WAL")
    policy, config = (cli("memory", *a, "--json")[1] for a in (("decay", "policy"),
                                                              ("contradictions", "config")))
    code, out, err = cli("memory", *args)
    assert (code, out, err) == (2, "", f"neuralmind: {says}\n")
    assert cli("memory", "decay", "policy", "--json")[1] == policy
    assert cli("memory", "contradictions", "config", "--json")[1] == config


def test_off_and_0_still_reach_the_action_they_are_for(cli):
    added(cli, "Use WAL")
    code, out, err = cli("memory", "decay", "policy", "--enabled", "off", "--access-boost", "0",
                         "--json")
    assert code == 0 and (json.loads(out)["enabled"], json.loads(out)["access_boost"]) == (
        False, 0.0), err
    code, out, err = cli("memory", "contradictions", "config", "--check-on-store", "off",
                         "--threshold", "0", "--json")
    assert code == 0 and json.loads(out)["check_on_store"] is False, err
    for args in (("decay", "--dry-run"), ("contradictions",), ("contradictions", "list")):
        assert cli("memory", *args)[0] == 0, args  # nothing given: nothing misplaced


def test_a_file_that_is_no_jsonl_export_is_named_in_one_line(cli, served, monkeypatch, tmp_path):
    """A Markdown export, or a .py file, printed one line per line of it (1,116 lines)."""
    added(cli, "Use WAL")
    md = cli.repo / "export.md"
    assert cli("memory", "export", "--format", "md", "-o", str(md))[0] == 0
    source = cli.repo / "app.py"
    source.write_text("".join(f"x{i} = {i}\n" for i in range(300)) + '"a string"\n[1, 2]\n')
    fresh = git_repo(tmp_path / "fresh", {"x.py": "x = 1\n"})  # import would register it
    projects = served.get("/v1/projects?limit=200").json["items"]
    for path in (md, source):
        code, out, err = cli("memory", "import", str(path), "--project", str(fresh))
        assert (code, out) == (2, "")
        assert err == (f"neuralmind: {path} is not a JSONL export: no line of it is a JSON object "
                       "(import reads what `neuralmind memory export` writes with its default "
                       "--format ndjson, one record a line; --format md is for reading, not "
                       "importing)\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(md.read_bytes())))
    code, out, err = cli("memory", "import", "-", "--project", str(fresh))
    assert (code, out) == (2, "") and err.startswith("neuralmind: stdin is not a JSONL export")
    assert served.get("/v1/projects?limit=200").json["items"] == projects  # none registered


def test_an_import_with_many_bad_lines_shows_the_first_few(cli):
    added(cli, "Use WAL")
    export = cli.repo / "export.jsonl"
    assert cli("memory", "export", "-o", str(export))[0] == 0
    line = json.loads(export.read_text().splitlines()[0])

    def good(mid: str) -> str:  # a record of its own (its history's event ids are taken)
        return json.dumps({**line, "memory": {**line["memory"], "id": mid}, "history": []})

    export.write_text("\n".join([good("m2"), *["not json"] * 30]) + "\n")
    code, out, err = cli("memory", "import", str(export))
    lines = err.splitlines()
    assert (code, out) == (1, "")
    assert lines[0].startswith("neuralmind: the import did not validate; nothing was written "
                               "[validation_error, status 422, request ")
    assert lines[1:] == [f"  line {n}: Invalid JSON: expected ident at line 1 column 2"
                         for n in range(2, 7)] + ["  … and 25 more"], err
    assert cli("memory", "show", "m2")[0] == 1  # nothing written
    export.write_text(good("m3") + "\nnot json\nnot json\n")
    code, _, err = cli("memory", "import", str(export))  # a few: each is said
    assert code == 1 and err.count("\n  line ") == 2 and "more" not in err
    export.write_text(good("m3") + "\n")
    assert cli("memory", "import", str(export))[0] == 0  # the good line alone: imported
    assert cli("memory", "show", "m3")[0] == 0 and cli("memory", "show", "m2")[0] == 1


def test_note_with_remove_is_refused(cli):
    a, b = added(cli, "Use WAL"), added(cli, "Use SQLite")
    code, out, err = cli("memory", "link", a["id"], b["id"], "--type", "relates_to", "--note",
                         "same db")
    assert code == 0, err
    before = cli("memory", "graph", a["id"], "--json")[1]
    code, out, err = cli("memory", "link", a["id"], b["id"], "--remove", "--note", "x")
    assert (code, out) == (2, "")
    assert err == ("neuralmind: --note is kept on a link when it is made: --remove takes none "
                   "(it removes the link, note and all)\n")
    assert cli("memory", "graph", a["id"], "--json")[1] == before  # the link is still there
    code, out, err = cli("memory", "link", a["id"], b["id"], "--remove")
    assert code == 0 and "removed every link" in out, err


@pytest.mark.parametrize(("value", "says"), [
    ("abc", "argument --limit: 'abc' is not a whole number"),
    ("0", "argument --limit: 0 is outside 1–25"),
    ("26", "argument --limit: 26 is outside 1–25")])
def test_search_limit_is_checked_as_list_limit_is(cli, value, says):
    refused(cli, ("memory", "search", "wal", "--limit", value), says)
    if value == "abc":
        refused(cli, ("memory", "list", "--limit", value), says)


def test_search_limit_in_range(cli):
    for title in ("Use WAL", "WAL checkpoints", "WAL size"):
        added(cli, title)
    code, out, err = cli("memory", "search", "wal", "--mode", "keyword", "--limit", "2", "--json")
    assert code == 0 and len(json.loads(out)) == 2, err


def test_a_consolidate_threshold_out_of_range_is_refused_before_any_request(cli):
    """It was a plain float: 2 reached the server, whose 422 came back after a request."""
    refused(cli, ("memory", "consolidate", "--threshold", "2"),
            "argument --threshold: Input should be less than or equal to 1 (got 2)")
