"""``neuralmind agent install|uninstall``: each agent's file merged without losing the user's
other servers, a backup of the original, uninstall removing exactly what install added, and
clear messages for wrong input. Files only: launching the written command against a daemon
is in test_transports.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

from plugins.mcp import agents
from tests.support import pythonpath

OTHER = {"command": "other-server", "args": ["--stdio"]}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    for key in agents.PASSED_ON:
        monkeypatch.delenv(key, raising=False)
    (tmp_path / "home").mkdir()
    project = tmp_path / "repo"
    project.mkdir()
    return project


def _install(agent, project, pinned=False):
    return agents.apply(agents.install(agent, project, pinned))


def _uninstall(agent, project, pinned=False):
    return agents.apply(agents.uninstall(agent, project, pinned))


def test_claude_code_merges_the_server_and_the_session_start_hook(home):
    mcp_json = home / ".mcp.json"
    mcp_json.write_text('{"mcpServers": {"other": %s}}\n' % json.dumps(OTHER, indent=None))
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    original_settings = {"permissions": {"allow": ["Bash(ls)"]},
                         "hooks": {"SessionStart": [{"hooks": [{"type": "command",
                                                                 "command": "echo hi"}]}]}}
    settings.write_text(json.dumps(original_settings, indent=3))  # the user's own layout
    lines = _install("claude-code", home)
    assert lines[0].endswith("added the neuralmind server (the original is kept in "
                             ".mcp.json.neuralmind-backup)")
    servers = json.loads(mcp_json.read_text())["mcpServers"]
    assert servers["other"] == OTHER
    assert servers["neuralmind"]["args"][-1] == "mcp"
    hooks = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert hooks[0]["hooks"][0]["command"] == "echo hi"
    assert hooks[1]["hooks"][0]["command"].endswith("agent wakeup")
    assert json.loads((home / ".mcp.json.neuralmind-backup").read_text()) == {
        "mcpServers": {"other": OTHER}}
    # idempotent: a second install changes nothing and keeps one hook
    assert all("already there" in line for line in _install("claude-code", home))
    assert len(json.loads(settings.read_text())["hooks"]["SessionStart"]) == 2

    written = mcp_json.read_text(), settings.read_text()
    lines = _uninstall("claude-code", home)
    assert all(line.endswith("backup: the file is as it was)") for line in lines), lines
    assert (mcp_json.read_text(), settings.read_text()) == (
        '{"mcpServers": {"other": %s}}\n' % json.dumps(OTHER),
        json.dumps(original_settings, indent=3))  # byte for byte, not just the same JSON
    assert written != (mcp_json.read_text(), settings.read_text())
    assert sorted(p.name for p in home.rglob("*")) == [".claude", ".mcp.json", "settings.json"]
    assert all("to remove" in line for line in _uninstall("claude-code", home))


def test_files_install_created_are_removed_with_their_folder(home):
    _install("cursor", home)
    entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["neuralmind"]
    assert entry["args"][-3:] == ["mcp", "--project", "${workspaceFolder}"]
    _uninstall("cursor", home)
    assert list(home.iterdir()) == []


def test_codex_keeps_the_users_toml_as_written(home, monkeypatch):
    monkeypatch.setenv("NEURALMIND_HOME", "/srv/nm home")
    config = home.parent / "home" / ".codex" / "config.toml"
    config.parent.mkdir()
    original = 'model = "o4"  # my model\n\n[mcp_servers.other]\ncommand = "other-server"\n'
    config.write_text(original)
    _install("codex", home, pinned=True)
    parsed = tomllib.loads(config.read_text())
    assert parsed["model"] == "o4" and parsed["mcp_servers"]["other"]["command"] == "other-server"
    ours = parsed["mcp_servers"]["neuralmind"]
    assert ours["args"][-3:] == ["mcp", "--project", str(home)]
    assert ours["env"] == {"NEURALMIND_HOME": "/srv/nm home"}
    assert config.read_text().startswith(original)
    _uninstall("codex", home)
    assert config.read_text() == original
    assert not config.with_name("config.toml.neuralmind-backup").exists()


def test_what_install_cannot_merge_is_refused_untouched(home):
    mcp_json = home / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"neuralmind": {"command": "node",
                                                                  "args": ["old.js"]}}}))
    with pytest.raises(agents.AgentError, match="already has a server named 'neuralmind'"):
        agents.install("claude-code", home, False)
    mcp_json.write_text("{ not json")
    with pytest.raises(agents.AgentError, match=r"\.mcp\.json is not valid JSON"):
        agents.install("claude-code", home, False)
    assert mcp_json.read_text() == "{ not json" and not list(home.glob("*backup"))


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """A ``neuralmind`` on PATH, so install's command is ``neuralmind`` whatever the machine."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "neuralmind").write_text("#!/bin/sh\n")
    (folder / "neuralmind").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_an_entry_installed_before_the_mark_is_upgraded_and_removed(home, monkeypatch, on_path):
    """Installs before 2026-12-02 wrote no mark: an entry exactly as install writes it today,
    bar the mark, is ours — install marks it (it refused it), uninstall removes it (it removed
    the hook and left the server)."""
    monkeypatch.setenv("NEURALMIND_HOME", "/srv/nm")
    for agent, path, args in (("claude-code", home / ".mcp.json", []),
                              ("cursor", home / ".cursor" / "mcp.json",
                               ["--project", "${workspaceFolder}"])):
        old = {"command": "neuralmind", "args": ["mcp", *args],
               "env": {"NEURALMIND_HOME": "/srv/nm"}}
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"mcpServers": {"other": OTHER, "neuralmind": old}}))
        assert _install(agent, home)[0].endswith("added the neuralmind server (the original is "
                                                 "kept in mcp.json.neuralmind-backup)"
                                                 .replace("mcp.json", path.name))
        servers = json.loads(path.read_text())["mcpServers"]
        assert servers == {"other": OTHER, "neuralmind": {**old, "env": {
            "NEURALMIND_HOME": "/srv/nm", agents.MARK: agent}}}
        assert _uninstall(agent, home)[0].endswith("removed the neuralmind server")
        assert json.loads(path.read_text()) == {"mcpServers": {"other": OTHER}}

    # alone in its file, an unmarked entry may be the user's after all: the upgrade keeps the
    # original, and uninstall leaves the file (it deleted it, no copy kept)
    alone = {"mcpServers": {"neuralmind": {"command": "neuralmind", "args": ["mcp"],
                                           "env": {"NEURALMIND_HOME": "/srv/nm"}}}}
    fresh = home.parent / "alone"
    fresh.mkdir()
    (fresh / ".mcp.json").write_text(json.dumps(alone))
    assert _install("claude-code", fresh)[0].endswith("(the original is kept in "
                                                      ".mcp.json.neuralmind-backup)")
    _uninstall("claude-code", fresh)
    assert (fresh / ".mcp.json").exists()
    assert json.loads((fresh / ".mcp.json.neuralmind-backup").read_text()) == alone

    # an install of the release before, never upgraded, uninstalled: server and hook both go
    project = home.parent / "installed-before"
    (project / ".claude").mkdir(parents=True)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"neuralmind": {
        "command": "neuralmind", "args": ["mcp"], "env": {"NEURALMIND_HOME": "/srv/nm"}}}}))
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": agents.hook_command()}]}]}}))
    lines = _uninstall("claude-code", project)
    assert [line.split(": ", 1)[1] for line in lines] == [
        "removed the neuralmind server", "removed the neuralmind SessionStart hook"]
    assert list(project.iterdir()) == []


def test_an_entry_the_user_wrote_is_refused_and_never_removed(home, monkeypatch, on_path):
    """A ``neuralmind`` server the user wrote, even one running ``neuralmind mcp``, is not
    ours: install refuses it (as Codex's does) rather than rewrite it, and uninstall leaves it
    as it is, with no backup beside it — also when it is install's own entry but for its
    ``env`` (here the NEURALMIND_HOME install would write) or one key more."""
    monkeypatch.setenv("NEURALMIND_HOME", "/srv/nm")
    plain = {"mcpServers": {"neuralmind": {"command": "neuralmind", "args": ["mcp"]}}}
    keyed = {"mcpServers": {"neuralmind": {**agents.server_entry(), "type": "stdio"}}}
    for agent, path, theirs in (("claude-code", home / ".mcp.json", plain),
                                ("cursor", home / ".cursor" / "mcp.json", plain),
                                ("claude-code", home / ".mcp.json", keyed)):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(theirs))
        with pytest.raises(agents.AgentError, match=r"already has a server named 'neuralmind' "
                           r"that `neuralmind agent install` did not write"):
            agents.install(agent, home, False)
        said = _uninstall(agent, home)
        assert said[0].endswith("the neuralmind server there is not one `neuralmind agent "
                                "install` wrote: left as it is")
        assert all("no neuralmind" in line for line in said[1:])
        assert json.loads(path.read_text()) == theirs
    assert not list(home.rglob("*backup"))
    # ours is known by its mark whatever the shell's settings were when it was written
    (home / ".mcp.json").unlink()
    _install("claude-code", home)
    monkeypatch.delenv("NEURALMIND_HOME")
    assert _install("claude-code", home)[0].endswith("added the neuralmind server")
    _uninstall("claude-code", home)
    assert not (home / ".mcp.json").exists()


def _cli(*args, cwd, home_dir):
    env = {**os.environ, "HOME": str(home_dir), "PYTHONPATH": pythonpath()}
    env.pop("CODEX_HOME", None)
    return subprocess.run([sys.executable, "-m", "neuralmind.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_install_and_uninstall_say_what_they_wrote_as_json(home):
    home_dir = home.parent / "home"
    done = _cli("agent", "install", "cursor", "--json", cwd=home, home_dir=home_dir)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    path = str(home / ".cursor" / "mcp.json")
    assert (out["agent"], out["action"], out["project"]) == ("cursor", "install", str(home))
    assert out["files"] == [{"path": path, "changed": True, "said": "added the neuralmind server"}]
    gone = json.loads(_cli("agent", "uninstall", "cursor", "--json", cwd=home,
                           home_dir=home_dir).stdout)
    assert gone["files"] == [{"path": path, "changed": True,
                              "said": "removed the neuralmind server"}]
    both = _cli("agent", "install", "cursor", "--json", "--print", cwd=home, home_dir=home_dir)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_the_cli_says_what_is_wrong(home):
    home_dir = home.parent / "home"
    wrong = _cli("agent", "install", "claude", cwd=home, home_dir=home_dir)
    assert wrong.returncode == 2
    assert "invalid choice: 'claude' (choose from 'claude-code', 'cursor', 'codex')" in wrong.stderr
    missing = _cli("agent", "install", "cursor", "--project", str(home / "nope"), cwd=home,
                   home_dir=home_dir)
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"neuralmind: --project {home / 'nope'}: no such directory"
    (home / "notes.txt").write_text("a file\n")
    a_file = _cli("agent", "install", "cursor", "--project", str(home / "notes.txt"), cwd=home,
                  home_dir=home_dir)
    assert a_file.returncode == 2
    assert a_file.stderr.strip() == f"neuralmind: --project {home / 'notes.txt'}: not a directory"
    shown = _cli("agent", "install", "codex", "--print", cwd=home, home_dir=home_dir)
    assert shown.returncode == 0 and "[mcp_servers.neuralmind]" in shown.stdout
    assert not (home_dir / ".codex").exists()
    gone = _cli("agent", "uninstall", "cursor", "--print", cwd=home, home_dir=home_dir)
    assert gone.returncode == 0 and "mcpServers" not in gone.stdout  # not install's block
    assert gone.stdout.strip() == f"# {home / '.cursor' / 'mcp.json'}: unchanged"
    _install("cursor", home)
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "other": OTHER, **json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]}}))
    after = _cli("agent", "uninstall", "cursor", "--print", cwd=home, home_dir=home_dir)
    assert after.stdout.startswith(f"# {home / '.cursor' / 'mcp.json'} without neuralmind's")
    assert '"other"' in after.stdout and '"neuralmind"' not in after.stdout
    assert '"neuralmind"' in (home / ".cursor" / "mcp.json").read_text()  # printed, not written
    _uninstall("cursor", home)
    twice = _cli("agent", "uninstall", "cursor", cwd=home, home_dir=home_dir)
    assert twice.returncode == 0
    assert twice.stdout.strip() == f"{home / '.cursor' / 'mcp.json'}: no neuralmind server to remove"


def test_agent_wakeup_prints_the_overview_or_its_json(tmp_path):
    from tests.plugins.index.conftest import build
    from tests.plugins.mcp.conftest import repo_with_code
    from tests.support import LocalServer, run_cli
    with LocalServer(tmp_path / "home", plugins=["auth", "index", "mcp"]) as server:
        pid = server.register(repo_with_code(tmp_path / "repo"))
        env = {"NEURALMIND_API_URL": server.url, "NEURALMIND_API_TOKEN": server.token}
        code, out, _ = run_cli("agent", "wakeup", "--project", pid, env=env)
        assert code == 0 and "no code index yet" in out
        build(server, pid)
        code, out, _ = run_cli("agent", "wakeup", "--project", pid, env=env)
        assert code == 0 and "wal.py" in out
        code, out, _ = run_cli("agent", "wakeup", "--project", pid, "--json", env=env)
        assert code == 0 and "wal.py" in json.loads(out)["context"]
        # the overview quotes the repository (its README): an escape there is shown as text
        (server.home.parent / "repo" / "README.md").write_text("# Demo\x1b]0;owned\x07\n")
        build(server, pid)
        code, out, _ = run_cli("agent", "wakeup", "--project", pid, env=env)
        assert code == 0 and "(Demo\\x1b]0;owned\\x07)" in out and "\x1b" not in out, out
        assert "\n## Layout\n" in out  # its lines kept
        code, _, err = run_cli("agent", "wakeup", "--project", "/nonexistent", env=env)
        assert code == 2 and err == ("neuralmind: --project /nonexistent: not a directory here, "
                                     "and no project has that id (`neuralmind project list`)\n")


def test_a_relative_home_or_config_is_written_absolute(home, monkeypatch):
    """`NEURALMIND_CONFIG=../team.toml neuralmind agent install codex` wrote `../team.toml`
    into the agent's global config: the agent starts `neuralmind mcp` in whatever folder it
    works in, where that names another file, or none."""
    monkeypatch.chdir(home)
    monkeypatch.setenv("NEURALMIND_CONFIG", "../team.toml")
    monkeypatch.setenv("NEURALMIND_HOME", "~/nm")
    config = home.parent / "home" / ".codex" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    _install("codex", home, pinned=True)
    ours = tomllib.loads(config.read_text())["mcp_servers"]["neuralmind"]
    assert ours["env"] == {"NEURALMIND_CONFIG": str(home.parent / "team.toml"),
                           "NEURALMIND_HOME": os.path.expanduser("~/nm")}
    _uninstall("codex", home)
