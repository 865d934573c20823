"""``neuralmind storage migrate`` and server mode's tokens: the copy fills a token table that
never held one, so a token revoked in the database stays revoked when the migrate runs again
(which then writes no token), and a tokens file that is not valid stops the migrate before
anything is copied."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.plugins.auth.helpers import cli, create_token, server_config
from tests.support import LocalServer, fresh_pg_dsn

pytestmark = pytest.mark.sqlite_only("a SQLite home is the source; the test names its database")


def migrate(home: Path, config: Path, dsn: str) -> tuple[int, dict]:
    done = cli(home, "storage", "migrate", "--to", "postgres", "--dsn", dsn, "--json",
               config=config, check=False)
    return done.returncode, json.loads(done.stdout)


def token_table(dsn: str) -> tuple[set[str], int]:
    """The hashes in auth_tokens and the table's version."""
    with psycopg.connect(dsn) as conn:
        hashes = {row[0] for row in conn.execute("SELECT digest FROM auth_tokens")}
        return hashes, conn.execute("SELECT version FROM auth_tokens_version").fetchone()[0]


def test_a_token_revoked_in_the_database_stays_revoked_when_migrate_runs_again(tmp_path):
    home, dsn = tmp_path / "home", fresh_pg_dsn()
    team, shared = tmp_path / "team.toml", tmp_path / "shared.toml"
    team.write_text(server_config(tmp_path, {}))
    shared.write_text(team.read_text() + f'[storage]\nbackend = "postgres"\ndsn = "{dsn}"\n')
    ann, bob = (create_token(home, team, actor, "reader") for actor in ("ann", "bob"))
    code, first = migrate(home, team, dsn)
    assert code == 0 and first["verified"], first
    cli(home, "token", "revoke", ann["id"], config=shared)
    admin = create_token(home, shared, "root", "admin")
    with LocalServer(tmp_path / "machine2", config=shared.read_text(), plugins=["auth"]) as server:
        assert server.delete(f"/v1/auth/tokens/{bob['id']}", token=admin["token"]).status == 204
        carl = create_token(home, team, "carl", "reader")  # the home written after the copy
        before = token_table(dsn)
        done = cli(home, "storage", "migrate", "--to", "postgres", "--dsn", dsn,
                   config=team, check=False)  # the database moved on: refused, one line
        assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1
        assert "a server wrote there; copying would mix them. Nothing was copied" in done.stderr
        assert token_table(dsn) == before  # no token written, the version not moved
        for made in (ann, bob, carl):
            assert server.get("/v1/auth/whoami", token=made["token"]).status == 401
        assert server.get("/v1/auth/whoami", token=admin["token"]).json["actor"] == "root"


def test_a_tokens_file_that_is_not_valid_stops_migrate_before_it_copies(tmp_path):
    home, dsn = tmp_path / "home", fresh_pg_dsn()
    with LocalServer(home, config=server_config(tmp_path, {}), plugins=["auth"]) as server:
        create_token(home, server.config, "ann", "reader")
    (home / "tokens.json").write_text('{"version": 1, "tokens": {bad')
    done = cli(home, "storage", "migrate", "--to", "postgres", "--dsn", dsn,
               config=server.config, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"neuralmind: tokens file {home / 'tokens.json'} is not valid JSON: Expecting property "
        "name enclosed in double quotes: line 1 column 27 (char 26)"]
    with psycopg.connect(dsn) as conn:  # not even the kernel's tables
        assert conn.execute("SELECT to_regclass('nm_schema')").fetchone()[0] is None
