"""``neuralmind agent install|uninstall|wakeup`` given files, settings and tokens it cannot
use: one line on stderr naming the file (or the setting) and what is wrong, exit 2 for what
the user can fix (1 for what the system refused), no traceback, and every file as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugins.mcp import agents
from tests.support import pythonpath, run_cli


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A home and a repository of the test's own; no agent setting of the shell."""
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "repo").mkdir()
    monkeypatch.delenv("CODEX_HOME", raising=False)
    for key in agents.PASSED_ON:
        monkeypatch.delenv(key, raising=False)
    return {"HOME": str(home)}


def _snapshot(*roots: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``roots``, with the bytes of each file."""
    return {str(p): (p.read_bytes() if p.is_file() else None)
            for root in roots for p in [root, *root.rglob("*")] if p.exists()}


def _refused(argv, env, *, code=2, says):
    """``neuralmind ARGV`` fails with ``code`` and the one line ``neuralmind: SAYS``."""
    got, out, err = run_cli(*argv, env=env)
    assert (got, out) == (code, ""), (got, out, err)
    assert err == f"neuralmind: {says}\n", err
    return err


def test_a_file_that_is_not_utf8_is_named_for_install_and_uninstall(tmp_path, env):
    repo = tmp_path / "repo"
    mcp_json = repo / ".cursor" / "mcp.json"
    mcp_json.parent.mkdir()
    mcp_json.write_bytes(b'\xff\xfe{"mcpServers": {}}')
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_bytes(b'model = "caf\xe9"\n')
    before = _snapshot(tmp_path)
    for action in ("install", "uninstall"):
        _refused(["agent", action, "cursor", "--project", str(repo)], env,
                 says=f"{mcp_json} is not UTF-8 text (byte 0 is 0xff); save it as UTF-8, then "
                      "try again; nothing was changed")
        _refused(["agent", action, "codex", "--project", str(repo)], env,
                 says=f"{config} is not UTF-8 text (byte 12 is 0xe9); save it as UTF-8, then "
                      "try again; nothing was changed")
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("text, says", [
    ("mcp_servers = 5\n", "mcp_servers is a number, not a table"),
    ('mcp_servers = "x"\n', "mcp_servers is a string, not a table"),
    ("[[mcp_servers]]\ncommand = 'x'\n", "mcp_servers is an array, not a table"),
])
def test_a_codex_servers_key_that_is_no_table_is_named(tmp_path, env, text, says):
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(text)
    _refused(["agent", "install", "codex"], env, says=f"{config}: {says}; nothing was changed")
    assert config.read_text() == text and sorted(config.parent.iterdir()) == [config]


def test_an_inline_servers_table_is_refused_in_words(tmp_path, env):
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('mcp_servers = { other = { command = "x" } }\n')
    _, _, err = run_cli("agent", "install", "codex", env=env)
    assert err.startswith(f"neuralmind: {config}: [mcp_servers.neuralmind] cannot be added "
                          "after what the file holds") and err.count("\n") == 1, err
    assert "not valid TOML" not in err and "inline mcp_servers" in err
    assert config.read_text() == 'mcp_servers = { other = { command = "x" } }\n'


@pytest.mark.parametrize("doc, file, says", [
    ([1, 2], ".cursor/mcp.json", "does not hold a JSON object (its top level is an array)"),
    ("text", ".cursor/mcp.json", "does not hold a JSON object (its top level is a string)"),
    ({"mcpServers": 5}, ".cursor/mcp.json", ": mcpServers is a number, not an object"),
    ({"mcpServers": None}, ".mcp.json", ": mcpServers is null, not an object"),
    ({"hooks": []}, ".claude/settings.json", ": hooks is an array, not an object"),
    ({"hooks": {"SessionStart": {}}}, ".claude/settings.json",
     ": hooks.SessionStart is an object, not an array"),
])
def test_a_json_file_of_the_wrong_shape_is_named(tmp_path, env, doc, file, says):
    repo = tmp_path / "repo"
    path = repo / file
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(doc))
    before = _snapshot(repo)
    agent = "cursor" if file.startswith(".cursor") else "claude-code"
    _refused(["agent", "install", agent, "--project", str(repo)], env,
             says=f"{path}{'' if says.startswith(':') else ' '}{says}; nothing was changed")
    assert _snapshot(repo) == before  # .mcp.json untouched when the settings are refused


def test_odd_values_inside_a_table_are_not_ours_and_not_a_crash(tmp_path, env):
    """A hook group whose ``hooks`` is a number, a server whose ``args`` is one: someone
    else's, kept as they are."""
    repo = tmp_path / "repo"
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": 5}]}}))
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"x": {"args": 5}}}))
    code, out, err = run_cli("agent", "install", "claude-code", "--project", str(repo), env=env)
    assert code == 0, err
    assert json.loads(settings.read_text())["hooks"]["SessionStart"][0] == {"hooks": 5}
    code, out, err = run_cli("agent", "uninstall", "claude-code", "--project", str(repo), env=env)
    assert code == 0, err
    assert json.loads(settings.read_text()) == {"hooks": {"SessionStart": [{"hooks": 5}]}}
    assert json.loads((repo / ".mcp.json").read_text()) == {"mcpServers": {"x": {"args": 5}}}


def test_a_folder_where_a_file_belongs_and_a_file_where_a_folder_does(tmp_path, env):
    repo = tmp_path / "repo"
    (repo / ".cursor" / "mcp.json").mkdir(parents=True)
    before = _snapshot(tmp_path)
    for action in ("install", "uninstall"):
        _refused(["agent", action, "cursor", "--project", str(repo)], env,
                 says=f"{repo / '.cursor' / 'mcp.json'} is a folder, not a file; nothing was "
                      "changed")
    assert _snapshot(tmp_path) == before
    (repo / ".cursor" / "mcp.json").rmdir()
    (repo / ".cursor").rmdir()
    (repo / ".cursor").write_text("not a folder\n")
    _refused(["agent", "install", "cursor", "--project", str(repo)], env,
             says=f"{repo / '.cursor'} is a file, not a folder, so {repo / '.cursor' / 'mcp.json'}"
                  " cannot be written; nothing was changed")
    codex_home = tmp_path / "codex-home"
    codex_home.write_text("a file\n")
    _refused(["agent", "install", "codex"], {**env, "CODEX_HOME": str(codex_home)},
             says=f"CODEX_HOME {codex_home} is a file, not a folder; nothing was changed")
    _refused(["agent", "install", "codex", "--print"], {**env, "CODEX_HOME": str(codex_home)},
             says=f"CODEX_HOME {codex_home} is a file, not a folder; nothing was changed")
    assert codex_home.read_text() == "a file\n"
    assert (repo / ".cursor").read_text() == "not a folder\n"
    assert not (tmp_path / "home" / ".codex").exists()


def _refused_where_it_may_not_write(agent: str, repo: Path, home: Path, said: str) -> None:
    """`agent install AGENT` by a process the files' modes deny writing: this user when it is
    not root, else root without the capabilities that let it write anywhere (never another
    user: the checkout may be a folder only its owner can read). Exit 1, ``said``."""
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": pythonpath()}
    for key in ("CODEX_HOME", *agents.PASSED_ON):
        env.pop(key, None)
    bare = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"] \
        if os.geteuid() == 0 else []
    done = subprocess.run([*bare, sys.executable, "-m", "neuralmind.cli", "agent", "install",
                           agent, "--project", str(repo)], cwd=repo.parent, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    assert done.stderr == f"neuralmind: {said}; nothing was changed\n"


def test_a_folder_it_may_not_write_is_said_in_words_and_nothing_is_left(tmp_path):
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    os.chmod(repo, 0o555)  # nothing can be made in the repository
    try:
        _refused_where_it_may_not_write("cursor", repo, home, "cannot create the folder "
                                        f"{repo / '.cursor'}: permission denied")
        assert list(repo.iterdir()) == []
    finally:
        os.chmod(repo, 0o755)


def test_a_refused_second_file_puts_the_first_back(tmp_path):
    """claude-code writes two files: when the second is refused, the first (written, and
    backed up) is put back byte for byte and its backup goes."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    original = b'{"mcpServers": {"other": {"command": "x"}}}'
    (repo / ".mcp.json").write_bytes(original)
    (repo / ".claude").mkdir()
    os.chmod(repo / ".claude", 0o555)
    try:
        _refused_where_it_may_not_write("claude-code", repo, home, "cannot write "
                                        f"{repo / '.claude' / 'settings.json'}: permission denied")
        assert (repo / ".mcp.json").read_bytes() == original
        assert sorted(p.name for p in repo.iterdir()) == [".claude", ".mcp.json"]
        assert list((repo / ".claude").iterdir()) == []
    finally:
        os.chmod(repo / ".claude", 0o755)


def test_wakeup_with_a_refused_token_says_401(tmp_path, monkeypatch):
    from tests.support import LocalServer
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    with LocalServer(tmp_path / "home", plugins=["auth", "index", "mcp"]) as server:
        env = {"NEURALMIND_API_URL": server.url, "NEURALMIND_API_TOKEN": server.token}
        pid = server.register(repo)
        for extra in ((), ("--project", pid), ("--project", str(repo))):
            code, out, err = run_cli("agent", "wakeup", "--token", "wrong", *extra, env=env)
            assert (code, out) == (1, ""), err
            assert err.startswith("neuralmind: invalid token; the token sent was the one "
                                  "given"), err
            assert "[unauthorized, status 401" in err
            assert "tool calls" not in err and err.count("\n") == 1
        code, out, err = run_cli("agent", "wakeup", env=env)  # the right token still works
        assert code == 0 and "no code index yet" in out, err


def test_a_file_after_a_utf8_bom_is_read_and_put_back_as_it_was(tmp_path, env):
    """An editor on Windows starts a file with a byte-order mark, which JSON and TOML let go:
    install once said `not valid JSON (Unexpected UTF-8 BOM …)`. It merges into the file now,
    and uninstall gives back its very bytes, the mark with them."""
    repo = tmp_path / "repo"
    original = b'\xef\xbb\xbf{"mcpServers": {"other": {"command": "x"}}}\r\n'
    (repo / ".mcp.json").write_bytes(original)
    codex = tmp_path / "home" / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_bytes(b'\xef\xbb\xbfmodel = "o3"\n')
    for agent in ("claude-code", "codex"):
        code, out, err = run_cli("agent", "install", agent, "--project", str(repo), env=env)
        assert code == 0 and "added the neuralmind server" in out, err
    merged = json.loads((repo / ".mcp.json").read_text())
    assert set(merged["mcpServers"]) == {"other", "neuralmind"}
    assert merged["mcpServers"]["other"] == {"command": "x"}
    toml = codex.read_text()
    assert toml.startswith('model = "o3"\n') and "[mcp_servers.neuralmind]" in toml
    code, out, err = run_cli("agent", "uninstall", "claude-code", "--project", str(repo), env=env)
    assert code == 0, err
    assert f"{repo / '.mcp.json'}: removed the neuralmind server (put back from " in out
    assert (repo / ".mcp.json").read_bytes() == original


@pytest.mark.parametrize("argv", [("mcp",), ("agent", "wakeup")])
def test_an_empty_project_is_refused_not_taken_for_the_current_folder(argv, tmp_path, env):
    code, out, err = run_cli(*argv, "-p", "", env=env)
    assert (code, out) == (2, "")
    assert err.endswith(f"neuralmind {' '.join(argv)}: error: argument --project/-p: cannot be "
                        "empty\n"), err


def test_mcp_has_no_json_flag_it_would_ignore(env):
    """Only MCP messages go to mcp's stdout: its --json ("print JSON for scripts") did
    nothing, and is no flag of it now; wakeup keeps its own."""
    code, out, err = run_cli("mcp", "--json", env=env)
    assert (code, out) == (2, "") and "unrecognized arguments: --json" in err, err
    code, out, _ = run_cli("mcp", "--help", env=env)
    assert code == 0 and "--json" not in out
    code, out, _ = run_cli("agent", "wakeup", "--help", env=env)
    assert code == 0 and "--json" in out


def test_wakeup_json_of_a_project_without_an_index_is_json(tmp_path, monkeypatch):
    """A script asking `agent wakeup --json` once got the plain sentence."""
    from tests.support import LocalServer
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    with LocalServer(tmp_path / "home", plugins=["auth", "index", "mcp"]) as server:
        pid = server.register(repo)
        env = {"NEURALMIND_API_URL": server.url, "NEURALMIND_API_TOKEN": server.token}
        code, out, err = run_cli("agent", "wakeup", "--json", env=env)
        assert code == 0, err
        assert json.loads(out) == {
            "project_id": pid, "built": False,
            "message": f"NeuralMind: project {pid} has no code index yet; `neuralmind up` "
                       "builds it (or call the build_index tool)."}
        code, text, _ = run_cli("agent", "wakeup", env=env)
        assert code == 0 and text == json.loads(out)["message"] + "\n"


def test_wakeup_finds_the_daemon_in_the_configs_home(tmp_path, monkeypatch):
    """With the home named only by the config's ``[kernel] home`` (no NEURALMIND_HOME),
    `agent wakeup` (and `mcp`, through the same client) once looked in ~/.neuralmind, found no
    daemon and started a second one there, which could not listen on the port the config's
    daemon held: `could not start the daemon: … Address already in use`."""
    from tests.client.test_discovery import held
    from tests.support import LocalServer
    repo, user = tmp_path / "repo", tmp_path / "user"
    repo.mkdir()
    monkeypatch.chdir(repo)
    monkeypatch.delenv("NEURALMIND_HOME")
    with LocalServer(tmp_path / "home", plugins=["auth", "index", "mcp"]) as server:
        config = tmp_path / "client.toml"
        config.write_text(f'[kernel]\nhome = "{server.home}"\n[server]\nport = {server.port}\n')
        with held(server.home, url=server.url, token=server.token):
            code, out, err = run_cli("agent", "wakeup",
                                     env={"NEURALMIND_CONFIG": str(config), "HOME": str(user)})
        assert code == 0, err
        [project] = server.get("/v1/projects").json["items"]
        assert project["path"] == str(repo)
    assert out.startswith(f"NeuralMind: project {project['id']} has no code index yet")
    assert not (user / ".neuralmind").exists()


def test_wakeup_with_a_readers_token_says_to_name_a_project_it_may_read(tmp_path, monkeypatch,
                                                                         caplog):
    """A reader may not register the repository it runs in: `agent wakeup` said only
    `cannot be the default project: alice may not projects.write`, not what to do. (Said
    through logging, on stderr: in this process pytest's handler takes it.)"""
    from tests.plugins.auth.helpers import create_token, server_config
    from tests.support import LocalServer
    here = tmp_path / "checkout"
    here.mkdir()
    monkeypatch.chdir(here)
    config = server_config(tmp_path, {"a": tmp_path / "a"})
    with LocalServer(tmp_path / "home", plugins=["auth", "index", "mcp"], config=config) as server:
        reader = create_token(server.home, server.config, "alice", "reader")["token"]
        code, out, err = run_cli("agent", "wakeup", env={"NEURALMIND_API_URL": server.url,
                                                         "NEURALMIND_API_TOKEN": reader})
        assert (code, out) == (1, "")
        assert caplog.messages[-1] == (
            f"{here} cannot be the default project: alice may not projects.write, which "
            "registering it takes; pass --project ID of a project this token may read "
            "(`neuralmind project list` lists them)")
        code, out, err = run_cli("agent", "wakeup", "--project", "a", "--json",
                                 env={"NEURALMIND_API_URL": server.url,
                                      "NEURALMIND_API_TOKEN": reader})
        assert code == 0 and json.loads(out)["project_id"] == "a", err
