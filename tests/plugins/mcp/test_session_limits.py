"""What a caller can make /v1/mcp keep: a bounded clientInfo, one session per batch, a bounded
number of live sessions per actor, idle sessions expiring while the server runs; and a session
answering only the token that opened it, not another token of the same actor."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time

from plugins.auth.tokens import TokenFile
from plugins.mcp.sessions import CLIENT_FIELD_MAX, IDLE_S, MAX_LIVE
from tests.plugins.mcp.conftest import jsonrpc

INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}


def _tokens(team, actor: str, n: int = 1, role: str = "reader") -> list[str]:
    """``n`` new tokens of ``actor`` on the team server."""
    tokens = TokenFile(team.kernel.home / "tokens.json")
    return [tokens.create(actor, role, "*")[0] for _ in range(n)]


@contextlib.contextmanager
def _db(app):
    """mcp.db, as another process would see it (autocommit)."""
    conn = sqlite3.connect(app.kernel.home / "mcp.db", isolation_level=None, timeout=10)
    try:
        yield conn
    finally:
        conn.close()


def _backdate(app, sid: str, seconds: float) -> None:
    with _db(app) as conn:
        conn.execute("UPDATE sessions SET seen_at = ? WHERE id = ?", (time.time() - seconds, sid))


def _live(app, actor: str) -> int:
    with _db(app) as conn:
        return conn.execute("SELECT count(*) FROM sessions WHERE actor = ? AND ended_at IS NULL",
                            (actor,)).fetchone()[0]


def _ping(app, sid: str) -> int:
    app.session = sid
    return app.post(jsonrpc("ping")).status_code


def test_client_info_is_stored_cut_to_its_short_fields(team):
    app = team.as_(_tokens(team, "client-info")[0])
    huge = {"name": "n" * 900_000, "version": "v" * 5_000, "title": "t" * 300,
            "description": "d" * 10_000, "websiteUrl": "https://x.example/" + "w" * 10_000,
            "icons": [{"src": "data:image/png;base64," + "A" * 50_000}]}
    r = app.post(jsonrpc("initialize", {**INIT, "clientInfo": huge}))
    assert r.status_code == 200 and "result" in r.json, r.text  # cut, not refused
    with _db(app) as conn:
        (client,) = conn.execute("SELECT client FROM sessions WHERE id = ?",
                                 (r.headers["mcp-session-id"],)).fetchone()
    assert json.loads(client) == {"name": "n" * CLIENT_FIELD_MAX, "title": "t" * CLIENT_FIELD_MAX,
                                  "version": "v" * CLIENT_FIELD_MAX}
    # a client within the bounds is kept as it sent them
    small = app.post(jsonrpc("initialize", INIT))
    with _db(app) as conn:
        (client,) = conn.execute("SELECT client FROM sessions WHERE id = ?",
                                 (small.headers["mcp-session-id"],)).fetchone()
    assert json.loads(client) == {"name": "test", "version": "1"}


def test_a_batch_opens_at_most_one_session(team):
    app = team.as_(_tokens(team, "batcher")[0])
    r = app.post([jsonrpc("initialize", INIT, id=1), jsonrpc("initialize", INIT, id=2),
                  jsonrpc("ping", id=3), jsonrpc("initialize", INIT, id=4)])
    assert r.status_code == 200
    assert [m["id"] for m in r.json] == [1, 2, 3, 4]
    assert "result" in r.json[0] and r.json[2]["result"] == {}
    for refused in (r.json[1], r.json[3]):
        assert refused["error"]["code"] == -32600
        assert "at most one session" in refused["error"]["message"]
    assert _live(app, "batcher") == 1
    assert _ping(app, r.headers["mcp-session-id"]) == 200
    # 3000 in one request still make one
    flood = app.as_(app.token).post([jsonrpc("initialize", INIT, id=i) for i in range(3000)])
    assert flood.status_code == 200 and sum("result" in m for m in flood.json) == 1
    assert _live(app, "batcher") == 2


def test_an_actor_holds_a_bounded_number_of_live_sessions(team):
    first, second = _tokens(team, "many", 2)
    app, other = team.as_(first), team.as_(_tokens(team, "someone-else")[0]).open()
    older = app.as_(first).open().session
    oldest = app.as_(first).open().session
    _backdate(app, oldest, 7200)
    _backdate(app, older, 3600)
    assert _ping(app, oldest) == 200  # used again: now the more recently used of the two
    # the actor's other token opens the rest, and one more: the least recently used goes
    for _ in range(MAX_LIVE - 1):
        app.as_(second).open()
    assert _live(app, "many") == MAX_LIVE
    assert _ping(app, older) == 404
    assert _ping(app, oldest) == 200
    assert _ping(other, other.session) == 200  # another actor's sessions are its own
    app.as_(first).open()
    assert _live(app, "many") == MAX_LIVE
    assert _ping(app, oldest) == 404


def test_idle_sessions_expire_while_the_server_runs(team):
    app = team.as_(_tokens(team, "idler")[0])
    sessions = team.kernel.state("mcp").sessions
    stale, ended, fresh = (app.as_(app.token).open().session for _ in range(3))
    _backdate(app, stale, IDLE_S + 60)
    app.session = ended
    assert app.http.simulate_delete("/v1/mcp", headers=app.headers()).status_code == 204
    # refused at once, though no prune has run since the server started
    assert _ping(app, stale) == 404
    with _db(app) as conn:
        assert conn.execute("SELECT count(*) FROM sessions WHERE id IN (?, ?)",
                            (stale, ended)).fetchone()[0] == 2
    # once the prune interval has passed, the next request deletes both rows
    sessions.next_prune = 0.0
    assert _ping(app, fresh) == 200
    with _db(app) as conn:
        assert conn.execute("SELECT count(*) FROM sessions WHERE id IN (?, ?, ?)",
                            (stale, ended, fresh)).fetchone()[0] == 1
    assert sessions.next_prune > time.time()


def test_a_session_answers_only_the_token_that_opened_it(team, local):
    first, second = _tokens(team, "rita", 2)
    owner = team.as_(first).open()
    thief = team.as_(second)  # the same actor, another token
    thief.session = owner.session
    used = thief.post(jsonrpc("ping"))
    assert used.status_code == 404 and used.json["error"]["code"] == "mcp_session_not_found"
    assert "this token" in used.json["error"]["message"]
    ended = thief.http.simulate_delete("/v1/mcp", headers=thief.headers())
    assert ended.status_code == 404 and ended.json["error"]["code"] == "mcp_session_not_found"
    assert owner.post(jsonrpc("ping")).status_code == 200
    assert owner.http.simulate_delete("/v1/mcp", headers=owner.headers()).status_code == 204
    # the loopback token, which names no token id, holds its sessions as its actor
    mine = local.as_(local.token).open()
    assert mine.post(jsonrpc("ping")).status_code == 200
