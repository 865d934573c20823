"""Server mode's tokens as they are stored — a tokens file edited by hand, rows of the shared
table, a ``tokens_file`` a file cannot be at — read with care: what is wrong is one line
naming the file (or table), the token and the fault; a server refuses every token until it is
fixed (401, never 500) and says why once, or does not start when the path cannot hold a file."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time

import psycopg
import pytest

from kernel.config import ConfigError
from plugins.auth.tokens import digest
from tests.plugins.auth.helpers import cli, create_token, server_config
from tests.support import LocalServer, free_port, home_dsn

SQLITE = pytest.mark.sqlite_only("a tokens file is where tokens live without a shared database")
TOKEN, OTHER = "nm_" + "a" * 40, "nm_" + "b" * 40
H, OTHER_H = digest(TOKEN), digest(OTHER)


def record(**changes) -> dict:
    return {"actor": "eve", "role": "admin", "projects": "*",
            "created_at": "2026-01-01T00:00:00Z", "expires_at": None, **changes}


def tokens_json(tokens: dict) -> str:
    return json.dumps({"version": 1, "tokens": tokens})


BAD_FILES = {
    "a list": ("[]", 'holds [], not {"version": 1, "tokens":'),
    "a newer version": ('{"version": 2, "tokens": {}}',
                        "is version 2: this NeuralMind reads version 1"),
    "tokens not an object": ('{"version": 1, "tokens": []}', '"tokens" is [], not an object'),
    "broken JSON": ("{bad", "is not valid JSON: Expecting property name"),
    "not UTF-8": (b"\xff\xfe\x00{", "is not valid JSON:"),
    "a key not a hash": (tokens_json({"abc": record()}), '"abc" is not a token\'s sha256'),
    "a record not an object": (tokens_json({H: 5}), f"token {H[:8]} is 5, not an object"),
    "fields missing": (tokens_json({H: {"actor": "x"}}),
                       f"token {H[:8]}: missing role, projects, created_at"),
    "a field unknown": (tokens_json({H: record(note=1)}), f'token {H[:8]}: unknown "note"'),
    "expiry not a date": (tokens_json({H: record(expires_at="notadate")}),
                          f'token {H[:8]}: expires_at "notadate" is not an ISO datetime'),
    "expiry a number": (tokens_json({H: record(expires_at=12345)}),
                        f"token {H[:8]}: expires_at 12345 is not an ISO datetime"),
    "expiry ending past 9999": (tokens_json({H: record(expires_at="9999-12-31")}),
                                f'token {H[:8]}: expires_at "9999-12-31" ends past the year 9999'),
    "creation not a date": (tokens_json({H: record(created_at="z")}),
                            f'token {H[:8]}: created_at "z" is not an ISO datetime'),
    "an actor not a string": (tokens_json({H: record(actor=5)}),
                              f"token {H[:8]}: actor 5 is not a string"),
    "a role with a tab": (tokens_json({H: record(role="ad\tmin")}),
                          f'token {H[:8]}: role "ad\\tmin" is not a name of printable'),
    "a project id not a string": (tokens_json({H: record(projects=["a", 5])}),
                                  f'token {H[:8]}: projects ["a", 5] is neither "*" nor a list'),
    # a name an older build wrote sets its record aside (test_tokens_file_upgrade.py), unless
    # the record is broken besides
    "an actor on two lines, a bad expiry": (
        tokens_json({H: record(actor="a\nb", expires_at="x")}),
        f'token {H[:8]}: expires_at "x" is not an ISO datetime'),
    "projects a string": (tokens_json({H: record(projects="a")}),
                          f'token {H[:8]}: projects "a" is neither "*" nor a list'),
}


@pytest.fixture
def team(tmp_path):
    """A server-mode config and the home whose tokens.json it uses."""
    config = tmp_path / "config.toml"
    config.write_text(server_config(tmp_path, {"a": tmp_path / "repo-a"}))
    return tmp_path / "home", config


@SQLITE
@pytest.mark.parametrize("case", BAD_FILES)
def test_a_tokens_file_that_is_not_valid_is_one_line_naming_it(team, case):
    home, config = team
    text, says = BAD_FILES[case]
    path = home / "tokens.json"
    home.mkdir()
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    before = path.read_bytes()
    for args in (("token", "list"), ("token", "create", "--actor", "x", "--role", "reader"),
                 ("token", "revoke", "--actor", "eve"), ("storage", "check")):
        done = cli(home, *args, config=config, check=False)
        assert (done.returncode, done.stdout) == (2, ""), (args, done)
        [line] = done.stderr.splitlines()
        assert line.startswith(f"neuralmind: tokens file {path}") and says in line, (args, line)
    assert path.read_bytes() == before  # nothing of it dropped by a rewrite


@SQLITE
def test_a_server_refuses_every_token_of_a_bad_file_and_says_why_once(team):
    home, config = team
    home.mkdir()
    (home / "tokens.json").write_text(tokens_json({H: record(), OTHER_H: record(
        actor="ola", expires_at="notadate")}))
    with LocalServer(home, config=config.read_text()) as server:
        for token in (TOKEN, OTHER, TOKEN):
            r = server.get("/v1/projects", token=token)
            assert (r.status, r.error["code"]) == (401, "unauthorized")
        log = server.output().splitlines()
        assert [line for line in log if "refusing every token" in line] == [
            f"[ERROR] neuralmind.auth: tokens file {home / 'tokens.json'}: token {OTHER_H[:8]}: "
            'expires_at "notadate" is not an ISO datetime (2026-12-31T00:00:00Z), a date or '
            'null; '
            "refusing every token until it is fixed"]
        assert not [line for line in log if "no tokens" in line]  # no word against it
        (home / "tokens.json").write_text(tokens_json({H: record()}))
        assert server.get("/v1/projects", token=TOKEN).status == 200  # fixed: read at once


@pytest.mark.postgres_only("hand-edited rows of the shared table")
def test_a_bad_row_of_the_shared_table_is_a_503_then_a_401_never_a_500(tmp_path):
    config = server_config(tmp_path, {"a": tmp_path / "repo-a"})
    with LocalServer(tmp_path / "home", config=config) as server:
        admin = create_token(server.home, server.config, "root", "admin")
        reader = create_token(server.home, server.config, "rita", "reader")
        for made in (admin, reader):  # the server holds this version of the table
            assert server.get("/v1/auth/whoami", token=made["token"]).status == 200
        with psycopg.connect(home_dsn(server.home), autocommit=True) as conn:
            conn.execute("UPDATE auth_tokens SET expires_at = 'notadate' WHERE digest LIKE %s",
                         (reader["id"] + "%",))
            says = (f"the shared database (auth_tokens): token {reader['id']}: expires_at "
                    '"notadate" is not an ISO datetime')
            r = server.get("/v1/auth/tokens", token=admin["token"])  # the version did not move
            assert (r.status, r.error["code"]) == (503, "unavailable")
            assert says in r.error["message"]
            done = cli(server.home, "token", "list", config=server.config, check=False)
            assert done.returncode == 2
            assert done.stderr.splitlines() == [f"neuralmind: {says} (2026-12-31T00:00:00Z), "
                                                "a date or null"]
            conn.execute("UPDATE auth_tokens_version SET version = version + 1")
        deadline = time.monotonic() + 2
        while server.get("/v1/auth/whoami", token=admin["token"]).status != 401:
            assert time.monotonic() < deadline, "the admin's token still served after 2 s"
            time.sleep(0.05)
        assert server.get("/v1/auth/whoami", token=reader["token"]).status == 401
        assert [line for line in server.output().splitlines() if says in line]


def serve(home, config) -> subprocess.CompletedProcess:
    """``neuralmind serve`` with two workers, as an operator starts it."""
    return subprocess.run([sys.executable, "-m", "neuralmind.cli", "serve", "--config",
                           str(config), "--port", str(free_port()), "--workers", "2"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NEURALMIND_HOME": str(home),
                               "NEURALMIND_PLUGINS": "auth"})


@SQLITE
def test_a_tokens_file_path_no_file_can_be_at_is_refused_in_one_line(team, tmp_path):
    home, config = team
    (tmp_path / "afile").write_text("")
    for path, says in ((tmp_path, f"tokens file {tmp_path} is a directory: [server] "
                                  "tokens_file names the file itself (e.g. tokens.json in it)"),
                       (tmp_path / "afile" / "tokens.json",
                        f"tokens file {tmp_path / 'afile' / 'tokens.json'} cannot be made: "
                        f"{tmp_path / 'afile'} is a file, not a directory")):
        text = config.read_text().replace("[server]", f'[server]\ntokens_file = "{path}"')
        config.write_text(text)
        done = serve(home, config)
        assert (done.returncode, done.stderr.splitlines()) == (2, [f"neuralmind: {says}"])
        # a worker's start-up says the same
        with pytest.raises(ConfigError, match="^" + re.escape(says)):
            LocalServer(home, config=text).start()
        done = cli(home, "token", "create", "--actor", "a", "--role", "reader", config=config,
                   check=False)
        assert (done.returncode, done.stderr.splitlines()) == (2, [f"neuralmind: {says}"])
        config.write_text(text.replace(f'tokens_file = "{path}"\n', ""))


def test_the_no_tokens_hint_is_a_command_that_works(team):
    home, config = team
    with LocalServer(home, config=config.read_text()) as server:
        hint = next(line for line in server.output().splitlines() if "no tokens in" in line)
        command = hint.split("`")[1]
        assert command == (f"neuralmind token create --config {server.config} --actor A "
                           "--role R"), hint
        listed = cli(home, "token", "list", config=server.config).stdout
        assert f"`{command}`" in listed
        argv = shlex.split(command.replace("--actor A --role R", "--actor ann --role reader"))
        made = cli(home, *argv[1:]).stdout.strip().splitlines()[-1]
        assert server.get("/v1/auth/whoami", token=made).json["actor"] == "ann"


@pytest.mark.sqlite_only("the config names its own database, which is down")
def test_token_commands_say_at_once_that_the_database_is_down(team):
    home, config = team
    config.write_text(config.read_text() + '[storage]\nbackend = "postgres"\n'
                      'dsn = "postgresql://nm:SECRET@127.0.0.1:1/nm"\n')
    for args in (("list",), ("create", "--actor", "a", "--role", "reader"),
                 ("revoke", "--actor", "a")):
        started = time.monotonic()
        done = cli(home, "token", *args, config=config, check=False)
        assert time.monotonic() - started < 10, "the pool's retries, not one try"
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and line.startswith(
            "neuralmind: the database at ") and "cannot be reached: " in line, done
        assert "SECRET" not in line and "Timeout" not in line


@pytest.mark.postgres_only("two servers on one database")
def test_a_token_made_on_one_server_is_taken_at_once_by_another_that_just_missed(tmp_path):
    """Server two had just read the tokens' version (a wrong token's miss): a token made on
    server one right after was refused there for the next 10 ms (a burst of MCP opens with a
    new token failed on a clean clone). A miss now reads the version again unless it was read
    after the request came."""
    from tests.plugins.mcp.conftest import _kernel
    from tests.support import fresh_pg_dsn
    dsn = fresh_pg_dsn()
    one, two = (_kernel(tmp_path / name, server={"allow_remote": True},
                        storage={"backend": "postgres", "dsn": dsn}) for name in ("one", "two"))
    try:
        made, taken = (kernel.state("auth").tokens for kernel in (one, two))
        for _ in range(20):
            assert taken.lookup("nm_wrong") is None  # two has just read the version
            token = made.create("ann", "reader", "*")[0]
            assert taken.lookup(token) is not None
    finally:
        one.shutdown()
        two.shutdown()


def test_token_commands_record_their_event_before_any_server_ran(tmp_path, backend):
    """`token create` in a fresh home — the bootstrap the server's start-up hint gives — writes
    ``token.created`` to the kernel's event log, making it (with the kernel's migrations) when
    no server ran yet; the server then streams it. An event log that cannot take it is a
    warning on stderr, never silence (the token stands: exit 0)."""
    from tests.plugins.auth.helpers import events, replay_events
    home = tmp_path / "home"
    config = tmp_path / "server.toml"
    config.write_text(server_config(tmp_path, {"a": tmp_path / "repo-a"},
                                    "[kernel]\nsse_heartbeat_s = 0.5"))
    made = create_token(home, config, "boss", "admin")
    assert [e["data"]["token_id"] for e in events(home, "token.created")] == [made["id"]]
    with LocalServer(home, config=config.read_text(), plugins=["auth"]) as server:
        seen = replay_events(server.port, made["token"])
        assert [(e["kind"], e["data"]["token_id"]) for e in seen] == [("token.created",
                                                                      made["id"])]
    if backend == "sqlite":
        (home / "kernel.db").unlink()
        (home / "kernel.db").write_bytes(b"this is not a database " * 200)
        done = cli(home, "token", "create", "--actor", "second", "--role", "reader",
                   config=config)
        assert done.returncode == 0 and done.stdout.strip().splitlines()[-1].startswith("nm_")
        # one line, with the reason (it was the log's bare line, then a warning pointing at it)
        warned = [line for line in done.stderr.splitlines() if "event" in line]
        assert warned == [
            "neuralmind: warning: the token.created event cannot be recorded: file is not a "
            "database — /v1/events and the audit trail miss this change"], done.stderr
