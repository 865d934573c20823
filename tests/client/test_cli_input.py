"""Wrong input to the client commands' shared flags is one line saying what is wrong, before
any request: an empty value never falls back to the default (`project remove --project ""`
removed the project around here), and a token no header carries is named."""

from __future__ import annotations

import pytest

from tests.support import run_cli


@pytest.mark.parametrize("argv, flag", [
    (["project", "remove", "--project", ""], "--project/-p"),
    (["project", "add", ""], "path"),
    (["up", ""], "path"),
    (["memory", "list", "--url", ""], "--url"),
    (["memory", "list", "--token", " "], "--token"),
    (["daemon", "start", "--host", ""], "--host"),
])
def test_an_empty_value_is_refused_not_taken_for_the_default(argv, flag, tmp_path):
    code, out, err = run_cli(*argv, env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].endswith(f"argument {flag}: cannot be empty")
    assert not (tmp_path / "home").exists()  # nothing started, nothing made


@pytest.mark.parametrize("argv, said", [
    (["daemon", "start", "--port", "70000"], "argument --port: 70000 is outside 0–65535"),
    # `up` started a daemon that exited 2, the reason only in daemon.log
    (["up", "--port", "99999"], "argument --port: 99999 is outside 0–65535"),
    (["serve", "--workers", "0"], "argument --workers: 0 is outside 1–64"),
])
def test_a_port_or_a_worker_count_out_of_range_is_named(argv, said, tmp_path):
    code, out, err = run_cli(*argv, env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (2, "") and err.splitlines()[-1].endswith(said)
    assert not (tmp_path / "home").exists()  # nothing started


def test_a_token_no_header_carries_is_one_line(tmp_path):
    code, out, err = run_cli("memory", "list", "--url", "http://127.0.0.1:9", "--token", "a b",
                             env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (2, "")
    assert err == ("neuralmind: the token holds characters no HTTP header carries (it is "
                   "printable ASCII, without spaces): check --token, NEURALMIND_API_TOKEN or the "
                   "home's token file\n")


@pytest.mark.parametrize("argv, said", [
    (["--bogus"], "neuralmind: error: unrecognized arguments: --bogus"),
    (["memory", "--bogus"], "neuralmind memory: error: unrecognized arguments: --bogus"),
    # an argument too many is named under its command's usage, not the whole CLI's
    (["project", "show", "p_x"], "neuralmind project show: error: unrecognized arguments: p_x"),
    (["memory", "list", "x\x1b[2J"], "neuralmind memory list: error: unrecognized arguments: "
                                       "x\\x1b[2J"),
    (["memory"], "neuralmind memory: error: give a command: add, show, list"),
    ([], "neuralmind: error: give a command: serve, daemon, openapi"),
])
def test_an_unknown_option_is_named_and_a_missing_command_listed(argv, said, tmp_path):
    """`neuralmind --bogus` said "the following arguments are required: command"."""
    code, out, err = run_cli(*argv, env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (2, "") and err.splitlines()[-1].startswith(said)
    assert err.splitlines()[0].startswith(f"usage: {said.split(':')[0]} ")


@pytest.mark.parametrize("argv, given", [
    (["daemon", "stop", "--foreground"], "--foreground"),
    (["daemon", "status", "--port", "0"], "--port"),
    (["daemon", "stop", "--host", "127.0.0.1", "--port", "9"], "--host"),
])
def test_a_start_flag_given_to_stop_or_status_is_refused(argv, given, tmp_path):
    """They were accepted and did nothing (the check memory's decay and contradictions use)."""
    code, out, err = run_cli(*argv, env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out) == (2, "") and err == (
        f"neuralmind: {given} is for `daemon start`, not `{argv[1]}`\n")


@pytest.mark.parametrize("argv", [["daemon", "start"], ["daemon", "start", "--json"],
                                  ["daemon", "start", "--foreground"], ["up"]])
def test_a_port_the_running_daemon_does_not_listen_on_is_refused(daemon, argv, tmp_path):
    """Exit 1 — the command line is right, the daemon already running stands in the way — and
    nothing done (`up` registers nothing): exit 0 let a script take the port as served."""
    other = daemon.port + 1
    extra = [str(tmp_path)] if argv == ["up"] else []
    done = daemon.run(*argv, *extra, "--port", str(other))
    assert (done.returncode, done.stdout, done.stderr) == (1, "", (
        f"neuralmind: the daemon already runs at {daemon.url}: --port {other} was not used — "
        "stop it first (`neuralmind daemon stop`) to move it to another port\n"))
    assert str(tmp_path) not in daemon.run("project", "list").stdout


@pytest.mark.parametrize("port", ["same", "0"])
def test_a_port_the_running_daemon_listens_on_is_met(daemon, port):
    """Its own port, or 0 (one the OS picks), asks for nothing the daemon does not do."""
    done = daemon.run("daemon", "start", "--port", str(daemon.port) if port == "same" else port)
    assert done.returncode == 0 and done.stdout.startswith(f"daemon already running at "
                                                           f"{daemon.url}"), done


@pytest.mark.parametrize("argv, command, plugin", [
    (["ask", "why?"], "ask", "ask"),
    (["webhook", "list"], "webhook", "webhooks"),
    # a word inside a group another plugin (or the CLI itself) makes: "invalid choice"
    (["project", "impact", "app.py"], "project impact", "index"),
    (["eval", "code", "--dataset", "."], "eval code", "index"),
])
def test_a_command_of_a_plugin_not_enabled_names_the_plugin_at_any_depth(argv, command, plugin,
                                                                        tmp_path):
    code, out, err = run_cli(*argv, env={"NEURALMIND_HOME": str(tmp_path / "home"),
                                         "NEURALMIND_PLUGINS": "auth,memory"})
    assert (code, out) == (2, "")
    assert err == (f"neuralmind: `neuralmind {command}` comes with the {plugin} plugin, which "
                   "neither this configuration nor the running daemon enables: add "
                   f"\"{plugin}\" to [kernel] plugins in the config (or to NEURALMIND_PLUGINS)\n")


def test_a_word_no_plugin_knows_inside_a_group_stays_argparses(tmp_path):
    code, out, err = run_cli("project", "bogus", env={"NEURALMIND_HOME": str(tmp_path / "home"),
                                                      "NEURALMIND_PLUGINS": "auth,memory"})
    assert (code, out) == (2, "") and "invalid choice: 'bogus'" in err


def test_the_project_groups_help_says_where_every_command_is_listed(tmp_path):
    """`neuralmind --help` listed 9 of the project group's 18 commands as if they were all."""
    env = {"NEURALMIND_HOME": str(tmp_path / "home")}
    code, out, _ = run_cli("--help", env=env)
    assert code == 0 and "projects and their code index: add, build, search, query, " \
        "impact … (`neuralmind project -h` lists every command)" in " ".join(out.split())
    code, out, _ = run_cli("project", "-h", env=env)
    assert code == 0 and all(f"    {name} " in out for name in (
        "add", "list", "build", "search", "impact", "next", "activity", "remove-document",
        "validate"))
