"""MCP sessions on a shared PostgreSQL database (``[storage] backend = "postgres"``): two
kernels in this process stand for two machines answering one team with no session affinity
(docs/operations.md, "Scaling out"). A session opened on one is found, used and ended on the
other; it stays its token's own; ended and idle sessions are pruned, and an actor's live
sessions stay bounded, on PostgreSQL as on SQLite."""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from plugins.mcp.sessions import IDLE_S, MAX_LIVE
from tests.plugins.mcp.conftest import VERSION, App, _kernel, jsonrpc
from tests.support import fresh_pg_dsn


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """Two team servers' kernels on one database, each with its own home: ``(one, two)``,
    Apps without a token yet (``one.dsn`` names the database)."""
    root, dsn = tmp_path_factory.mktemp("mcp-shared"), fresh_pg_dsn()
    kernels = [_kernel(root / name / "home", server={"allow_remote": True},
                       storage={"backend": "postgres", "dsn": dsn},
                       auth={"rate_limits": {"default": {"rate": 10000, "burst": 10000}}})
               for name in ("one", "two")]
    one, two = (App(kernel, "") for kernel in kernels)
    one.dsn = two.dsn = dsn
    yield one, two
    for kernel in kernels:
        kernel.shutdown()


def _token(app: App, actor: str) -> str:
    """A new reader token of ``actor``, made in the shared database (every server takes it)."""
    return app.kernel.state("auth").tokens.create(actor, "reader", "*")[0]


@contextlib.contextmanager
def _db(app: App):
    """The shared database, as another process sees it (autocommit)."""
    with psycopg.connect(app.dsn, autocommit=True) as conn:
        yield conn


def _backdate(app: App, sid: str, seconds: float) -> None:
    with _db(app) as conn:
        conn.execute("UPDATE mcp_sessions SET seen_at = %s WHERE id = %s",
                     (time.time() - seconds, sid))


def _live(app: App, actor: str) -> int:
    with _db(app) as conn:
        return conn.execute("SELECT count(*) FROM mcp_sessions WHERE actor = %s "
                            "AND ended_at IS NULL", (actor,)).fetchone()[0]


def _ping(app: App, sid: str) -> int:
    app.session = sid
    return app.post(jsonrpc("ping")).status_code


def _on(app: App, token: str, sid: str) -> App:
    """A client of ``app``'s server holding ``token`` and naming session ``sid``."""
    other = app.as_(token)
    other.session = sid
    return other


def test_a_session_opened_on_one_server_is_used_and_ended_on_the_other(machines):
    one, two = machines
    token = _token(one, "ann")
    before = time.time()
    opened = one.as_(token).open()
    there = _on(two, token, opened.session)
    tools = there.rpc("tools/list")
    assert "result" in tools and tools["result"]["tools"], tools
    assert tools["result"] == one.as_(token).open().rpc("tools/list")["result"]
    # the version it negotiated on the first server holds on the second
    wrong = there.post(jsonrpc("ping"), **{"MCP-Protocol-Version": "2025-03-26"})
    assert wrong.status_code == 400 and wrong.json["error"]["details"]["supported"] == [VERSION]
    with _db(one) as conn:
        created, seen = conn.execute("SELECT created_at, seen_at FROM mcp_sessions "
                                     "WHERE id = %s", (opened.session,)).fetchone()
    assert before <= created == seen <= time.time()  # to the microsecond: 8-byte floats
    assert not any((k.home / "mcp.db").exists() for k in (one.kernel, two.kernel))
    ended = there.http.simulate_delete("/v1/mcp", headers=there.headers())
    assert ended.status_code == 204
    for app in (opened, there):
        gone = app.post(jsonrpc("ping"))
        assert gone.status_code == 404 and gone.json["error"]["code"] == "mcp_session_not_found"


def test_a_session_is_its_tokens_own_on_every_server(machines):
    one, two = machines
    first, second, stranger = _token(one, "rita"), _token(two, "rita"), _token(one, "sam")
    sid = one.as_(first).open().session
    for token in (second, stranger):  # the same actor's other token, another actor's
        for app in (one, two):
            thief = _on(app, token, sid)
            used = thief.post(jsonrpc("ping"))
            assert used.status_code == 404, used.text
            assert used.json["error"]["code"] == "mcp_session_not_found"
            assert thief.http.simulate_delete("/v1/mcp",
                                              headers=thief.headers()).status_code == 404
    assert _ping(_on(two, first, sid), sid) == 200
    assert _ping(_on(one, first, sid), sid) == 200


def test_ended_and_idle_sessions_are_pruned_by_either_server(machines):
    one, two = machines
    token = _token(one, "idler")
    stale, ended, fresh = (one.as_(token).open().session for _ in range(3))
    _backdate(one, stale, IDLE_S + 60)
    closing = _on(two, token, ended)
    assert closing.http.simulate_delete("/v1/mcp", headers=closing.headers()).status_code == 204
    assert _ping(_on(two, token, stale), stale) == 404  # refused at once, before any prune
    with _db(one) as conn:
        assert conn.execute("SELECT count(*) FROM mcp_sessions WHERE id IN (%s, %s)",
                            (stale, ended)).fetchone()[0] == 2
    # the other server's sweep, due once its interval has passed, deletes both rows
    sessions = two.kernel.state("mcp").sessions
    sessions.next_prune = 0.0
    assert _ping(_on(two, token, fresh), fresh) == 200
    assert sessions.next_prune > time.time()
    with _db(one) as conn:
        left = conn.execute("SELECT id FROM mcp_sessions WHERE id IN (%s, %s, %s)",
                            (stale, ended, fresh)).fetchall()
    assert left == [(fresh,)]
    assert sessions.prune() == 0  # nothing ended or idle is left


def test_an_actor_holds_a_bounded_number_of_live_sessions_across_servers(machines):
    one, two = machines
    first, second = _token(one, "many"), _token(one, "many")
    older, oldest = (one.as_(first).open().session for _ in range(2))
    _backdate(one, oldest, 7200)
    _backdate(one, older, 3600)
    assert _ping(_on(two, first, oldest), oldest) == 200  # used again: the more recent
    for i in range(MAX_LIVE - 1):  # the actor's other token, on both servers, and one more
        (one, two)[i % 2].as_(second).open()
    assert _live(one, "many") == MAX_LIVE
    assert _ping(_on(one, first, older), older) == 404
    assert _ping(_on(two, first, oldest), oldest) == 200
    two.as_(first).open()
    assert _live(one, "many") == MAX_LIVE
    assert _ping(_on(one, first, oldest), oldest) == 404
    # another server's clock ahead: every session seen "later" than now; the new one stays
    with _db(one) as conn:
        conn.execute("UPDATE mcp_sessions SET seen_at = %s WHERE actor = 'many'",
                     (time.time() + 3600,))
    newest = one.as_(first).open().session
    assert _live(one, "many") == MAX_LIVE and _ping(_on(two, first, newest), newest) == 200


def test_opens_at_once_on_both_servers_keep_the_bound(machines):
    one, two = machines
    token = _token(one, "crowd")
    for i in range(MAX_LIVE - 4):
        (one, two)[i % 2].as_(token).open()
    with ThreadPoolExecutor(8) as pool:
        opened = list(pool.map(lambda i: (one, two)[i % 2].as_(token).open().session,
                               range(24)))
    assert len(set(opened)) == 24 and _live(one, "crowd") == MAX_LIVE


def test_storage_check_names_the_sessions_file_and_refuses_a_newer_one(tmp_path):
    """mcp.db is one of the home's files for `neuralmind storage`: checked, never copied (a
    client initializes again); one a newer NeuralMind migrated is named, exit 1."""
    import json
    import sqlite3

    from tests.plugins.mcp.conftest import PLUGINS
    from plugins.mcp.sessions import MIGRATIONS
    from tests.support import run_cli
    home = tmp_path / "home"
    _kernel(home).shutdown()
    env = {"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": ",".join(PLUGINS)}
    code, out, _ = run_cli("storage", "check", "--json", env=env)
    mcp = next(r for r in json.loads(out)["components"] if r["component"] == "mcp")
    assert code == 0 and (mcp["file"], mcp["version"], mcp["pending"]) == (
        str(home / "mcp.db"), len(MIGRATIONS), 0)
    with sqlite3.connect(home / "mcp.db") as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    code, _, err = run_cli("storage", "check", env=env)
    assert code == 1 and err == (f"neuralmind: {home / 'mcp.db'} is at schema version "
                                 f"{len(MIGRATIONS) + 1}, newer than this NeuralMind's "
                                 f"{len(MIGRATIONS)}: upgrade NeuralMind before serving it\n")
