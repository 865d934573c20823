"""Deliveries to a real local receiver: signed, in order, retried after a 500, a timeout and a
redirect, failed after the last try, redelivered, pinged, disabled after the failure window
(the service's clock moved by the test), durable across a restart. In process: the kernel's
app served on a thread, its sender thread doing the sending."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from neuralmind.client import verify_signature, webhook_signature
from tests.plugins.webhooks.conftest import FAST, SERVED, emitted, subscribe
from tests.support import LocalServer


def emit(server, kind: str, project: str | None = None, **data) -> int:
    """An event committed by the kernel, as a plugin's write would record it; its id."""
    server.kernel.emit(kind, project=project, actor="alice", data=data)
    return server.kernel.events.last_id()


def deliveries(server, hook_id: str, **query) -> list[dict]:
    qs = "&".join(f"{k}={v}" for k, v in {"limit": 200, **query}.items())
    r = server.get(f"/v1/webhooks/{hook_id}/deliveries?{qs}")
    assert r.status == 200, r.body
    return r.json["items"]


def settled(server, hook_id: str, predicate, timeout: float = 15.0) -> list[dict]:
    """The hook's deliveries once ``predicate(deliveries)`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        items = deliveries(server, hook_id)
        if predicate(items):
            return items
        assert time.monotonic() < deadline, f"never settled: {items}"
        time.sleep(0.05)


class Clock:
    """The service's clock, moved by the test (the sender's waits stay real)."""

    def __init__(self):
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_a_delivery_is_signed_and_carries_the_event_as_the_log_holds_it(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    eid = emit(served, "memory.created", id="m1", title="Use WAL")
    got = receiver.wait(1)[0]
    headers = receiver.headers[-1]
    event = served.kernel.events.after(eid - 1, 1)[0]
    assert got.event == "memory.created" and got.verified
    assert json.loads(got.body) == event.as_dict()
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("NeuralMind-Webhooks/")
    assert got.delivery.startswith("dl_")
    assert got.signature == webhook_signature(hook["secret"], got.timestamp, got.body)
    assert abs(int(got.timestamp) - time.time()) < 60
    assert hook["secret"].encode() not in got.body
    # what a receiver must refuse: another secret, a changed body, an old timestamp
    assert not verify_signature("whsec_other", got.body, headers)
    assert not verify_signature(hook["secret"], got.body.replace(b"WAL", b"WAX"), headers)
    assert not verify_signature(hook["secret"], got.body, headers, now=int(got.timestamp) + 301)
    assert verify_signature(hook["secret"], got.body, headers, now=int(got.timestamp) + 299)


def test_only_the_kinds_and_projects_asked_for_arrive(served, receiver, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = served.register(tmp_path / "a"), served.register(tmp_path / "b")
    subscribe(served, receiver, events=["memory.*", "index.built"], projects=[a])
    emit(served, "memory.created", b, id="in-b")
    emit(served, "memory.deleted", None, id="no-project")
    emit(served, "jobs.cancelled", a)
    emit(served, "index.built", a, files=3)
    emit(served, "memory.created", a, id="in-a")
    got = receiver.wait(2)
    time.sleep(0.3)  # nothing else is on its way
    assert [(r.event, r.json["project_id"]) for r in receiver.taken()] == [
        ("index.built", a), ("memory.created", a)]
    assert all(r.verified for r in got)


def test_each_hook_gets_its_events_in_order_across_retries(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    receiver.answer(200, times=3)
    receiver.answer(500, times=2)  # the 4th event fails twice: the ones after it wait
    ids = [emit(served, "memory.created", n=n) for n in range(25)]
    got = receiver.wait(25)
    assert [r.json["id"] for r in got] == ids
    assert [r.answered for r in receiver.received[3:6]] == [500, 500, 200]
    assert len({r.delivery for r in receiver.received[3:6]}) == 1  # one delivery, three tries
    items = settled(served, hook["id"], lambda items: len(items) == 25)
    fourth = next(d for d in items if d["event_id"] == ids[3])
    assert fourth["status"] == "delivered" and fourth["attempts"] == 3
    assert fourth["last_status_code"] == 200 and fourth["last_error"] is None


def test_a_timeout_is_a_failed_try_and_the_same_delivery_is_sent_again(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    receiver.answer(200, delay=1.5)  # past the 0.5 s timeout
    emit(served, "memory.created", id="slow")
    first = settled(served, hook["id"], lambda items: items and items[0]["attempts"] == 1)[0]
    waited = (dt.datetime.fromisoformat(first["next_attempt_at"])
              - dt.datetime.fromisoformat(first["last_attempt_at"])).total_seconds()
    assert waited >= first["last_latency_ms"] / 1000 + 0.8 * 0.2 - 0.002  # from the failure on
    items = settled(served, hook["id"], lambda items: items and items[0]["status"] == "delivered")
    assert items[0]["attempts"] == 2
    both = receiver.wait_received(2)  # the late answer to the first try is recorded last
    assert len({r.delivery for r in both}) == 1 and all(r.verified for r in both)


def test_a_redirect_is_a_failed_try_and_is_not_followed(served, receiver):
    clock = Clock()
    served.kernel.state("webhooks").clock = clock
    hook = subscribe(served, receiver, events=["memory.*"])
    receiver.answer(301)
    emit(served, "memory.created", id="moved")
    first = settled(served, hook["id"], lambda items: items and items[0]["attempts"] == 1)[0]
    assert first["status"] == "pending" and first["last_status_code"] == 301
    assert first["last_error"] == "answered 301: redirects are not followed"
    clock.now += 60
    served.kernel.state("webhooks").sender.notify()
    receiver.wait(1)
    assert [r.answered for r in receiver.received] == [301, 200]  # nothing went to Location


def test_after_the_last_try_a_delivery_fails_and_the_next_one_goes(make_server, receiver):
    server = make_server(plugins=["auth", "webhooks"], config=FAST + "attempts = 2\n")
    hook = subscribe(server, receiver, events=["memory.*"])
    receiver.answer(503, times=2)
    first = emit(server, "memory.created", id="lost")
    second = emit(server, "memory.created", id="next")
    assert [r.json["id"] for r in receiver.wait(1)] == [second]
    failed = deliveries(server, hook["id"], status="failed")
    assert [(d["event_id"], d["attempts"], d["last_status_code"]) for d in failed] == [
        (first, 2, 503)]
    assert failed[0]["next_attempt_at"] is None and "503" in failed[0]["last_error"]

    # redelivery: the same id and body, at the end of the queue
    r = server.post(f"/v1/webhooks/{hook['id']}/deliveries/{failed[0]['id']}/redeliver")
    assert r.status == 202 and r.json["status"] == "pending" and r.json["attempts"] == 0
    again = receiver.wait(2)[-1]
    assert again.delivery == failed[0]["id"] and again.json["id"] == first
    assert server.post(f"/v1/webhooks/{hook['id']}/deliveries/dl_{'0' * 24}/redeliver"
                       ).error["code"] == "delivery_not_found"


def test_redelivering_a_queued_delivery_is_a_conflict(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    clock = Clock()
    served.kernel.state("webhooks").clock = clock
    receiver.answer(500)
    emit(served, "memory.created", id="waits")
    items = settled(served, hook["id"], lambda items: items and items[0]["attempts"] == 1)
    r = served.post(f"/v1/webhooks/{hook['id']}/deliveries/{items[0]['id']}/redeliver")
    assert r.status == 409 and r.error["code"] == "delivery_pending"
    assert "still queued" in r.error["message"]


def test_ping_answers_what_the_receiver_said(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    r = served.post(f"/v1/webhooks/{hook['id']}/test")
    assert r.status == 200, r.body
    assert r.json["kind"] == "ping" and r.json["status"] == "delivered"
    assert r.json["last_status_code"] == 200 and r.json["last_latency_ms"] > 0
    ping = [x for x in receiver.taken() if x.event == "ping"]
    assert ping and ping[0].verified and ping[0].json["data"] == {"webhook_id": hook["id"]}
    receiver.answer(500)
    r = served.post(f"/v1/webhooks/{hook['id']}/test")
    assert r.json["status"] == "failed" and r.json["last_status_code"] == 500
    time.sleep(0.3)
    assert [x.answered for x in receiver.received if x.event == "ping"] == [200, 500]  # no retry
    assert served.get(f"/v1/webhooks/{hook['id']}").json["failing_since"] is None


def test_a_hook_failing_for_24_hours_is_disabled_and_an_event_says_so(served, receiver):
    clock = Clock()
    service = served.kernel.state("webhooks")
    service.clock = clock
    hook = subscribe(served, receiver, events=["memory.*"])
    receiver.answer(500, times=1000)
    emit(served, "memory.created", id="never")
    settled(served, hook["id"], lambda items: items and items[0]["attempts"] == 1)
    started = served.get(f"/v1/webhooks/{hook['id']}").json["failing_since"]
    assert started is not None

    clock.now += 23 * 3600  # a try 23 h into the streak leaves the hook on
    service.sender.notify()
    settled(served, hook["id"], lambda items: items and items[0]["attempts"] == 2)
    assert served.get(f"/v1/webhooks/{hook['id']}").json["enabled"] is True

    clock.now += 2 * 3600  # 25 h: the next failed try disables it
    service.sender.notify()
    settled(served, hook["id"], lambda items: items and items[0]["attempts"] == 3)
    got = served.get(f"/v1/webhooks/{hook['id']}").json
    assert got["enabled"] is False and got["failing_since"] == started
    assert "every try failed for 24 h" in got["disabled_reason"]
    disabled = emitted(served, "webhook.disabled")
    assert [e.data["webhook_id"] for e in disabled] == [hook["id"]]
    assert disabled[0].data["failing_since"] == started and "500" in disabled[0].data["last_error"]

    clock.now += 3600  # disabled: neither tried nor queued
    tries = len(receiver.received)
    emit(served, "memory.created", id="while-off")
    service.sender.notify()
    time.sleep(0.3)
    assert len(receiver.received) == tries

    kept = deliveries(served, hook["id"])[0]["id"]
    r = served.post(f"/v1/webhooks/{hook['id']}/deliveries/{kept}/redeliver")
    assert r.status == 409 and r.error["code"] == "webhook_disabled"
    assert "enable it (PATCH enabled=true, or `neuralmind webhook update" in r.error["message"]

    # enabled again: the streak is forgotten and what it kept pending goes now
    receiver.reset()
    r = served.patch(f"/v1/webhooks/{hook['id']}", {"enabled": True})
    assert r.status == 200 and r.json["enabled"] is True and r.json["failing_since"] is None
    assert [x.json["data"]["id"] for x in receiver.wait(1)] == ["never"]
    time.sleep(0.3)
    assert len(receiver.taken()) == 1  # the event of the disabled time was never queued


def test_a_success_ends_the_failure_streak(served, receiver):
    clock = Clock()
    service = served.kernel.state("webhooks")
    service.clock = clock
    hook = subscribe(served, receiver, events=["memory.*"])

    def fail_once_then_deliver(hours_later: float, count: int) -> None:
        receiver.answer(500)
        event = emit(served, "memory.created", n=count)
        # this event's delivery: the last one's success may not be recorded yet (the receiver
        # counts it when it answers), and it too shows one try until then
        settled(served, hook["id"], lambda items: any(
            d["event_id"] == event and d["attempts"] == 1 for d in items))
        clock.now += hours_later * 3600
        service.sender.notify()
        receiver.wait(count)

    fail_once_then_deliver(20, 1)
    clock.now += 20 * 3600
    fail_once_then_deliver(5, 2)  # 45 h after the first failure, 5 h into this streak
    assert served.get(f"/v1/webhooks/{hook['id']}").json["enabled"] is True


def test_a_rotated_secret_signs_at_once_and_the_old_one_only_while_kept(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    old = hook["secret"]
    r = served.post(f"/v1/webhooks/{hook['id']}/rotate-secret", {"keep_previous_s": 600})
    assert r.status == 200 and r.json["secret"] != old and r.json["previous_secret_until"]
    new = r.json["secret"]
    receiver.secret = new
    emit(served, "memory.created", id="both")
    got = receiver.wait(1)[-1]
    headers = receiver.headers[-1]
    assert got.verified and verify_signature(old, got.body, headers)
    assert len(got.signature.split(",")) == 2

    r = served.post(f"/v1/webhooks/{hook['id']}/rotate-secret")  # no grace: the old one is out
    assert r.json["previous_secret_until"] is None
    receiver.secret = r.json["secret"]
    emit(served, "memory.created", id="one")
    got = receiver.wait(2)[-1]
    assert got.verified and not verify_signature(new, got.body, receiver.headers[-1])
    assert "secret" not in served.get(f"/v1/webhooks/{hook['id']}").json


def test_deliveries_survive_a_restart(tmp_path, receiver):
    home = tmp_path / "home"
    first = LocalServer(home, **SERVED, config=FAST).start()
    try:
        hook = subscribe(first, receiver, events=["memory.*"])
        receiver.answer(500, times=1000)
        ids = [emit(first, "memory.created", n=n) for n in range(5)]
        settled(first, hook["id"], lambda items: len(items) == 5 and items[-1]["attempts"] >= 1)
    finally:
        first.stop()
    receiver.reset()
    again = LocalServer(home, **SERVED, config=FAST).start()
    try:
        assert [r.json["id"] for r in receiver.wait(5)] == ids
    finally:
        again.stop()


@pytest.mark.parametrize("tries, low, high", [(1, 8, 12), (2, 16, 24), (11, 8_192, 12_288),
                                              (12, 16_384, 21_600), (40, 17_280, 21_600)])
def test_back_off_doubles_from_10_s_to_6_h_with_jitter(make_server, tries, low, high):
    server = make_server(plugins=["auth", "webhooks"])
    service = server.kernel.state("webhooks")
    waits = [service.backoff(tries) for _ in range(200)]
    assert low <= min(waits) and max(waits) <= high
    assert len(set(waits)) > 100  # spread, not one value


def test_a_busy_hook_keeps_its_connection_and_one_closed_while_idle_costs_no_try(served):
    from tests.plugins.webhooks.receiver import Receiver
    receiver = Receiver(idle_timeout=0.3)
    try:
        hook = subscribe(served, receiver, events=["memory.*"])
        for n in range(10):
            emit(served, "memory.created", n=n)
        receiver.wait(10)
        assert len(receiver.connections) <= 2  # a backlog drains on one kept connection
        time.sleep(0.6)  # the receiver has closed it by now
        emit(served, "memory.created", n=10)
        receiver.wait(11)
        # the receiver has the 11th before the sender has recorded its answer
        items = settled(served, hook["id"], lambda items: len(items) == 11 and all(
            d["status"] != "pending" for d in items))
        assert all(d["status"] == "delivered" and d["attempts"] == 1 for d in items)
    finally:
        receiver.stop()


@pytest.mark.parametrize("seconds,said", [(86_400, "24 h"), (5_400, "90 min"), (4, "4 s"),
                                          (36_000, "10 h"), (0.5, "0.5 s")])
def test_a_disabling_window_reads_in_its_own_unit(seconds, said):
    from plugins.webhooks.service import _span
    assert _span(seconds) == said  # not "0.00111111 h" for a 4-second window


def test_slow_receivers_backlogs_do_not_keep_another_hook_waiting(make_server):
    """Four hooks to a slow receiver with a backlog each held every sending thread until
    their backlogs were through, and a fifth hook's event waited behind them all: a hook now
    gives its thread up after a second of sending, so the fifth is sent long before."""
    from tests.plugins.webhooks.receiver import Receiver
    served = make_server(**SERVED, config=FAST.replace("timeout_s = 0.5", "timeout_s = 5")
                         .replace("lease_s = 2", "lease_s = 10"))
    slow, fast = Receiver(), Receiver()
    try:
        slow.answer(200, times=1000, delay=0.4)
        for _ in range(4):
            subscribe(served, slow, events=["memory.*"])
        for n in range(5):  # 5 deliveries × 4 hooks × 0.4 s: 8 s of backlog on 4 threads
            emit(served, "memory.created", n=n)
        slow.wait_received(4)
        subscribe(served, fast, events=["index.built"])
        emit(served, "index.built", n=99)
        fast.wait(1)
        assert len(slow.received) < 20 - 4  # not behind the whole backlog
        slow.wait(20, timeout=30)  # and the backlog goes out whole
    finally:
        slow.stop(), fast.stop()
