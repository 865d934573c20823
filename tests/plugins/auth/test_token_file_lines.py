"""What the tokens' lines and listing show: a raw token pasted where its hash goes is named
by its first few characters and its length, never quoted; times are shown as every other
route shows one, to the millisecond."""

from __future__ import annotations

import json
import re

import psycopg
import pytest

from tests.plugins.auth.helpers import cli, create_token, server_config
from tests.support import LocalServer, home_dsn

TOKEN = "nm_XMfakz85gSuox_Pg7570prRAgHdsysn-ZNdEs48iIJ4"  # a raw token's shape
SHOWN = f'"nm_X..." ({len(TOKEN)} characters) is not a token\'s sha256'
MILLIS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def assert_not_quoted(text: str) -> None:
    assert TOKEN[:5] not in text and TOKEN[-8:] not in text, text


@pytest.mark.sqlite_only("a tokens file is where tokens live without a shared database")
def test_a_raw_token_as_a_files_key_is_not_quoted(tmp_path):
    home, config = tmp_path / "home", tmp_path / "config.toml"
    config.write_text(server_config(tmp_path, {"a": tmp_path / "repo-a"}))
    home.mkdir()
    record = {"actor": "eve", "role": "admin", "projects": "*",
              "created_at": "2026-01-01T00:00:00Z", "expires_at": None}
    (home / "tokens.json").write_text(json.dumps({"version": 1, "tokens": {TOKEN: record}}))
    with LocalServer(home, config=config.read_text()) as server:
        assert server.get("/v1/projects", token=TOKEN).status == 401
        [line] = [line for line in server.output().splitlines() if "refusing" in line]
    assert SHOWN in line
    assert_not_quoted(line)
    done = cli(home, "token", "list", config=config, check=False)
    assert done.returncode == 2 and SHOWN in done.stderr
    assert_not_quoted(done.stderr)


@pytest.mark.postgres_only("hand-edited rows of the shared table")
def test_a_raw_token_as_a_rows_digest_is_not_quoted(tmp_path):
    with LocalServer(tmp_path / "home", config=server_config(tmp_path, {"a": tmp_path / "a"})
                     ) as server:
        admin = create_token(server.home, server.config, "root", "admin")
        reader = create_token(server.home, server.config, "rita", "reader")
        assert server.get("/v1/auth/whoami", token=admin["token"]).status == 200
        with psycopg.connect(home_dsn(server.home), autocommit=True) as conn:
            conn.execute("UPDATE auth_tokens SET digest = %s WHERE digest LIKE %s",
                         (TOKEN, reader["id"] + "%"))
        r = server.get("/v1/auth/tokens", token=admin["token"])  # the version did not move
        assert r.status == 503 and SHOWN in r.error["message"]
        assert_not_quoted(r.body.decode())


def test_the_tokens_listing_shows_times_to_the_millisecond(tmp_path):
    with LocalServer(tmp_path / "home", config=server_config(tmp_path, {"a": tmp_path / "a"})
                     ) as server:
        admin = create_token(server.home, server.config, "root", "admin")
        create_token(server.home, server.config, "rita", "reader", "a", "--expires",
                     "2099-01-01T00:00:00.600Z")
        create_token(server.home, server.config, "dan", "reader", "a", "--expires", "2099-03-01")
        items = {t["actor"]: t for t in server.get("/v1/auth/tokens", token=admin["token"]).json[
            "items"]}
        listed = json.loads(cli(server.home, "token", "list", "--json",
                                config=server.config).stdout)
    assert [t["actor"] for t in listed] == sorted(items)
    for token in (*items.values(), *listed):
        assert MILLIS.fullmatch(token["created_at"]), token
    assert items["root"]["expires_at"] is None and items["root"]["projects"] == "*"
    # stored in whole seconds (raised, never cut); a date lasts through that day
    assert items["rita"]["expires_at"] == "2099-01-01T00:00:01.000Z"
    assert items["dan"]["expires_at"] == "2099-03-02T00:00:00.000Z"
