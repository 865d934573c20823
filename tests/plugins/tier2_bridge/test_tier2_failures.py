"""A failure inside tier2_bridge never fails the request that triggered the event: a corrupt
``audit.db`` or an append that fails costs the audit (logged), and the trail catches up.
Served from this process: the copier is a thread of the kernel that serves."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing, contextmanager

from tests.plugins.tier2_bridge.helpers import PLUGINS, audit_rows, kernel_events, settled, verify
from tests.support import LocalServer

BOOBY_TRAP = ("CREATE TRIGGER injected_failure BEFORE INSERT ON audit "
              "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")


def register_many(server, root, names) -> None:
    for name in names:
        (root / name).mkdir()
        r = server.post("/v1/projects", {"path": str(root / name)})
        assert r.status == 201, r.body


def wait_for(server, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while text not in server.output():
        assert time.monotonic() < deadline, f"{text!r} never logged"
        time.sleep(0.05)


@contextmanager
def audited(tmp_path):
    """A server whose trail holds its first four records (two projects registered), and a
    connection of its own to audit.db, as an attacker or a repair would open it."""
    with LocalServer(tmp_path / "home", plugins=PLUGINS) as server:
        register_many(server, tmp_path, ["a", "b"])
        assert len(settled(server.home)) == 4
        with closing(sqlite3.connect(server.home / "audit.db", isolation_level=None)) as conn:
            yield server, conn


def test_a_corrupt_audit_db_costs_the_audit_not_the_server(tmp_path):
    server = LocalServer(tmp_path / "home", plugins=PLUGINS)
    (server.home / "audit.db").write_bytes(b"this is not a database " * 200)
    with server:
        register_many(server, tmp_path, ["a", "b", "c"])
        assert len(server.get("/v1/projects").json["items"]) == 3
        r = server.get("/v1/admin/audit")
        assert r.status == 503 and r.error["code"] == "audit_unavailable"
        assert "tmp" not in r.error["message"]  # no filesystem detail leaks to clients
        wait_for(server, "events are not reaching")
        time.sleep(2.5)  # a few more polls of the copier …
        assert server.output().count("events are not reaching") == 1  # … logged once
    code, _ = verify(server.home)
    assert code == 1


def test_failed_appends_never_fail_requests_and_are_caught_up(tmp_path):
    with audited(tmp_path) as (server, conn):
        conn.execute(BOOBY_TRAP)
        register_many(server, tmp_path, ["c", "d", "e"])
        wait_for(server, "injected failure")
        assert len(audit_rows(server.home)) == 4  # every copy failed …
        conn.execute("DROP TRIGGER injected_failure")
        register_many(server, tmp_path, ["f"])
        # … and the first append that works copies everything it missed, in order
        rows, events = settled(server.home), kernel_events(server.home)
        assert len(events) == 12
        assert [(r["action"], r["request_id"]) for r in rows] == \
            [(e["kind"], e["request_id"]) for e in events]
        assert verify(server.home)[0] == 0


def test_an_audit_db_removed_under_the_server_is_made_again_from_the_event_log(tmp_path):
    with audited(tmp_path) as (server, _):
        for name in ("audit.db", "audit.db-wal", "audit.db-shm"):
            (server.home / name).unlink(missing_ok=True)
        register_many(server, tmp_path, ["c"])
        r = server.get("/v1/admin/audit?limit=200")
        assert r.status == 200, r.body
        events = kernel_events(server.home)
        assert [i["request_id"] for i in r.json["items"]] == [e["request_id"] for e in events]
        assert "audit.db was removed or replaced while the server ran" in server.output()
        assert (server.home / "audit.db").exists() and verify(server.home)[0] == 0


def test_a_record_edited_to_hold_no_text_is_a_503_the_log_names(tmp_path):
    with audited(tmp_path) as (server, conn):
        conn.execute("DROP TRIGGER audit_no_update")
        conn.execute("UPDATE audit SET actor = X'ff00' WHERE seq = 2")
        r = server.get("/v1/admin/audit")
        assert r.status == 503 and r.error["code"] == "audit_unavailable"
        assert "record 2 of" in server.output() and "its actor holds bytes" in server.output()
