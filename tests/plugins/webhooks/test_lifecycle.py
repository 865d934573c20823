"""A hook's life beyond one delivery, to a real local receiver: when failures disable it (a
sustained outage, never one old failure and one new blip), what a pause keeps (every event,
sent in order on resume, for ``keep_days`` at most), what a second secret rotation keeps
signing (every secret whose grace runs), and a store of the release before these rules
carried over. The service's clock is moved by the tests where hours must pass."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from contextlib import closing

import pytest

from neuralmind.client import verify_signature
from plugins.webhooks.store import FILE, MIGRATIONS, PG_MIGRATIONS
from tests.plugins.webhooks.conftest import FAST, SERVED, emitted, subscribe
from tests.plugins.webhooks.test_delivery import Clock, deliveries, emit, settled
from tests.support import SESSION, LocalServer, home_dsn

# two tries a delivery, disabled after a minute of failing: the reviewer's setting in minutes
SHORT = FAST + "attempts = 2\ndisable_after_s = 60\n"


def hook_of(server, hook_id: str) -> dict:
    r = server.get(f"/v1/webhooks/{hook_id}")
    assert r.status == 200, r.body
    return r.json


def tried(server, hook_id: str, event_id: int, attempts: int, status: str = "pending") -> dict:
    """The event's delivery once its ``attempts``-th try is recorded with ``status``."""
    items = settled(server, hook_id, lambda items: any(
        d["event_id"] == event_id and d["attempts"] == attempts and d["status"] == status
        for d in items))
    return next(d for d in items if d["event_id"] == event_id)


def taken_in(server, event_id: int, timeout: float = 15.0) -> None:
    """Once the queue's cursor has passed ``event_id``: what the event queues is in the queue
    by then (one transaction fills the queue and moves the cursor)."""
    store = server.kernel.state("webhooks").store
    deadline = time.monotonic() + timeout
    while store.cursor() < event_id:
        assert time.monotonic() < deadline, f"the queue never took in event {event_id}"
        time.sleep(0.02)


def fail_for_good(server, service, clock, receiver, hook_id: str, n: int) -> int:
    """An event whose delivery fails both its tries (the second a second of the clock later)."""
    receiver.answer(500, times=2)
    event = emit(server, "memory.created", n=n)
    tried(server, hook_id, event, 1)
    clock.now += 1
    service.sender.notify()
    tried(server, hook_id, event, 2, "failed")
    return event


# -- disabling: a sustained outage, not two failures far apart ------------------------------

def test_one_failure_long_ago_and_one_blip_now_do_not_disable_a_hook(make_server, receiver):
    """A delivery failed for good; the hook then had nothing to send for longer than
    disable_after_s; one 500 on the next event disabled it at once ("every try failed for
    1 min") and every event after it was lost. The blip is retried and delivered instead."""
    server = make_server(plugins=["auth", "webhooks"], config=SHORT)
    service = server.kernel.state("webhooks")
    service.clock = clock = Clock()
    hook = subscribe(server, receiver, events=["memory.*"])
    fail_for_good(server, service, clock, receiver, hook["id"], 0)
    assert hook_of(server, hook["id"])["failing_since"] is not None

    clock.now += 120  # quiet: no event at all, twice the window
    receiver.answer(500)  # one transient failure on the next event
    blip = emit(server, "memory.created", n=1)
    tried(server, hook["id"], blip, 1)
    got = hook_of(server, hook["id"])
    assert got["enabled"] is True and got["disabled_reason"] is None
    assert not [e for e in server.kernel.events.after(0) if e.kind == "webhook.disabled"]

    clock.now += 1
    service.sender.notify()
    later = [emit(server, "memory.created", n=n) for n in (2, 3, 4)]
    assert [r.json["id"] for r in receiver.wait(4)] == [blip, *later]
    got = hook_of(server, hook["id"])
    assert got["enabled"] is True and got["failing_since"] is None


def test_a_rarely_firing_hook_whose_endpoint_is_gone_is_still_disabled(make_server, receiver):
    """Two deliveries, two minutes apart, each failing every try with no success between:
    the hook is disabled when the second has used its last try — not at its first."""
    server = make_server(plugins=["auth", "webhooks"], config=SHORT)
    service = server.kernel.state("webhooks")
    service.clock = clock = Clock()
    hook = subscribe(server, receiver, events=["memory.*"])
    fail_for_good(server, service, clock, receiver, hook["id"], 0)
    started = hook_of(server, hook["id"])["failing_since"]
    assert hook_of(server, hook["id"])["enabled"] is True  # a minute has not passed

    clock.now += 120
    receiver.answer(500, times=2)
    second = emit(server, "memory.created", n=1)
    tried(server, hook["id"], second, 1)
    assert hook_of(server, hook["id"])["enabled"] is True  # it may yet go through
    clock.now += 1
    service.sender.notify()
    tried(server, hook["id"], second, 2, "failed")
    got = hook_of(server, hook["id"])
    assert got["enabled"] is False and got["failing_since"] == started
    assert got["disabled_reason"] == "every try failed for 1 min; last: answered 500"
    assert got["paused_at"] is None
    disabled = emitted(server, "webhook.disabled")
    assert [e.data["webhook_id"] for e in disabled] == [hook["id"]]


# -- pausing: what happens meanwhile is kept ------------------------------------------------

def test_a_paused_hook_keeps_what_happens_and_sends_it_in_order_on_resume(make_server,
                                                                         receiver):
    # one sending thread sends what is due in queue order: a later event's delivery to
    # another hook shows the paused hook's earlier ones were passed over, not still coming
    served = make_server(plugins=["auth", "webhooks"], config=FAST + "concurrency = 1\n")
    hook = subscribe(served, receiver, events=["memory.*"])
    first = emit(served, "memory.created", n=0)
    receiver.wait(1)
    paused = served.patch(f"/v1/webhooks/{hook['id']}", {"enabled": False})
    assert paused.status == 200 and paused.json["enabled"] is False
    during = [emit(served, "memory.created", n=n) for n in (1, 2, 3)]
    pending = settled(served, hook["id"], lambda items: sum(
        d["status"] == "pending" for d in items) == 3)
    assert sorted(d["event_id"] for d in pending if d["status"] == "pending") == during
    subscribe(served, receiver, events=["index.built"])
    witness = emit(served, "index.built")
    receiver.wait(1, kind="index.built")
    assert [r.json["id"] for r in receiver.received] == [first, witness]  # queued, not sent
    assert paused.json["disabled_reason"] == "paused by local"
    assert paused.json["paused_at"] is not None

    r = served.patch(f"/v1/webhooks/{hook['id']}", {"enabled": True})
    assert r.json["enabled"] is True and r.json["paused_at"] is None
    after = emit(served, "memory.created", n=4)
    assert [x.json["id"] for x in receiver.wait(5, kind="memory.created")] == \
        [first, *during, after]


def test_a_hook_paused_longer_than_keep_days_queues_no_more(make_server, receiver):
    """The bound: a forgotten pause holds the events of its first keep_days days, as many as
    an active hook's delivered ones kept that long, and never grows past them."""
    server = make_server(plugins=["auth", "webhooks"], config=FAST + "keep_days = 2\n")
    service = server.kernel.state("webhooks")
    service.clock = clock = Clock()
    hook = subscribe(server, receiver, events=["memory.*"])
    hook_url = f"/v1/webhooks/{hook['id']}"
    assert server.patch(hook_url, {"enabled": False}).status == 200
    kept = [emit(server, "memory.created", n=0)]
    clock.now += 2 * 86_400 - 60
    kept.append(emit(server, "memory.created", n=1))
    settled(server, hook["id"], lambda items: len(items) == 2)
    clock.now += 120  # paused for more than two days now
    taken_in(server, emit(server, "memory.created", n=2))
    assert sorted(d["event_id"] for d in deliveries(server, hook["id"])) == kept

    assert server.patch(hook_url, {"enabled": True}).status == 200
    after = emit(server, "memory.created", n=3)
    assert [x.json["id"] for x in receiver.wait(3)] == [*kept, after]


def test_a_hook_disabled_for_failing_queues_nothing_and_a_pause_does_not_change_that(
        make_server, receiver):
    server = make_server(plugins=["auth", "webhooks"], config=SHORT)
    service = server.kernel.state("webhooks")
    service.clock = clock = Clock()
    hook = subscribe(server, receiver, events=["memory.*"])
    fail_for_good(server, service, clock, receiver, hook["id"], 0)
    clock.now += 120
    lost = fail_for_good(server, service, clock, receiver, hook["id"], 1)
    assert hook_of(server, hook["id"])["enabled"] is False
    r = server.patch(f"/v1/webhooks/{hook['id']}", {"enabled": False})
    assert r.json["disabled_reason"].startswith("every try failed") and r.json["paused_at"] is None
    taken_in(server, emit(server, "memory.created", n=2))
    assert len(deliveries(server, hook["id"])) == 2
    assert server.patch(f"/v1/webhooks/{hook['id']}", {"enabled": True}).json["enabled"] is True
    r = server.post(f"/v1/webhooks/{hook['id']}/deliveries/"
                    f"{next(d['id'] for d in deliveries(server, hook['id']) if d['event_id'] == lost)}"
                    "/redeliver")
    assert r.status == 202
    assert [x.json["id"] for x in receiver.wait(1)] == [lost]


# -- rotating: every secret whose grace runs keeps signing ----------------------------------

def test_a_second_rotation_keeps_the_first_ones_grace(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    url = f"/v1/webhooks/{hook['id']}/rotate-secret"
    original = hook["secret"]
    first = served.post(url, {"keep_previous_s": 3600}).json
    second = served.post(url, {"keep_previous_s": 600}).json  # the first new one was lost
    receiver.secret = second["secret"]
    emit(served, "memory.created", n=0)
    got = receiver.wait(1)[-1]
    headers = receiver.headers[-1]
    assert verify_signature(original, got.body, headers)  # promised until the first's end
    assert verify_signature(first["secret"], got.body, headers)
    assert got.verified and len(got.signature.split(",")) == 3
    assert second["previous_secret_until"] < first["previous_secret_until"]
    assert second["previous_secrets_until"] == [second["previous_secret_until"],
                                                first["previous_secret_until"]]
    shown = hook_of(served, hook["id"])
    assert shown["previous_secrets_until"] == second["previous_secrets_until"]

    # at most four earlier secrets sign: a fifth grace is refused, naming the way out
    for _ in range(2):
        assert served.post(url, {"keep_previous_s": 60}).status == 200
    refused = served.post(url, {"keep_previous_s": 60})
    assert refused.status == 422
    error = refused.error["details"]["errors"][0]
    assert error["loc"] == ["body", "keep_previous_s"] and error["type"] == "secrets_in_grace"
    assert "keep_previous_s=0" in error["msg"]
    assert len(hook_of(served, hook["id"])["previous_secrets_until"]) == 4

    last = served.post(url).json  # no grace: every earlier secret is out at once
    assert last["previous_secret_until"] is None and last["previous_secrets_until"] == []
    receiver.secret = last["secret"]
    emit(served, "memory.created", n=1)
    got = receiver.wait(2)[-1]
    assert got.verified and len(got.signature.split(",")) == 1
    assert not verify_signature(original, got.body, receiver.headers[-1])


def test_a_grace_that_has_ended_stops_signing_and_frees_its_place(served, receiver):
    service = served.kernel.state("webhooks")
    service.clock = clock = Clock()
    hook = subscribe(served, receiver, events=["memory.*"])
    url = f"/v1/webhooks/{hook['id']}/rotate-secret"
    for keep in (60, 600, 600, 600):
        assert served.post(url, {"keep_previous_s": keep}).status == 200
    clock.now += 61  # the first grace is over: its secret no longer signs, a place is free
    assert len(hook_of(served, hook["id"])["previous_secrets_until"]) == 3
    r = served.post(url, {"keep_previous_s": 600})
    assert r.status == 200 and len(r.json["previous_secrets_until"]) == 4
    receiver.secret = r.json["secret"]
    emit(served, "memory.created", n=0)
    got = receiver.wait(1)[-1]
    assert not verify_signature(hook["secret"], got.body, receiver.headers[-1])
    assert got.verified and len(got.signature.split(",")) == 5


def test_rotations_at_once_each_keep_the_secret_they_answered_signing(served, receiver):
    """Rotations of one hook at once go one at a time: each answered secret signs (the last)
    or is in grace (replaced by a later one), and the cap holds. Under PostgreSQL's READ
    COMMITTED two read the same secrets, and the later write dropped the other's new one,
    answered 200 all the same."""
    for n in range(3):
        hook = subscribe(served, receiver, events=["memory.*"])
        url = f"/v1/webhooks/{hook['id']}/rotate-secret"
        start = threading.Barrier(6)
        answers: list = []

        def rotate():
            start.wait()
            answers.append(served.post(url, {"keep_previous_s": 600}))

        threads = [threading.Thread(target=rotate) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(r.status for r in answers) == [200] * 4 + [422] * 2
        emit(served, "memory.created", n=n)
        got = receiver.wait(n + 1)[-1]
        headers = receiver.headers[-1]
        assert len(got.signature.split(",")) == 5  # the current secret and four in grace
        for secret in [hook["secret"], *(r.json["secret"] for r in answers if r.status == 200)]:
            assert verify_signature(secret, got.body, headers)
        served.delete(f"/v1/webhooks/{hook['id']}")

# -- a store of the release before ----------------------------------------------------------

def _old_store(home):
    """webhooks.db (or its PostgreSQL tables) as the release before this one left it."""
    if SESSION.backend == "postgres":
        from kernel.pg import PgBackend
        backend = PgBackend(home_dsn(home), 1)
        return backend.database("webhooks", PG_MIGRATIONS[:1]), backend.close
    from kernel.storage import Database
    db = Database(home / FILE, MIGRATIONS[:2])
    return db, db.close


def test_a_store_of_the_last_release_keeps_its_grace_and_its_pause(tmp_path, receiver):
    home = tmp_path / "home"
    home.mkdir()
    now = time.time()
    db, close = _old_store(home)
    try:
        with db.transaction() as conn:
            for hook_id, secret, previous, enabled, reason in (
                    ("wh_0000000000000001", "whsec_new", "whsec_old", 1, None),
                    ("wh_0000000000000002", "whsec_paused", None, 0, "disabled by alice"),
                    ("wh_0000000000000003", "whsec_off", None, 0, "every try failed for 24 h")):
                conn.execute(
                    "INSERT INTO hooks (id, url, events, projects, description, secret, "
                    "previous_secret, previous_until, enabled, disabled_reason, owner_id, "
                    "owner_role, owner_kind, owner_projects, after_event, created_at, "
                    "updated_at) VALUES (?, ?, '[\"memory.*\"]', NULL, '', ?, ?, ?, ?, ?, "
                    "'local', 'admin', 'token', NULL, 0, ?, ?)",
                    (hook_id, receiver.url, secret, previous, now + 3600 if previous else None,
                     enabled, reason, now, now))
    finally:
        close()
    server = LocalServer(home, **SERVED, config=FAST).start()
    try:
        rotated, paused, off = (hook_of(server, f"wh_000000000000000{n}") for n in (1, 2, 3))
        assert rotated["previous_secret_until"] is not None
        assert rotated["previous_secrets_until"] == [rotated["previous_secret_until"]]
        assert paused["paused_at"] is not None and off["paused_at"] is None
        receiver.secret = "whsec_old"
        event = emit(server, "memory.created", n=0)
        got = receiver.wait(1)
        assert got[0].verified and verify_signature("whsec_new", got[0].body, receiver.headers[0])
        settled(server, paused["id"], lambda items: [d["event_id"] for d in items] == [event])
        assert deliveries(server, off["id"]) == []
    finally:
        server.stop()


def test_events_after_kernel_db_is_restored_from_an_older_backup_are_delivered(
        tmp_path, receiver, backend):
    """docs/operations.md restores ``kernel.db`` alone: its event ids are handed out again, and
    a queue that had taken in the newer ids would wait for the log to pass them in silence."""
    if backend != "sqlite":
        pytest.skip("a file restored on its own: PostgreSQL keeps the log and the queue together")
    home = tmp_path / "home"
    server = LocalServer(home, **SERVED, config=FAST).start()
    try:
        subscribe(server, receiver, events=["memory.*"])
        emit(server, "memory.created", n=0)
        receiver.wait(1)
        backup = sqlite3.connect(tmp_path / "kernel-backup.db")
        with closing(sqlite3.connect(home / "kernel.db")) as live:
            live.backup(backup)
        backup.close()
        newest = max(emit(server, "memory.created", n=n) for n in (1, 2, 3))
        receiver.wait(4)
    finally:
        server.stop()
    for suffix in ("", "-wal", "-shm"):
        (home / f"kernel.db{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "kernel-backup.db", home / "kernel.db")
    server = LocalServer(home, **SERVED, config=FAST).start()
    try:
        again = emit(server, "memory.created", n=4)
        assert again < newest  # the restored log numbers it as one the queue had taken in
        assert receiver.wait(5)[-1].json["data"] == {"n": 4}
        assert (f"the event log ends at #{again - 1}, before the #{newest} the deliveries had "
                f"reached") in server.output()
    finally:
        server.stop()
