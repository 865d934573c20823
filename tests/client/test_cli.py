"""The `neuralmind` client commands (run in this process, against a server in this process
found through NEURALMIND_API_URL/TOKEN): tables by default, --json for scripts, exit codes
0/1/2, and the project taken from the repository around the cwd; and the command as a
subprocess against the real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from neuralmind.cli import main
from tests.client.conftest import git_repo, needs


@pytest.fixture
def cli(served, monkeypatch, capsys, tmp_path):
    """Run ``neuralmind ARGS`` in-process, pointed at ``served``, inside a repository."""
    monkeypatch.setenv("NEURALMIND_API_URL", served.url)
    monkeypatch.setenv("NEURALMIND_API_TOKEN", served.token)
    repo = git_repo(tmp_path / "work", {"app.py": "def main():\n    return 1\n"})
    (repo / "pkg").mkdir()
    monkeypatch.chdir(repo / "pkg")  # a sub-directory: the repository is still the project

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as ex:
            code = ex.code
        out = capsys.readouterr()
        return code, out.out, out.err

    run.repo = repo
    return run


def test_project_commands(cli):
    code, out, _ = cli("project", "add", "--json")
    assert code == 0
    info = json.loads(out)
    assert info["path"] == str(cli.repo)
    code, out, _ = cli("project", "list")
    assert code == 0 and out.splitlines()[0].split()[:2] == ["ID", "NAME"] and info["id"] in out
    code, out, _ = cli("project", "show")
    assert code == 0 and "id" in out and info["id"] in out
    code, out, _ = cli("project", "show", "--project", info["id"], "--json")
    assert json.loads(out)["path"] == str(cli.repo)
    code, out, _ = cli("project", "remove", "--project", info["id"])
    assert code == 0 and "unregistered" in out


def test_only_a_command_that_writes_into_a_project_registers_its_folder(cli, served):
    before = served.get("/v1/projects?limit=200").json["items"]
    for args in (("memory", "list"), ("project", "show"), ("project", "remove"),
                 ("memory", "show", "x1"), ("project", "search", "main")):
        code, out, err = cli(*args)
        assert (code, out) == (2, ""), args
        assert err == (f"neuralmind: {cli.repo} is not a registered project: `neuralmind project "
                       f"add {cli.repo}` registers it (`neuralmind project list` shows those "
                       "that are)\n"), args
    assert served.get("/v1/projects?limit=200").json["items"] == before
    assert not (cli.repo / ".neuralmind").exists()
    code, out, _ = cli("memory", "add", "Ports", "-r", "8765 by default.", "--json")
    assert code == 0 and json.loads(out)["title"] == "Ports"  # writing registers the repo
    assert cli("memory", "list")[0] == 0


EVIL = "Use \x1b]0;owned\x07 WAL \x1b[31mred\x1b[0m \u202eevil"  # a title, escapes and all
SHOWN = "Use \\x1b]0;owned\\x07 WAL \\x1b[31mred\\x1b[0m \\u202eevil"  # as the terminal shows it


def test_control_characters_are_shown_not_sent_to_the_terminal(cli, nm):
    """An ANSI or OSC escape, BEL or a bidi override in what the server sends (a title, a tag,
    an answer) or in a message echoing what was typed is shown as its escape by every printer,
    tables or not; prose keeps its line breaks."""
    needs(nm, "/v1/projects/{project_id}/ask")
    assert cli("project", "build")[0] == 0
    add = ("memory", "add", EVIL, "-r", "WAL \x1b[2J mode", "--file", "../app.py",
           "--tag", "t\x1b[1mx")
    mid = json.loads(cli(*add, "--json")[1])["id"]
    said = {"twin": cli(*add)[1:]}  # the first is its possible duplicate
    for name, *args in (("list", "memory", "list"), ("show", "memory", "show", mid),
                        ("stats", "memory", "stats"), ("tags", "memory", "tags", mid, "--add", "y"),
                        ("consolidate", "memory", "consolidate", "--dry-run"),
                        ("impact", "project", "impact", "app.py"),
                        ("query", "project", "query", "WAL mode"),
                        ("ask", "ask", "WAL mode"), ("whole", "ask", "WAL mode", "--no-stream"),
                        ("typed", "memory", "list", "--project", "/no\x1b[31mpe"),
                        ("echoed", "memory", "show", "no\x1b[31mpe")):
        said[name] = cli(*args)[1:]
    for name, printed in said.items():
        assert not set("\x1b\x07\u202e") & set("".join(printed)), (name, printed)
    assert f"possible duplicates:\n  {mid}  {SHOWN}" in said["twin"][0]
    assert "tag: t\\x1b[1mx 2" in said["stats"][0]
    assert said["tags"][0] == f"{mid}: t\\x1b[1mx, y\n"
    assert f"would merge 2 decision records: {SHOWN}; {SHOWN}" in said["consolidate"][0]
    assert f"decision {mid}: {SHOWN}" in said["impact"][0]
    assert f"## Related\nDecisions on these files\n- {SHOWN} [" in said["query"][0]
    for streamed in ("ask", "whole"):
        answer, sources = said[streamed][0].split("\n\n", 1)
        assert SHOWN in answer and "WAL \\x1b[2J mode" in answer, streamed
        assert f"memory:{mid}  {SHOWN}" in sources, streamed
    assert "--project /no\\x1b[31mpe: no such directory" in said["typed"][1]
    assert "no memory with id no\\x1b[31mpe [memory_not_found" in said["echoed"][1]  # the server's


def test_tables_keep_joiners_escape_bidi_overrides_and_align_wide_characters():
    """Persian needs the zero-width non-joiner and emoji sequences the joiner: shown, not
    escaped; a bidi override (text that reads other than it is) stays escaped; a Chinese
    title takes two columns a character, so the next column starts where the others do."""
    from neuralmind.commands.common import table
    rows = [{"title": "می\u200cخواهم", "id": "a"}, {"title": "数据库连接池", "id": "b"},
            {"title": "x\u202egnp.exe", "id": "c"}, {"title": "plain", "id": "d"}]
    lines = table(rows, ("title", "id")).splitlines()
    assert "می\u200cخواهم" in lines[1] and "x\\u202egnp.exe" in lines[3]
    from neuralmind.commands.common import shown_width
    assert len({shown_width(line[:-1]) for line in lines[1:]}) == 1  # ids in one column
    cut = table([{"t": "数" * 40}], ("t",), width=9).splitlines()[1]
    assert cut == "数" * 4 + "…"  # 8 columns and the ellipsis


def test_a_terminal_that_is_not_utf8_gets_escapes_and_an_export_file_utf8(daemon, tmp_path):
    """Under a locale that is not UTF-8 (an ASCII or cp1252 console), a Chinese title ended
    `memory list` in a traceback and `memory export -o FILE` in one with an empty file."""
    repo = git_repo(tmp_path / "intl", {"x.py": "x = 1\n"})
    added = daemon.run("memory", "add", "使用数据库连接池", "-r", "Müller approved", cwd=repo)
    assert added.returncode == 0, added.stderr
    ascii_env = {**daemon.env, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
                 "PYTHONIOENCODING": "ascii"}
    shown = subprocess.run([sys.executable, "-m", "neuralmind.cli", "memory", "list"],
                           cwd=repo, env=ascii_env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "\\u4f7f\\u7528" in shown.stdout, shown.stderr
    out = tmp_path / "export.md"
    done = subprocess.run([sys.executable, "-m", "neuralmind.cli", "memory", "export", "--format",
                           "md", "-o", str(out)], cwd=repo, env=ascii_env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "使用数据库连接池" in out.read_text(encoding="utf-8") and "Müller" in out.read_text(
        encoding="utf-8")


def test_api_error_exits_1_with_code_and_request_id(cli):
    code, out, err = cli("project", "show", "--project", "p_000000000000")
    assert code == 1 and out == ""
    assert "project_not_found" in err and "request " in err and "Traceback" not in err


def test_a_project_without_an_index_says_how_to_build_it(cli):
    assert cli("project", "add")[0] == 0
    code, out, err = cli("project", "search", "main")
    assert (code, out) == (1, "")
    assert "has no index yet: build it first" in err and "`neuralmind project build`" in err
    assert "[index_not_built, status 409" in err


def test_usage_error_exits_2(cli):
    code, _, err = cli("memory", "feedback", "x")
    assert code == 2 and "--helpful" in err
    code, out, err = cli("memory", "list", "--url", "notaurl")
    assert (code, out) == (2, "")
    assert err == ("neuralmind: notaurl (given) is not a server URL such as "
                   "http://127.0.0.1:8765: it needs http:// or https:// and a host\n")


def test_an_id_that_names_a_route_is_no_record(cli):
    assert cli("project", "add")[0] == 0
    for verb in ("show", "delete", "history"):
        code, out, err = cli("memory", verb, "stats")
        assert (code, out) == (1, ""), verb
        assert err == ("neuralmind: no memory with id stats ('stats' names a route, never a "
                       "record) [memory_not_found, status 404]\n")


def test_review_by_clears_kind_takes_any_case_and_a_merge_lists_its_originals(cli, nm):
    needs(nm, "/v1/projects/{project_id}/memories")
    code, out, _ = cli("memory", "add", "Ports", "-r", "8765 by default.", "--kind", "FACT",
                       "--review-by", "2999-01-01", "--json")
    made = json.loads(out)
    assert code == 0 and (made["kind"], made["review_by"]) == ("fact", "2999-01-01")
    code, out, _ = cli("memory", "edit", made["id"], "--review-by", "", "--json")
    assert code == 0 and json.loads(out)["review_by"] is None
    from neuralmind.commands.memories import _changes
    assert _changes({"merged_from": ["a1", "b2"]}) == "merged_from: a1,b2"
    assert _changes({"status": ["ACTIVE", "MERGED"]}) == "status: ACTIVE → MERGED"


def test_memory_commands(cli, nm):
    needs(nm, "/v1/projects/{project_id}/memories")
    code, out, _ = cli("memory", "add", "Use WAL", "-r", "readers never block", "--file",
                       str(cli.repo / "app.py"), "--tag", "db", "--json")
    assert code == 0
    mem = json.loads(out)
    mid = mem["id"]
    assert mem["files_affected"] == ["app.py"]
    code, out, _ = cli("memory", "show", mid)
    assert code == 0 and "readers never block" in out
    code, out, _ = cli("memory", "list")
    assert code == 0 and mid in out and "TITLE" in out.splitlines()[0]
    code, out, _ = cli("memory", "search", "wal", "--mode", "keyword", "--json")
    assert [r["id"] for r in json.loads(out)] == [mid]
    # nothing found: the table says (none), the server's notice says why, on stderr
    code, out, err = cli("memory", "search", "zzqx nothing like it", "--mode", "keyword")
    assert (code, out.strip()) == (0, "(none)")
    assert err.startswith("note: nothing relevant found") and err.count("\n") == 1, err
    code, out, err = cli("memory", "search", "zzqx nothing like it", "--json")
    assert (code, json.loads(out), err) == (0, [], "")
    code, out, _ = cli("memory", "edit", mid, "--rationale", "readers and writers coexist",
                       "--if-match", mem["updated_at"])
    assert code == 0 and "coexist" in out
    code, _, err = cli("memory", "edit", mid, "--confidence", "0.5", "--if-match", mem["updated_at"])
    assert code == 1 and "412" in err
    assert cli("memory", "invalidate", mid, "--reason", "moved to postgres")[0] == 0
    code, out, _ = cli("memory", "list", "--status", "INVALIDATED", "--json")
    assert [m["id"] for m in json.loads(out)] == [mid]
    assert cli("memory", "restore", mid)[0] == 0
    code, out, _ = cli("memory", "feedback", mid, "--helpful")
    assert code == 0 and "confidence" in out
    code, out, _ = cli("memory", "history", mid, "--json")
    assert [e["kind"] for e in json.loads(out)] == ["created", "amended", "invalidated",
                                                    "restored", "feedback"]
    export = cli.repo / "export.jsonl"
    assert cli("memory", "export", "-o", str(export))[0] == 0
    assert json.loads(export.read_text().splitlines()[0])["memory"]["id"] == mid
    code, out, _ = cli("memory", "delete", mid)
    assert code == 0 and "deleted" in out
    code, _, err = cli("memory", "show", mid)
    assert code == 1 and "memory_not_found" in err
    code, out, _ = cli("memory", "import", str(export), "--json")
    assert code == 0 and json.loads(out)["created"] == 1
    assert cli("memory", "show", mid)[0] == 0


def test_cli_as_a_subprocess(daemon, tmp_path):
    repo = git_repo(tmp_path / "sub", {"x.py": "x = 1\n"})
    proc = daemon.run("project", "add", "--json", cwd=repo)
    assert proc.returncode == 0 and json.loads(proc.stdout)["path"] == str(repo)
    status = daemon.run("daemon", "status", "--json")
    assert json.loads(status.stdout)["url"] == daemon.url and "token" not in status.stdout


def test_an_argument_that_is_not_utf8_is_one_line(capsys):
    """A Latin-1 file name from the shell (``café.py`` in a Latin-1 folder) reaches Python as
    a lone surrogate: one line naming it, not a traceback or the server's 400."""
    name = os.fsdecode(b"caf\xe9.py")
    for argv in (["project", "neighbors", name], ["memory", "add", name, "--rationale", "r"]):
        assert main(argv) == 2
        assert capsys.readouterr().err == (
            "neuralmind: the argument 'caf\ufffd.py' is not UTF-8: names and text reach the "
            "server as UTF-8 (rename the file, or give the text in UTF-8)\n")


def test_a_command_of_a_plugin_not_enabled_says_which_plugin_to_enable(monkeypatch, capsys):
    monkeypatch.setenv("NEURALMIND_PLUGINS", "auth,memory")
    assert main(["webhook", "list"]) == 2
    err = capsys.readouterr().err
    assert "`neuralmind webhook` comes with the webhooks plugin" in err
    assert '"webhooks" to [kernel] plugins' in err and "NEURALMIND_PLUGINS" in err
    with pytest.raises(SystemExit) as unknown:  # a word no plugin knows stays argparse's
        main(["nosuch"])
    assert unknown.value.code == 2 and "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_commands_of_the_plugins_the_daemon_serves_or_the_commands_config_enables(
        monkeypatch, capsys, tmp_path):
    from kernel.daemon import write_discovery
    monkeypatch.setenv("NEURALMIND_PLUGINS", "auth,memory")
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    # a daemon started with another config serves webhooks: its discovery file says so …
    write_discovery(tmp_path / "home", {"url": "http://127.0.0.1:9", "host": "127.0.0.1",
                                        "port": 9, "plugins": ["webhooks"], "pid": os.getpid()})
    with pytest.raises(SystemExit) as shown:
        main(["webhook", "--help"])
    assert shown.value.code == 0 and "deliveries" in capsys.readouterr().out
    # … while it runs: a file a dead daemon left says nothing
    write_discovery(tmp_path / "home", {"url": "http://127.0.0.1:9", "host": "127.0.0.1",
                                        "port": 9, "plugins": ["webhooks"], "pid": dead_pid()})
    assert main(["webhook", "list"]) == 2
    assert "comes with the webhooks plugin" in capsys.readouterr().err
    # a command's own --config decides too (the variable is left out, as it usually is)
    monkeypatch.delenv("NEURALMIND_PLUGINS")
    monkeypatch.delenv("NEURALMIND_HOME")  # it would come before the config's home
    (tmp_path / "t2.toml").write_text(f'[kernel]\nplugins = ["auth", "tier2_bridge"]\n'
                                      f'home = "{tmp_path / "t2home"}"\n')
    assert main(["audit", "verify", "--config", str(tmp_path / "t2.toml")]) == 1
    assert f"no audit trail at {tmp_path / 't2home' / 'audit.db'}" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text("[kernel\n")  # its problem is said, not the plugin's
    assert main(["audit", "verify", "--config", str(tmp_path / "bad.toml")]) == 2
    assert capsys.readouterr().err.startswith(f"neuralmind: config {tmp_path / 'bad.toml'} is not "
                                              "valid TOML")
    # … and so does $NEURALMIND_CONFIG's, a file gone since it was set (a home moved)
    monkeypatch.setenv("NEURALMIND_CONFIG", str(tmp_path / "moved.toml"))
    assert main(["audit", "verify"]) == 2
    assert capsys.readouterr().err == (f"neuralmind: cannot read config {tmp_path / 'moved.toml'}: "
                                       "No such file or directory\n")


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_memory_model_v2_commands(cli, nm):
    needs(nm, "/v1/projects/{project_id}/memories/stats")
    code, out, _ = cli("memory", "add", "Use password_encryption = md5", "-r", "MD5 hashes.",
                       "--file", "app.py", "--kind", "fact", "--json")
    old = json.loads(out)["id"]
    code, out, _ = cli("memory", "add", "Use password_encryption = scram-sha-256", "-r",
                       "The default.", "--file", "app.py", "--kind", "fact")
    assert code == 0 and "contradicts:" in out and old in out
    code, out, _ = cli("memory", "contradictions", "--json")
    [found] = json.loads(out)
    code, out, _ = cli("memory", "contradictions", "resolve", found["id"], "--strategy",
                       "keep_newest")
    assert code == 0 and f"superseded {old}" in out
    code, out, _ = cli("memory", "graph", old)
    assert code == 0 and "supersedes" in out and "SUPERSEDED" in out
    code, out, _ = cli("memory", "link", old, found["b"], "--type", "relates_to")
    assert code == 0 and "relates_to" in out
    assert cli("memory", "link", old, found["b"], "--remove")[0] == 0
    code, out, _ = cli("memory", "history", old)
    assert code == 0 and f"link: source: {old}, target: {found['b']}" in out and "{'" not in out
    code, out, _ = cli("memory", "tags", found["b"], "--add", "db")
    assert code == 0 and out.strip().endswith("db")
    code, out, _ = cli("memory", "tags")
    assert code == 0 and "db" in out and "COUNT" in out
    code, out, _ = cli("memory", "stats")
    assert code == 0 and "kind: fact 2" in out
    nm.project(cli.repo).memories.add("Unsigned", "No author.", author="")  # as HTTP may send
    code, out, _ = cli("memory", "stats")
    assert code == 0 and "author: (none) 1" in out  # was `author:  1`
    code, out, _ = cli("memory", "decay", "policy", "--half-life", "fact=30")
    assert code == 0 and "fact: 30.000" in out
    code, out, _ = cli("memory", "decay", "--dry-run")
    assert code == 0 and "nothing below the threshold" in out
    code, out, _ = cli("memory", "consolidate", "--dry-run", "--kind", "fact")
    assert code == 0 and "no near-duplicates" in out
    # wrong input: every message says what is wrong
    for args, words in [(("memory", "add", "t", "-r", "r", "--kind", "memo"), "invalid choice"),
                        (("memory", "graph", old, "--depth", "9"), "not a depth from 1 to 4"),
                        (("memory", "link", old, found["b"]), "give --type"),
                        (("memory", "contradictions", "resolve", found["id"]), "--strategy"),
                        (("memory", "contradictions", "check"), "needs a memory id"),
                        (("memory", "decay", "policy", "--half-life", "fact"), "KIND=DAYS"),
                        (("memory", "tags", "--add", "x"), "need a memory id")]:
        code, _, err = cli(*args)
        assert code == 2 and words in err, (args, err)
    code, _, err = cli("memory", "add", "t", "-r", "r", "--supersedes", "nope")
    assert code == 1 and "supersedes[0]: no memory with id nope" in err
    code, _, err = cli("memory", "contradictions", "resolve", found["id"], "--strategy",
                       "keep_both")
    assert code == 1 and "already resolved" in err
