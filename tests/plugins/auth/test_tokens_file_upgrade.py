"""A tokens file an older NeuralMind wrote, read by this one (docs/security.md, "The tokens
file"): older builds took an actor of only spaces or with a tab, and a project id with a tab,
which today's rule for names refuses. Such a record is set aside — its token refused (401)
like a revoked one, listed, marked and revocable, said at start-up in one line with the
command that removes it — while every other token serves; a fault of the file's structure
still refuses the whole file (tests/plugins/auth/test_stored_tokens.py)."""

from __future__ import annotations

import json
import re
import shlex
import time

import psycopg
import pytest

from plugins.auth.tokens import NEXT_VERSION, digest
from tests.plugins.auth.helpers import cli, create_token, server_config
from tests.support import LocalServer, Server, fresh_pg_dsn, home_dsn

SQLITE = pytest.mark.sqlite_only("the tokens file an older build wrote in the home")
ANN, BLANK, TABBED, SCOPED = ("nm_" + c * 40 for c in "abcd")
# what each token set aside is refused for, as the warning, the listing and --json say it
FAULTS = {BLANK: 'actor "   " is not a name of printable characters',
          TABBED: 'actor "ci\\tbot" is not a name of printable characters',
          SCOPED: 'projects ["a\\tb"] holds an id that is not a name of printable characters'}


def record(actor: str, role: str = "reader", projects: list[str] | str = "*") -> dict:
    return {"actor": actor, "role": role, "projects": projects,
            "created_at": "2026-11-02T10:00:00Z", "expires_at": None}


# as the 776a27b and 91463a6 CLI wrote them (`token create --actor "   "`, `--actor
# $'ci\tbot'`, `--projects $'a\tb'` with no [[projects]] configured): sorted by hash, indented
OLDER = dict(sorted({digest(ANN): record("ann", "admin"), digest(BLANK): record("   "),
                     digest(TABBED): record("ci\tbot"),
                     digest(SCOPED): record("dan", projects=["a\tb"])}.items()))


def short(token: str) -> str:
    return digest(token)[:8]


@pytest.fixture
def upgraded(tmp_path):
    """A home whose tokens.json an older build wrote, and a server-mode config for it."""
    home, config = tmp_path / "home", tmp_path / "server.toml"
    home.mkdir()
    (home / "tokens.json").write_text(json.dumps({"version": 1, "tokens": OLDER}, indent=2))
    config.write_text(server_config(tmp_path, {}))
    return home, config


def stored(home) -> dict:
    return json.loads((home / "tokens.json").read_text())["tokens"]


def said_set_aside(log: str, home, config) -> str:
    """The one line of a start-up naming every token set aside, checked against FAULTS."""
    [line] = [line for line in log.splitlines() if "set aside" in line]
    assert f"3 tokens of {home / 'tokens.json'} set aside, refused (401) like revoked ones" in line
    for token, fault in FAULTS.items():
        assert (f"{short(token)}: {fault} (remove it: `neuralmind token revoke --config {config} "
                f"{short(token)}`)") in line, line
    assert line.endswith(f"give their users new tokens with `neuralmind token create --config "
                         f"{config} --actor A --role R`"), line
    assert "\t" not in line
    return line


@SQLITE
def test_the_upgraded_server_serves_the_valid_tokens_and_names_those_set_aside(upgraded):
    home, config = upgraded
    with LocalServer(home, config=config.read_text()) as server:
        assert server.get("/v1/auth/whoami", token=ANN).json["actor"] == "ann"
        for token in FAULTS:  # a malformed entry grants nothing
            r = server.get("/v1/auth/whoami", token=token)
            assert (r.status, r.error["code"], r.error["message"]) == (401, "unauthorized",
                                                                       "invalid token")
        line = said_set_aside(server.output(), home, server.config)
        assert line.startswith("[WARNING] neuralmind.auth: ")
        assert "no tokens in" not in server.output()
        listed = server.get("/v1/auth/tokens", token=ANN).json["items"]  # what an admin sees
        assert {t["id"]: t["set_aside"] for t in listed} == {
            short(ANN): None, **{short(token): fault for token, fault in FAULTS.items()}}
        # the commands the line gives remove them, the server reads the change at once
        for command in re.findall(r"`(neuralmind token revoke [^`]+)`", line):
            done = cli(home, *shlex.split(command)[1:])
            assert re.fullmatch(r"revoked [0-9a-f]{8} \((   |ci\\tbot|dan), reader\)\n",
                                done.stdout), done.stdout
        assert stored(home) == {digest(ANN): OLDER[digest(ANN)]}
        items = server.get("/v1/auth/tokens", token=ANN).json["items"]
        assert [t["actor"] for t in items] == ["ann"]
        assert server.get("/v1/auth/whoami", token=ANN).status == 200
    assert not cli(home, "token", "list", config=config).stderr  # nothing set aside is left


@SQLITE
def test_serve_starts_over_it_and_its_workers_say_so_once(upgraded):
    """The report's `neuralmind serve --config …` exited 2 naming one entry per round."""
    home, config = upgraded
    with Server(home, config=config.read_text(), plugins=["auth"], workers=2) as server:
        pids, deadline = set(), time.monotonic() + 30
        while len(pids) < 2:  # each worker has answered: each has started
            assert time.monotonic() < deadline, pids
            pids.add(server.get("/v1/status", token=ANN).json["pid"])
        for token in FAULTS:
            assert server.get("/v1/auth/whoami", token=token).status == 401
        said_set_aside(server.output(), home, server.home / "config.toml")


@SQLITE
def test_token_commands_and_storage_check_take_the_file_and_keep_each_entry(upgraded):
    home, config = upgraded
    done = cli(home, "token", "list", config=config)
    assert said_set_aside(done.stderr, home, config).startswith("neuralmind: warning: ")
    rows = {row[:8]: row for row in done.stdout.splitlines()[1:]}
    assert rows.pop(short(ANN)).endswith("  never")
    assert {i: row.split("  never ", 1)[1] for i, row in rows.items()} == {
        short(token): f"(set aside: {fault})" for token, fault in FAULTS.items()}
    assert "\t" not in done.stdout and "ci\\tbot" in rows[short(TABBED)]  # shown escaped
    listed = json.loads(cli(home, "token", "list", "--json", config=config).stdout)
    assert {t["id"]: t["set_aside"] for t in listed} == {
        short(ANN): None, **{short(token): fault for token, fault in FAULTS.items()}}
    checked = cli(home, "storage", "check", config=config)
    assert "tokens.json" in checked.stdout and not checked.stderr
    # a create rewrites the file: every entry set aside stays exactly as the older build wrote it
    made = create_token(home, config, "eve", "reader")
    assert {h: r for h, r in stored(home).items() if h != digest(made["token"])} == OLDER
    done = cli(home, "token", "revoke", "--actor", "ci\tbot", config=config)
    assert done.stdout == f"revoked {short(TABBED)} (ci\\tbot, reader)\n"
    assert digest(TABBED) not in stored(home) and len(stored(home)) == 4


@SQLITE
def test_storage_migrate_copies_them_and_the_shared_table_sets_them_aside_too(upgraded, tmp_path):
    home, config = upgraded
    dsn = fresh_pg_dsn()
    shared = tmp_path / "shared.toml"
    shared.write_text(config.read_text() + f'[storage]\nbackend = "postgres"\ndsn = "{dsn}"\n')
    done = cli(home, "storage", "migrate", "--to", "postgres", "--dsn", dsn, "--json",
               config=config)
    assert json.loads(done.stdout)["verified"], done.stdout
    with LocalServer(tmp_path / "machine2", config=shared.read_text(), plugins=["auth"]) as server:
        assert server.get("/v1/auth/whoami", token=ANN).json["actor"] == "ann"
        for token in FAULTS:
            assert server.get("/v1/auth/whoami", token=token).status == 401
        [line] = [line for line in server.output().splitlines() if "set aside" in line]
        assert "3 tokens of the shared database (auth_tokens) set aside" in line
        assert server.delete(f"/v1/auth/tokens/{short(BLANK)}", token=ANN).status == 204
    listed = json.loads(cli(home, "token", "list", "--json", config=shared).stdout)
    assert {t["id"]: t["set_aside"] for t in listed} == {
        short(ANN): None, short(TABBED): FAULTS[TABBED], short(SCOPED): FAULTS[SCOPED]}


@pytest.mark.postgres_only("a row of the shared table an older build wrote")
def test_a_row_of_the_shared_table_with_an_older_builds_actor_is_set_aside(tmp_path):
    config = server_config(tmp_path, {"a": tmp_path / "repo-a"})
    with LocalServer(tmp_path / "home", config=config) as server:
        admin = create_token(server.home, server.config, "root", "admin")
        old = create_token(server.home, server.config, "rita", "reader")
        assert server.get("/v1/auth/whoami", token=old["token"]).status == 200
        with psycopg.connect(home_dsn(server.home), autocommit=True) as conn:
            conn.execute("UPDATE auth_tokens SET actor = %s WHERE digest LIKE %s",
                         ("ci\tbot", old["id"] + "%"))
            conn.execute(NEXT_VERSION)
        deadline = time.monotonic() + 2
        while server.get("/v1/auth/whoami", token=old["token"]).status != 401:
            assert time.monotonic() < deadline, "the token set aside still served after 2 s"
            time.sleep(0.05)
        assert server.get("/v1/auth/whoami", token=admin["token"]).json["actor"] == "root"
        items = server.get("/v1/auth/tokens", token=admin["token"]).json["items"]
        assert {t["id"]: (t["actor"], t["set_aside"]) for t in items} == {
            admin["id"]: ("root", None), old["id"]: ("ci\tbot", FAULTS[TABBED])}
        listed = json.loads(cli(server.home, "token", "list", "--json",
                                config=server.config).stdout)
        assert {t["id"]: t["set_aside"] for t in listed} == {admin["id"]: None,
                                                             old["id"]: FAULTS[TABBED]}
        assert server.delete(f"/v1/auth/tokens/{old['id']}", token=admin["token"]).status == 204
        assert [t["id"] for t in server.get("/v1/auth/tokens", token=admin["token"]).json[
            "items"]] == [admin["id"]]
