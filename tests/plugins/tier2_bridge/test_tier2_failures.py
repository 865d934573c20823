"""A failure inside tier2_bridge never fails the request that triggered the event: a corrupt
``audit.db`` or an append that fails costs the audit (logged), and the trail catches up.
Served from this process: the copier is a thread of the kernel that serves."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from contextlib import closing, contextmanager

import psutil

from tests.plugins.auth.helpers import create_token, server_config
from tests.plugins.tier2_bridge.helpers import PLUGINS, audit_rows, kernel_events, settled, verify
from tests.support import LocalServer, Server, request

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


def test_a_worker_killed_while_its_seat_note_waits_keeps_the_writes_events(tmp_path):
    """seats.db held locked (a backup, a slow disk, another process's long transaction): the
    seat note of a new actor waits on it, up to the busy timeout. The request's write and its
    events are in kernel.db before that wait, so a worker killed (-9) meanwhile leaves the
    committed write with its ``token.revoked`` and ``api.call``, and the audit copies them.
    (They were held in the worker's memory behind the seat note, and died with it.)"""
    server = Server(tmp_path / "home", config=server_config(tmp_path, {"a": tmp_path / "repo-a"}),
                    plugins=PLUGINS, workers=1, env={"HOME": str(tmp_path)})
    config = server.home / "config.toml"
    admin = create_token(server.home, config, "admin", "admin")["token"]
    newcomer = create_token(server.home, config, "newcomer", "admin")["token"]  # not yet a seat
    victim = create_token(server.home, config, "victim", "reader")["id"]
    with server:
        assert server.get("/v1/admin/seats", token=admin).status == 200  # seats.db exists
        worker = psutil.Process(server.proc.pid).children()[0].pid
        lock = sqlite3.connect(server.home / "seats.db", isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        answers: list[object] = []

        def revoke() -> None:
            try:
                answers.append(request(server.port, "DELETE", f"/v1/auth/tokens/{victim}",
                                       token=newcomer).status)
            except OSError as ex:  # the worker is killed before it answers
                answers.append(ex)

        caller = threading.Thread(target=revoke)
        try:
            caller.start()

            def written() -> list[str]:
                return sorted(e["kind"] for e in kernel_events(server.home)
                              if e["actor"] == "newcomer")

            deadline = time.monotonic() + 5  # half the busy timeout the seat note waits
            while written() != ["api.call", "token.revoked"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert written() == ["api.call", "token.revoked"], "events held behind the seat note"
            assert answers == []  # the note still waits: the request has not ended
            os.kill(worker, signal.SIGKILL)
            caller.join(30)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert len(answers) == 1 and isinstance(answers[0], OSError)
        assert victim not in json.loads((server.home / "tokens.json").read_text())["tokens"]
        revoked = [e for e in kernel_events(server.home) if e["kind"] == "token.revoked"]
        assert [json.loads(e["data"])["token_id"] for e in revoked] == [victim]
        trail = server.get("/v1/admin/audit?actor=newcomer", token=admin)  # a new worker
        assert trail.status == 200
        assert sorted((r["action"], r["target"]) for r in trail.json["items"]) == [
            ("api.call", f"DELETE /v1/auth/tokens/{victim} 204"), ("token.revoked", victim)]
