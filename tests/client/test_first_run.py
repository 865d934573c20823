"""The CLI as a new user meets it, wrong input included (issue 13 items 11, 12, 14, 16): each
message says what is wrong and what to do; nothing is registered that nobody named; a build
left running is a job one can follow or stop. In this process against ``served``, except what
is about a real daemon or a terminal's Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.client.conftest import git_repo
from tests.support import ROOT, run_cli


@pytest.fixture
def cli(served, monkeypatch, tmp_path):
    """``neuralmind ARGS`` in this process, pointed at ``served``, from a folder that is not
    a repository."""
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    env = {"NEURALMIND_API_URL": served.url, "NEURALMIND_API_TOKEN": served.token}

    def run(*args: str) -> tuple[int, str, str]:
        return run_cli(*args, env=env)

    run.plain = plain
    run.repo = git_repo(tmp_path / "repo", {"app.py": "def main():\n    return 1\n"})
    return run


# -- item 11: errors say what is wrong ---------------------------------------------------------

def test_a_422_names_each_field_and_what_is_wrong_with_it(cli):
    code, _, err = cli("memory", "add", "T", "-r", "why", "--confidence", "2",
                       "--project", str(cli.repo))  # a range the CLI knows: named before
    assert code == 2 and "argument --confidence: '2' is not a number from 0 to 1" in err
    for args, says in ((("project", "search", "x", "-n", "0"), "argument -n: 0 is outside 1–50"),
                       (("project", "query", "x", "--budget", "0"),
                        "argument --budget: 0 is outside 256–200000")):
        code, _, err = cli(*args, "--project", str(cli.repo))
        assert code == 2 and says in err, args
    code, _, err = cli("memory", "add", "T", "-r", "why", "--review-by", "tomorrow",
                       "--project", str(cli.repo))
    said, registered = err.splitlines()  # the refused write's folder stays a project: said
    assert code == 1 and said.startswith("neuralmind: review_by: ")
    assert registered.startswith(f"neuralmind: {cli.repo} was registered as project ")


@pytest.mark.parametrize(("args", "says"), [
    (("memory", "list", "--limit", "0"), "--limit: 0 is less than 1"),
    (("memory", "list", "--limit", "-3"), "--limit: -3 is less than 1"),
    (("memory", "list", "--limit", "x"), "--limit: 'x' is not a whole number"),
    (("memory", "list", "--limit", "9" * 20), f"--limit: {'9' * 20} is too large"),
    (("memory", "show", ""), "argument id: cannot be empty"),
    (("memory", "edit", "m1"), "nothing to change: give --rationale"),
    (("memory", "tags", "m1", "--add", "x", "--remove", "x"), "name the same tag: x"),
    (("memory", "export", "--format", "md", "--json"), "--format md writes Markdown"),
    (("memory", "list", "--author", ""), "argument --author: cannot be empty"),
    (("memory", "edit", "m1", "--if-match", "garbage", "-r", "y"),
     "argument --if-match: 'garbage' is not an updated_at time"),
    (("job", "show", " "), "argument id: ' ' is not a job id (16 hex digits"),
    (("job", "cancel", "../x"), "argument id: '../x' is not a job id (16 hex digits, as "
                                "`build --no-wait` prints it)"),
    (("eval", "impact", ".", "--limit", "0"), "--limit: 0 is outside 1–1000"),
    (("eval", "next", ".", "-k", "0"), "-k/--k: 0 is outside 1–50"),
    (("eval", "next", ".", "--max-files", "1"),
     "--max-files: Input should be greater than or equal to 2 (got 1)"),
    (("eval", "next", ".", "--half-life-days", "-3"),
     "--half-life-days: Input should be greater than 0 (got -3)"),
    (("eval", "code", "--dataset", ".", "--embed-chars", "-5"),
     "--embed-chars: Input should be greater than or equal to 64 (got -5)"),
])
def test_a_value_out_of_range_is_refused_before_any_work(args, says):
    """Values the command uses itself (a count it slices, a setting an eval overrides) are
    checked as the server or the config would check them: a -3 once crashed `memory list`
    and a 0 listed everything; an eval ran on with a negative cut or half-life."""
    code, out, err = run_cli(*args)
    assert code == 2 and says in err and "Traceback" not in err and out == "", (args, err)


@pytest.mark.parametrize(("args", "says"), [
    (("memory", "decay", "run", "--half-life", "episode=3"),
     "--half-life is for `memory decay policy`, not `run`"),
    (("memory", "decay", "policy", "--dry-run"),
     "--dry-run is for `memory decay run`, not `policy`"),
    (("memory", "contradictions", "list", "--threshold", "0.7"),
     "--threshold is for `memory contradictions config`, not `list`"),
    (("memory", "contradictions", "config", "--status", "all"),
     "--status is for `memory contradictions list`, not `config`"),
    (("memory", "contradictions", "list", "nope"), "memory contradictions list takes no id (nope)"),
])
def test_an_option_of_another_action_is_refused(args, says):
    """`decay run --half-life …` once swept with the old policy, the option silently dropped."""
    code, out, err = run_cli(*args)
    assert code == 2 and err.strip() == f"neuralmind: {says}" and out == "", (args, err)


def test_a_field_named_query_and_a_file_that_is_not_there(cli):
    assert cli("project", "add", str(cli.repo))[0] == 0
    for blank, why in (("", "String should have at least 1 character"),
                       ("   ", "is blank: it holds only whitespace")):
        code, _, err = cli("project", "search", blank, "--project", str(cli.repo))
        assert code == 1 and err.startswith(f"neuralmind: query: {why} (the request did not "
                                            "validate)"), err
    code, _, err = cli("memory", "import", str(cli.plain / "missing.jsonl"), "--project",
                       str(cli.repo))
    assert code == 2 and "Traceback" not in err
    assert err.strip() == f"neuralmind: {cli.plain / 'missing.jsonl'}: No such file or directory"


def test_a_directory_that_does_not_exist_is_named(cli):
    for path in ("/does/not/exist", "./missing", "~/no-such-folder-here"):
        code, out, err = cli("project", "show", "--project", path)
        assert code == 2 and out == ""
        assert f"--project {path}: no such directory" in err and "404" not in err
    code, out, err = cli("project", "add", "/does/not/exist")  # before any request
    assert (code, out) == (2, "") and err.strip() == (
        "neuralmind: /does/not/exist: no such directory (give the repository to register)")
    code, _, err = cli("project", "add", __file__)
    assert code == 2 and f"{__file__}: not a directory" in err
    code, out, err = cli("up", "/does/not/exist")  # before any daemon is asked or started
    assert (code, out) == (2, "") and err.strip() == (
        "neuralmind: /does/not/exist: no such directory (give the repository to index)")
    code, out, err = cli("up", __file__)
    assert (code, out) == (2, "") and f"{__file__}: not a directory" in err
    code, out, err = cli("project", "show", "--project", __file__)
    assert (code, out) == (2, "") and f"--project {__file__}: not a directory" in err
    code, out, err = cli("project", "show", "--project", "MyRepo")  # no id has capitals
    assert (code, out) == (2, "") and "Traceback" not in err
    assert "--project MyRepo: no such directory, nor a project id" in err


def test_no_daemon_names_the_file_it_looked_for_once_with_one_hint(tmp_path):
    code, out, err = run_cli("memory", "list", "--project", "p_000000000000",
                             env={"NEURALMIND_HOME": str(tmp_path / "nohome")})
    assert code == 1 and out == ""
    assert "None" not in err
    assert err.count("daemon.json") == 1 and str(tmp_path / "nohome" / "daemon.json") in err
    assert err.count("neuralmind daemon start") == 1


# -- item 12: nothing is registered that nobody named ------------------------------------------

def test_outside_a_repository_a_command_asks_for_a_project(cli, served):
    before = served.get("/v1/projects?limit=200").json["items"]
    code, out, err = cli("memory", "list")
    assert code == 2 and out == ""
    assert str(cli.plain) in err and "--project" in err
    assert served.get("/v1/projects?limit=200").json["items"] == before
    assert not (cli.plain / ".neuralmind").exists()
    # named to a command that reads, the folder is still no project: adding it makes it one,
    # and later commands there find it
    code, _, err = cli("memory", "list", "--project", ".")
    assert code == 2 and err == ("neuralmind: . is not a registered project: `neuralmind project "
                                 "add .` registers it (`neuralmind project list` shows those that "
                                 "are)\n")
    assert cli("project", "add", ".")[0] == 0
    assert cli("memory", "list")[0] == 0


# -- item 14: a build left running is a job to follow or stop ----------------------------------

def test_build_no_wait_succeeds_and_jobs_are_shown_waited_for_and_cancelled(cli):
    code, out, err = cli("project", "build", "--no-wait", "--project", str(cli.repo))
    assert code == 0, err
    job_id = out.split("build job ", 1)[1].split()[0]
    assert f"neuralmind job wait {job_id}" in out and f"neuralmind job cancel {job_id}" in out
    code, out, _ = cli("job", "wait", job_id)
    assert code == 0 and "indexed 1 file," in out
    code, out, _ = cli("job", "show", job_id, "--json")
    assert code == 0 and json.loads(out)["status"] == "done"
    code, out, _ = cli("job", "show", job_id)
    assert code == 0 and "status" in out and "done" in out and "{'" not in out
    code, _, err = cli("job", "cancel", job_id)
    assert code == 1 and "job_finished" in err
    code, _, err = cli("job", "show", "feedfacefeedface")
    assert code == 1 and "job_not_found" in err


def test_ctrl_c_during_a_build_prints_one_line_and_the_build_goes_on(served, tmp_path):
    from tests.client.conftest import client_of
    files = {f"pkg/m{i:03d}.py": f'def f{i}(x):\n    """Step {i} of {i * 7} things."""\n'
                                  f"    return x + {i}\n" for i in range(2000)}
    repo = git_repo(tmp_path / "big", files)
    env = {**os.environ, "NEURALMIND_API_URL": served.url, "NEURALMIND_API_TOKEN": served.token,
           "PYTHONPATH": str(ROOT)}
    # Ctrl-C as a terminal delivers it: a test run started in the background by a
    # non-interactive shell ignores SIGINT, and its children would inherit that
    proc = subprocess.Popen([sys.executable, "-m", "neuralmind.cli", "project", "build"],
                            cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = proc.stderr.readline()  # the progress bar's first line: the job is running
    assert "files" in first or "scanning" in first, first
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    job_id = err.split("build job ", 1)[1].split()[0]
    assert f"neuralmind job wait {job_id}" in err and f"neuralmind job cancel {job_id}" in err
    # the job outlives the command (2,000 files: the server here shares this process's GIL,
    # and a small build could end before the command's first poll was answered)
    client = client_of(served)
    assert not client.jobs.get(job_id).finished
    client.jobs.cancel(job_id)
    assert client.jobs.wait(job_id, timeout=300).status == "cancelled"


# -- item 16: what a new user reads ------------------------------------------------------------

def test_help_names_only_commands_that_exist():
    code, out, _ = run_cli("--help")
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("project "))
    verbs = line.split(":", 1)[1].split("…")[0].replace(",", " ").split()  # then where all are
    assert "ask" not in verbs
    for verb in verbs:
        assert run_cli("project", verb, "--help")[0] == 0, verb


def test_tables_read_as_text_not_python(cli):
    code, out, _ = cli("memory", "add", "Use WAL", "-r", "readers", "--tag", "db", "--json",
                       "--project", str(cli.repo))
    mid = json.loads(out)["id"]
    assert cli("memory", "invalidate", mid, "--reason", "moved", "--project", str(cli.repo))[0] == 0
    assert cli("memory", "edit", mid, "--tags", "db", "sqlite", "--project", str(cli.repo))[0] == 0
    code, out, _ = cli("memory", "history", mid, "--project", str(cli.repo))
    assert code == 0 and "{" not in out and "[" not in out
    assert "status: ACTIVE → INVALIDATED" in out and "tags: db → db,sqlite" in out
    # a long text's change is shown where it differs, both sides inside the table's cell
    long = "Hooks, the watcher and agents write concurrently; WAL lets readers proceed."
    assert cli("memory", "edit", mid, "--rationale", long, "--project", str(cli.repo))[0] == 0
    assert cli("memory", "edit", mid, "--rationale", long + " (edited)",
               "--project", str(cli.repo))[0] == 0
    code, out, _ = cli("memory", "history", mid, "--project", str(cli.repo))
    assert "rationale: …proceed. → …proceed. (edited)" in out


def test_the_docs_page_answers_with_a_trailing_slash_too(served):
    for path in ("/v1/docs", "/v1/docs/"):
        r = served.get(path, auth=False)
        assert r.status == 200 and b"swagger-ui-bundle.js" in r.body, path


def test_a_write_the_server_refuses_says_the_folder_it_registered_stays_one(cli, served,
                                                                           tmp_path):
    """`memory add ""`, an import of the wrong shape (a few lines, or so many problems the
    command shortens them), a document that is no text, a date mistyped: each exited 1 and
    left the folder it had registered for the write a project, without a word. It stays one
    (another client may have put something into it meanwhile; unregistering it cancelled that
    client's build), and the command says so and how to let it go."""
    projects: dict[str, str] = {}

    def registered() -> dict[str, str]:
        return {p["path"]: p["id"] for p in served.get("/v1/projects?limit=200").json["items"]}

    (tmp_path / "shape.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "many.jsonl").write_text('{"a": 1}\n' * 8)
    (tmp_path / "garbage.txt").write_bytes(b"\xff\xfe not text")
    writes = {"add": ("memory", "add", "", "-r", "why"),
              "import": ("memory", "import", str(tmp_path / "shape.jsonl")),
              "many": ("memory", "import", str(tmp_path / "many.jsonl")),
              "ingest": ("project", "ingest", str(tmp_path / "garbage.txt")),
              "date": ("memory", "add", "T", "-r", "why", "--review-by", "31.12.2027")}
    for name, args in writes.items():
        folder = tmp_path / name
        folder.mkdir()
        code, out, err = cli(*args, "--project", str(folder))
        assert (code, out) == (1, "") and "Traceback" not in err, (name, err)
        projects = registered()
        pid = projects[os.path.realpath(folder)]
        assert err.endswith(f"neuralmind: {os.path.realpath(folder)} was registered as project "
                            f"{pid} for this and stays one: `neuralmind project remove -p {pid}` "
                            "lets it go\n"), (name, err)
    # a folder that was a project before is not said to be registered by the refused write
    kept = os.path.realpath(tmp_path / "add")
    code, _, err = cli("memory", "add", "", "-r", "why", "--project", kept)
    assert code == 1 and "was registered" not in err
    assert cli("project", "remove", "-p", projects[kept])[0] == 0
    assert kept not in registered()


def test_a_subfolder_of_a_registered_folder_is_in_its_project(cli, monkeypatch):
    """Outside a repository the nearest registered folder around is the project, as the
    repository around would be: `cd src` said "not a registered project" and advised
    registering src as a project of its own."""
    assert cli("project", "add", ".")[0] == 0
    (cli.plain / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(cli.plain / "src" / "deep")
    code, out, err = cli("project", "show", "--json")
    assert code == 0 and json.loads(out)["path"] == str(cli.plain), err
    assert cli("memory", "add", "T", "-r", "why")[0] == 0  # into that project, none new
    code, out, _ = cli("memory", "list", "--json", "--project", str(cli.plain))
    assert code == 0 and [m["title"] for m in json.loads(out)] == ["T"]


@pytest.mark.parametrize("where", ["/proc", "/etc", "/"])
def test_a_reserved_folder_is_never_advised_to_be_registered(cli, monkeypatch, where):
    """`project add /proc` answers 403 path_not_allowed: the advice to run it is left out."""
    if where == "/":  # the folder the command runs in, in no repository
        monkeypatch.chdir(where)
        code, out, err = cli("memory", "list")
        said = "/ is not inside a git repository, nor a registered project"
    else:
        code, out, err = cli("memory", "list", "--project", where)
        said = f"{where} is not a registered project"
    assert (code, out) == (2, "")
    assert err == (f"neuralmind: {said}, and cannot be one ({where} is a reserved system or "
                   "credentials path): pass --project ID (`neuralmind project list` lists the "
                   "ids)\n")


def test_on_a_server_that_registers_none_a_folder_is_named_by_its_id(tmp_path, monkeypatch):
    """Server mode: `project add` answers 403 registration_disabled, and a reader sees no
    paths — the folder of project `api` was "not a registered project: `neuralmind project
    add …` registers it"."""
    from tests.plugins.auth.helpers import create_token
    from tests.support import LocalServer
    (tmp_path / "api").mkdir()
    config = ('[kernel]\nplugins = ["auth"]\n[server]\nallow_remote = true\nhost = "127.0.0.1"\n'
              f'[[projects]]\nid = "api"\npath = "{tmp_path / "api"}"\n')
    server = LocalServer(tmp_path / "home", config=config, plugins=["auth"])
    tokens = {role: create_token(server.home, server.config, f"{role}-user", role)["token"]
              for role in ("reader", "admin")}
    monkeypatch.chdir(tmp_path / "api")
    with server:
        def show(role: str, *args: str) -> tuple[int, str, str]:
            return run_cli("project", "show", "--json", "--url", server.url, "--token",
                           tokens[role], *args)
        code, out, _ = show("admin")  # a token that sees paths finds the folder's project
        assert code == 0 and json.loads(out)["id"] == "api"
        advice = (", and this server registers none (its projects come from its config; a "
                  "token that sees no paths finds none by its folder): pass --project ID "
                  "(`neuralmind project list` lists the ids)\n")
        assert show("reader") == (2, "", f"neuralmind: {tmp_path / 'api'} is not inside a git "
                                         f"repository, nor a registered project{advice}")
        assert show("reader", "--project", str(tmp_path)) == (
            2, "", f"neuralmind: {tmp_path} is not a registered project{advice}")
        code, out, _ = show("reader", "--project", "api")
        assert code == 0 and json.loads(out)["id"] == "api"


def test_up_with_a_server_url_names_no_daemon_and_no_token_file(cli, served):
    """`up --url` called a team server "the daemon" and pointed to this home's token file."""
    code, out, err = cli("up", str(cli.repo))
    assert code == 0, err
    assert out.startswith(f"using the server at {served.url}\n") and "daemon" not in out
    assert "token:" not in out and f"URL:   {served.url}/v1" in out
    code, out, err = cli("up", str(cli.repo), "--json")
    assert code == 0 and json.loads(out)["token_file"] is None, err
