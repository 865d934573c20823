"""Wrong input to ``neuralmind memory …`` (and ``webhook``) refused with a message that says
what is wrong, exit 2, and nothing changed: an id with a ``/`` (it reached another route), an
option of another action given an off or 0 value, a file that is no JSONL export, ``--note``
with ``--remove``, a ``--limit`` that is not a whole number, an empty filter, a tag the server
would refuse after another was added, ``--status`` on a memory's tags; an export that fails
leaves the file it was to replace as it was; the help and the output of a link say which
record it retires. In this process against ``served``, from a repository (an export that
fails: through a real local HTTP server in front of it)."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading

import pytest

from tests.client.conftest import git_repo
from tests.support import QuietHandler, http_server, run_cli


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


# -- empty or misplaced values -------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("list", "--collection", ""), ("list", "--status", ""), ("list", "--type", " "),
    ("search", "wal", "--collection", ""), ("search", "wal", "--status", ""),
    ("search", "wal", "--type", ""), ("tags", "--status", ""),
    ("add", "t", "-r", "r", "--type", "")])
def test_an_empty_filter_is_refused_as_an_empty_author_is(cli, args):
    """`--collection ""`, `--status ""` and `--type ""` dropped the filter: every record
    (or ACTIVE ones) instead of a refusal."""
    added(cli, "Use WAL")
    before = cli("memory", "list", "--status", "ALL", "--json")[1]
    refused(cli, ("memory", *args), f"argument {args[-2]}: cannot be empty")
    assert cli("memory", "list", "--status", "ALL", "--json")[1] == before


@pytest.mark.parametrize(("args", "says"), [
    (("--add", "good", "--remove", ""), "argument --remove: cannot be empty"),
    (("--add", "good", "--remove", "  "), "argument --remove: cannot be empty"),
    (("--remove", "db", "--add", "good", "--add", ""), "argument --add: cannot be empty"),
    (("--add", "good", "--remove", "x" * 65),
     "argument --remove: String should have at most 64 characters"),
    (("--add", "good", "--status", "BOGUS"),
     "--status counts the tags of records of a status (`memory tags --status S`, without an "
     "id): a memory's own tags take none"),
    (("--status", "ACTIVE"), "--status counts the tags of records of a status"),
])
def test_tags_are_all_checked_before_the_first_request(cli, args, says):
    """`--add good --remove ""` added good, then the removal's 422 exited 1; `--status` with
    an id was ignored (exit 0)."""
    mid = added(cli, "Use WAL", "--tag", "db")["id"]
    before = shown(cli, mid)
    refused(cli, ("memory", "tags", mid, *args), says)
    assert shown(cli, mid) == before  # good not added, db not removed, no event


def test_tags_add_and_remove_still_change_both(cli):
    mid = added(cli, "Use WAL", "--tag", "db", "--tag", "old")["id"]
    code, out, err = cli("memory", "tags", mid, "--add", " good ", "--remove", "old", "--json")
    assert code == 0 and json.loads(out)["tags"] == ["db", "good"], err
    code, out, err = cli("memory", "tags", "--status", "ACTIVE", "--json")
    assert code == 0 and {"tag": "good", "count": 1} in json.loads(out), err


# -- an export that fails keeps the file it was to replace ---------------------------------

class Spoiling(QuietHandler):
    """Forwards each GET to ``upstream`` (the real server), except an export's answer,
    spoiled as ``spoil`` says: "refused" answers 404 (a server without the memory plugin
    behind a proxy), "cut" sends the first half of the real export, then closes."""

    upstream = ""
    spoil = "cut"

    def do_GET(self):
        status, kind, data = self.forwarded(self.upstream)
        length = len(data)
        if "/memories/export" in self.path and self.spoil == "refused":
            status, kind = 404, "application/json"
            data = json.dumps({"error": {"code": "not_found", "message": "no route GET export",
                                         "status": 404, "request_id": "px", "details": {}}}
                              ).encode()
            length = len(data)
        elif "/memories/export" in self.path:
            data = data[:len(data) // 2]  # Content-Length says all of it
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.parametrize(("spoil", "form", "says"), [
    ("refused", "ndjson", "no route GET export [not_found, status 404"),
    ("cut", "ndjson", "broke off after 1 records, without its end"),
    ("cut", "md", "sent a broken answer")])
def test_an_export_that_fails_leaves_the_file_as_it_was(cli, served, monkeypatch, spoil, form,
                                                        says):
    """`-o FILE` opened FILE with "w" before the request: a refused export left it empty, one
    cut short left it partial."""
    for title in ("Use WAL", "Use SQLite", "Pin falcon"):
        added(cli, title)
    folder = cli.repo / "out"
    folder.mkdir()
    keep = folder / "keep.txt"
    keep.write_text("precious\n")
    keep.chmod(0o640)
    monkeypatch.setattr(Spoiling, "upstream", served.url)
    monkeypatch.setattr(Spoiling, "spoil", spoil)
    with http_server(Spoiling) as url:
        code, out, err = run_cli("memory", "export", "--format", form, "-o", str(keep),
                                 env={"NEURALMIND_API_URL": url,
                                      "NEURALMIND_API_TOKEN": served.token})
    assert (code, out) == (1, "") and says in err and "Traceback" not in err, err
    assert keep.read_text() == "precious\n" and os.listdir(folder) == ["keep.txt"]
    assert stat.S_IMODE(keep.stat().st_mode) == 0o640
    code, out, err = cli("memory", "export", "--format", form, "-o", str(keep))  # whole: in place
    assert (code, out) == (0, "") and err == f"exported 3 memories to {keep}\n", err
    assert os.listdir(folder) == ["keep.txt"] and stat.S_IMODE(keep.stat().st_mode) == 0o640
    text = keep.read_text()
    assert "Pin falcon" in text and (form == "md" or len(text.splitlines()) == 3)


def test_an_export_to_a_new_file_a_link_or_a_missing_folder(cli):
    added(cli, "Use WAL")
    fresh, target, link = (cli.repo / name for name in ("new.jsonl", "target.jsonl", "link"))
    assert cli("memory", "export", "-o", str(fresh))[0] == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask  # as a file opened with "w"
    target.write_text("old\n")
    link.symlink_to(target)
    assert cli("memory", "export", "-o", str(link))[0] == 0
    assert link.is_symlink() and target.read_text() == fresh.read_text()  # written through it
    fifo = cli.repo / "fifo"  # no regular file: written as it is, nothing made beside it
    os.mkfifo(fifo)
    read = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()))
    reader.start()
    assert cli("memory", "export", "-o", str(fifo))[0] == 0
    reader.join(10)
    assert read == [fresh.read_text()] and not list(cli.repo.glob(".fifo*"))
    missing = cli.repo / "no-such-folder" / "x.jsonl"
    code, out, err = cli("memory", "export", "-o", str(missing))
    assert (code, out, err) == (2, "", f"neuralmind: {missing}: No such file or directory\n")


def test_an_export_over_a_bind_mounted_file_is_written_over_it_once_whole(cli):
    """A file bind-mounted into place (a container's `-v ./out.jsonl:/out.jsonl`) cannot be
    renamed over (EBUSY): the export failed naming a temporary file the user never typed. It
    is written over the file once whole, which keeps its inode."""
    added(cli, "Use WAL")
    source, mounted = cli.repo / "host.jsonl", cli.repo / "out.jsonl"
    source.write_text("old\n")
    mounted.write_text("")
    if subprocess.run(["mount", "--bind", str(source), str(mounted)],
                      capture_output=True).returncode != 0:
        pytest.skip("bind mounts need root and a mount namespace that allows them")
    try:
        code, out, err = cli("memory", "export", "-o", str(mounted))
        assert (code, out) == (0, ""), err
        assert "Use WAL" in source.read_text() and source.read_text() == mounted.read_text()
        assert not list(cli.repo.glob(".out.jsonl*"))
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


def test_an_export_never_follows_a_link_another_user_planted_in_a_shared_folder(cli,
                                                                                 tmp_path):
    """In a sticky, world-writable folder (/tmp), a link another user put where the export
    goes was followed — root wrote the export over whatever file it named — where the
    kernel's protected_symlinks refuses a shell's `>`. It is refused, the file untouched."""
    if os.geteuid() != 0:
        pytest.skip("a link of another user is made with lchown, which needs root")
    added(cli, "Use WAL")
    shared, victim = tmp_path / "shared", tmp_path / "victim.conf"
    shared.mkdir()
    shared.chmod(0o1777)
    victim.write_text("precious\n")
    planted = shared / "out.jsonl"
    planted.symlink_to(victim)
    os.lchown(planted, 65534, 65534)
    code, out, err = cli("memory", "export", "-o", str(planted))
    assert (code, out) == (1, "")
    assert err == (f"neuralmind: {planted}: a link another user put in a shared folder is not "
                   f"followed ({planted})\n")
    assert victim.read_text() == "precious\n" and planted.is_symlink()
    folder = shared / "folder"  # a link to a folder, anywhere in the name, the same
    folder.symlink_to(tmp_path)
    os.lchown(folder, 65534, 65534)
    code, out, err = cli("memory", "export", "-o", str(folder / "victim.conf"))
    assert (code, out) == (1, "") and f"is not followed ({folder})" in err, err
    assert victim.read_text() == "precious\n"
    mine = shared / "mine.jsonl"  # a link of the user's own is followed, as before
    mine.symlink_to(tmp_path / "target.jsonl")
    assert cli("memory", "export", "-o", str(mine))[0] == 0
    assert "Use WAL" in (tmp_path / "target.jsonl").read_text()


# -- what a link retires, in its help and its output ---------------------------------------

def test_a_link_says_which_record_it_retires(cli):
    """`merged_into` made the source MERGED while the help spoke of supersedes' target only and
    the output said `A merged_into B`."""
    a, b, c, d = (added(cli, t)["id"] for t in ("Use WAL", "Use WAL mode", "Old", "New"))
    code, out, err = cli("memory", "link", a, b, "--type", "merged_into")
    assert (code, out) == (0, f"{a} merged_into {b}: {a} (the source) is MERGED now\n"), err
    code, out, err = cli("memory", "link", d, c, "--type", "supersedes")
    assert (code, out) == (0, f"{d} supersedes {c}: {c} (the target) is SUPERSEDED now\n"), err
    code, out, err = cli("memory", "link", b, d, "--type", "relates_to")
    assert (code, out) == (0, f"{b} relates_to {d}\n"), err
    assert cli("memory", "invalidate", b, "--reason", "gone")[0] == 0
    code, out, err = cli("memory", "link", b, d, "--type", "merged_into")  # out of force already
    assert (code, out) == (0, f"{b} merged_into {d}: {b} (the source) stays INVALIDATED\n"), err
    code, out, err = cli("memory", "link", c, d, "--type", "depends_on", "--json")
    assert code == 0 and json.loads(out)["source"] == c, err


def help_of(cli, *args: str) -> str:
    code, out, err = cli("memory", *args, "--help")
    assert code == 0, err
    return re.sub(r"\s+", " ", out)


def test_the_help_says_what_a_link_retires_and_how_a_date_is_written(cli):
    assert ("--type {supersedes,depends_on,relates_to,contradicts,merged_into} supersedes "
            "retires the target (SUPERSEDED), merged_into the source, ID (MERGED); the others "
            "change no status") in help_of(cli, "link")
    assert "--review-by REVIEW_BY YYYY-MM-DD: after that day it reads as STALE" in help_of(
        cli, "add")
