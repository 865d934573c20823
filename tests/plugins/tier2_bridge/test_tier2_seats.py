"""Seat checks in server mode, with tokens made by ``neuralmind token create``: N actors on N
seats is fine, the N+1th logs a warning and emits ``seats.exceeded`` exactly once across 4
workers; the licence is re-read when it changes, and a bad one is a warning, never a crash."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from datetime import UTC, datetime, timedelta

import pytest

from plugins.tier2_bridge.seats import LICENSE_ENV, license_path, read_license, warn_about
from tests.plugins.auth.helpers import create_token, server_config
from tests.plugins.tier2_bridge.helpers import PLUGINS, kernel_events, rows, settled
from tests.support import Server

SEATS = 3


def ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def seated(root, licence, workers: int, actors: list[tuple[str, str]]):
    """A server-mode server (not started) under ``root`` reading the licence file
    ``licence``, and a token per ``(actor, role)``: ``(server, {actor: token})``."""
    server = Server(root / "home", config=server_config(root, {"a": root / "repo-a"}),
                    plugins=PLUGINS, workers=workers,
                    env={"NEURALMIND_LICENSE_PATH": str(licence), "HOME": str(root)})
    config = server.home / "config.toml"
    return server, {actor: create_token(server.home, config, actor, role)["token"]
                    for actor, role in actors}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    root = tmp_path_factory.mktemp("seats")
    licence = root / "license.json"
    licence.write_text(json.dumps({"licensee": "Acme", "seats": SEATS, "expires": "2099-12-31"}))
    server, tokens = seated(root, licence, 4, [("admin", "admin"), ("alice", "reader"),
                                               ("bob", "builder"), ("carol", "reader"),
                                               ("dave", "reader")])
    server.start()
    try:
        yield server, tokens, licence
    finally:
        server.stop()


def seats(server, tokens) -> dict:
    r = server.get("/v1/admin/seats", token=tokens["admin"])
    assert r.status == 200, r.body
    return r.json


def exceeded_events(server) -> list[dict]:
    return [e for e in kernel_events(server.home) if e["kind"] == "seats.exceeded"]


def test_seats_are_counted_at_the_boundary(team):
    server, tokens, _ = team
    for actor in ("admin", "alice", "bob"):
        for _ in range(8):  # enough to reach every worker
            assert server.get("/v1/projects", token=tokens[actor]).status == 200
    status = seats(server, tokens)
    assert status == {"seats": SEATS, "active_actors": SEATS, "exceeded": False,
                      "licensee": "Acme", "expires": "2099-12-31", "license_error": None,
                      "window_days": 30}
    assert exceeded_events(server) == []

    assert server.get("/v1/projects", token=tokens["carol"]).status == 200
    status = seats(server, tokens)
    assert (status["active_actors"], status["exceeded"]) == (SEATS + 1, True)
    for _ in range(8):
        for actor in ("admin", "alice", "bob", "carol"):
            assert server.get("/v1/projects", token=tokens[actor]).status == 200
    events = exceeded_events(server)
    assert len(events) == 1  # once per transition, not per request or per worker
    assert json.loads(events[0]["data"]) == {"seats": SEATS, "active_actors": SEATS + 1,
                                             "exceeded": True, "licensee": "Acme",
                                             "expires": "2099-12-31"}
    assert "exceed the 3 seats licensed to Acme" in server.output()
    assert [r["action"] for r in settled(server.home)].count("seats.exceeded") == 1


def test_only_actors_of_the_last_30_days_count(team):
    server, tokens, _ = team
    before = seats(server, tokens)["active_actors"]
    conn = sqlite3.connect(server.home / "seats.db")
    try:
        with conn:
            conn.execute("INSERT INTO seen VALUES ('long-gone', ?)", (ago(30.01),))
            conn.execute("INSERT INTO seen VALUES ('recent', ?)", (ago(29.99),))
    finally:
        conn.close()
    assert seats(server, tokens)["active_actors"] == before + 1


def test_a_changed_licence_is_read_without_a_restart(team):
    server, tokens, licence = team
    licence.write_text(json.dumps({"licensee": "Acme Corp", "seats": 50}))
    status = seats(server, tokens)
    assert (status["seats"], status["exceeded"], status["licensee"], status["expires"]) == \
        (50, False, "Acme Corp", None)
    licence.write_text("{not json")
    status = seats(server, tokens)
    assert (status["seats"], status["exceeded"], status["licensee"]) == (None, False, None)
    assert "not readable JSON" in status["license_error"]
    licence.unlink()
    status = seats(server, tokens)
    assert status["seats"] is None and status["exceeded"] is False
    assert status["license_error"].startswith("no licence file at")
    assert "seat checks are off" in server.output()


def test_a_broken_seat_ledger_never_fails_a_request(team):
    server, tokens, _ = team
    seats(server, tokens)  # the admin is noted after this answer: the ledger exists
    before = seats(server, tokens)["active_actors"]
    conn = sqlite3.connect(server.home / "seats.db", isolation_level=None)
    try:
        conn.execute("CREATE TRIGGER injected BEFORE INSERT ON seen "
                     "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
        assert server.get("/v1/projects", token=tokens["dave"]).status == 200
        assert "tier2 seats: noting actor dave failed" in server.output()
        assert seats(server, tokens)["active_actors"] == before  # still read; dave not noted
    finally:
        conn.execute("DROP TRIGGER IF EXISTS injected")
        conn.close()


def test_the_seat_routes_are_for_admins(team):
    server, tokens, _ = team
    for actor in ("alice", "bob"):
        for path in ("/v1/admin/seats", "/v1/admin/audit"):
            r = server.get(path, token=tokens[actor])
            assert r.status == 403 and r.error["code"] == "forbidden"
    assert server.get("/v1/admin/audit", token=tokens["admin"]).status == 200


def test_the_loopback_user_is_not_a_seat(busy):
    r = busy.get("/v1/admin/seats")
    assert r.json["active_actors"] == 0 and r.json["exceeded"] is False


@pytest.mark.parametrize("content, problem", [
    ('{"licensee": "A", "seats": 0}', "`seats` must be a whole number"),
    ('{"licensee": "A", "seats": "3"}', "`seats` must be a whole number"),
    ('{"licensee": "A", "seats": true}', "`seats` must be a whole number"),
    ('{"seats": 3}', "`licensee` must be a non-empty string"),
    ('{"licensee": " ", "seats": 3}', "`licensee` must be a non-empty string"),
    ('{"licensee": "A", "seats": 3, "expires": "soon"}', "`expires` must be an ISO date"),
    ('{"licensee": "A", "seats": 3, "expires": "2027-06-30garbage"}', "`expires` must be an ISO"),
    ('{"licensee": "A", "seats": 3, "expires": "2027-06-30T25:99"}', "`expires` must be an ISO"),
    ('{"licensee": "A", "seats": 3, "expires": 20270630}', "`expires` must be an ISO date"),
    ('{"licensee": "A", "seats": 3, "expires": "2027-02-30"}', "`expires` must be an ISO date"),
    ('[1, 2]', "not a JSON object"),
    ('', "not readable JSON"),
])
def test_an_invalid_licence_is_a_problem_not_a_crash(tmp_path, content, problem):
    path = tmp_path / "license.json"
    path.write_text(content)
    lic = read_license(path)
    assert lic.seats is None and problem in lic.problem


def test_a_licence_that_is_not_utf8_is_a_problem(tmp_path):
    path = tmp_path / "license.json"
    path.write_bytes(b"\xff\xfe{")
    assert "not readable JSON" in read_license(path).problem


def test_token_changes_made_by_the_cli_reach_the_trail(team):
    server, tokens, _ = team
    made = create_token(server.home, server.home / "config.toml", "erin", "reader")
    rows = settled(server.home)  # no request follows: the copier's poll finds the CLI's event
    created = [r for r in rows if r["action"] == "token.created"]
    # the five made before the server's first start, then erin's
    assert len(created) == len(tokens) + 1 and all(r["actor"].startswith("cli:") for r in created)
    assert created[-1]["target"] == made["id"]


def test_the_licence_is_found_by_env_then_config_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv(LICENSE_ENV, raising=False)
    assert license_path(tmp_path) == tmp_path / "license.json"
    assert license_path(tmp_path, str(tmp_path / "cfg.json")) == tmp_path / "cfg.json"
    monkeypatch.setenv(LICENSE_ENV, str(tmp_path / "env.json"))
    assert license_path(tmp_path, str(tmp_path / "cfg.json")) == tmp_path / "env.json"


def test_an_expired_licence_is_warned_about_and_still_counts(tmp_path, caplog):
    path = tmp_path / "license.json"
    path.write_text('{"licensee": "Acme", "seats": 2, "expires": "2001-01-31"}')
    lic = read_license(path)
    assert (lic.seats, lic.problem, lic.expired) == (2, None, True)
    warn_about(lic)
    assert "expired on 2001-01-31" in caplog.text


@pytest.mark.parametrize("zone", ["<+14>-14", "<-12>+12"])  # Kiritimati's, and a day behind
def test_a_licence_expires_by_the_utc_date_whatever_the_zone(tmp_path, monkeypatch, zone):
    """Between them the two zones put the local date off the UTC one at any hour."""
    today = datetime.now(UTC).date()
    path = tmp_path / "license.json"
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        for expires, expired in ((today, False), (today - timedelta(days=1), True)):
            path.write_text(json.dumps({"licensee": "Acme", "seats": 2,
                                        "expires": expires.isoformat()}))
            assert read_license(path).expired is expired, (zone, expires)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_an_actor_whose_write_failed_is_written_at_its_next_request(tmp_path):
    from kernel.storage import Database
    from plugins.tier2_bridge.seats import MIGRATIONS, LicenseFile, SeatLedger, SeatWatch
    from plugins.tier2_bridge.storage import LazyDatabase
    path = tmp_path / "seats.db"
    ledger = SeatLedger(LazyDatabase(str(path), lambda: Database(path, MIGRATIONS)))
    seen = SeatWatch(ledger, LicenseFile(tmp_path / "license.json"), on_change=lambda status: None)
    assert seen.status().active_actors == 0  # opens (creates) seats.db
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TRIGGER injected BEFORE INSERT ON seen "
                 "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    with pytest.raises(sqlite3.IntegrityError, match="injected failure"):
        seen.seen("dave")
    conn.execute("DROP TRIGGER injected")
    seen.seen("dave")  # within the minutes a noted actor is not written again
    assert seen.status().active_actors == 1
    conn.close()


def put_licence(path, seats: int) -> None:
    """A new licence in the file's place, as a deploy puts it (a new file, renamed over)."""
    new = path.with_suffix(".new")
    new.write_text(json.dumps({"licensee": "Acme", "seats": seats}))
    os.replace(new, path)


def test_a_licence_change_is_decided_at_the_next_request_either_way(tmp_path):
    """Seats exceeded, then a licence with more seats: the next request — of an actor every
    worker has seen, so none writes its last_seen for minutes — says "back within" and clears
    the state, which re-arms the event; fewer seats again emit a second ``seats.exceeded``.
    Each transition once across the workers. (Transitions were decided only where an actor
    was written, so the first went unsaid for up to 5 minutes and the breach after it was
    never reported.)"""
    licence = tmp_path / "license.json"
    put_licence(licence, 5)
    server, tokens = seated(tmp_path, licence, 2, [("admin", "admin"), ("ann", "reader"),
                                                   ("ben", "reader"), ("cy", "reader")])

    def ask(*actors: str, times: int = 1) -> None:
        for _ in range(times):
            for actor in actors:
                assert server.get("/v1/auth/whoami", token=tokens[actor]).status == 200

    def stored() -> str:
        return rows(server.home / "seats.db",
                    "SELECT value FROM seat_state WHERE key = 'exceeded'")[0]["value"]

    def said() -> tuple[int, int]:
        out = server.output()
        return out.count("token actors in the last 30 days exceed"), out.count("back within")

    with server:
        ask("admin", "ann", "ben", times=6)  # 3 actors on 5 seats, noted by both workers
        assert exceeded_events(server) == [] and said() == (0, 0)

        put_licence(licence, 2)
        ask("ann")  # the next request, whichever worker serves it
        assert [json.loads(e["data"])["seats"] for e in exceeded_events(server)] == [2]
        assert stored() == "1" and said() == (1, 0)

        put_licence(licence, 20)
        ask("ben")
        assert stored() == "0" and said() == (1, 1)
        assert "back within the 20 seats licensed (3 active)" in server.output()
        assert seats(server, tokens)["exceeded"] is False

        put_licence(licence, 3)
        ask("cy")  # a fourth actor on three seats: a breach again, reported again
        events = [json.loads(e["data"]) for e in exceeded_events(server)]
        assert [(e["seats"], e["active_actors"]) for e in events] == [(2, 3), (3, 4)]
        ask("admin", "ann", "ben", "cy", times=6)
        assert len(exceeded_events(server)) == 2 and said() == (2, 1)  # once per transition
        assert stored() == "1"
        assert [r["action"] for r in settled(server.home)].count("seats.exceeded") == 2


def test_a_count_that_falls_by_itself_is_decided_at_the_next_request(tmp_path):
    """No licence change and no new actor: the oldest active actor leaves the window, and the
    next request of an actor the worker noted a moment ago says "back within" (a worker
    decides again when the oldest ``last_seen`` it counted leaves the window)."""
    import time

    from kernel.storage import Database
    from plugins.tier2_bridge.seats import MIGRATIONS, LicenseFile, SeatLedger, SeatWatch
    from plugins.tier2_bridge.storage import LazyDatabase
    path = tmp_path / "seats.db"
    (tmp_path / "license.json").write_text('{"licensee": "Acme", "seats": 1}')
    changes = []
    watch = SeatWatch(SeatLedger(LazyDatabase(str(path), lambda: Database(path, MIGRATIONS))),
                      LicenseFile(tmp_path / "license.json"), on_change=changes.append)
    watch.status()  # makes seats.db
    leaving = (datetime.now(UTC) - timedelta(days=30) + timedelta(seconds=2))
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO seen VALUES ('leaving', ?)",
                     (leaving.strftime("%Y-%m-%dT%H:%M:%SZ"),))
    watch.seen("staying")
    assert [(s.active_actors, s.exceeded) for s in changes] == [(2, True)]
    watch.seen("staying")  # nothing changed yet: no decision, no write
    assert len(changes) == 1
    time.sleep(max(0.0, leaving.timestamp() + 30 * 86400 + 1 - time.time()) + 0.2)  # whole s
    watch.seen("staying")  # noted moments ago, so not written: decided all the same
    assert [(s.active_actors, s.exceeded) for s in changes] == [(2, True), (1, False)]
