"""Webhooks of two servers sharing one PostgreSQL database (two machines): one queue and one
cursor over the shared event log, so an event written on either server is delivered once, in
event order; one sender among both (the kernel lease ``webhooks.sender``), which hands over
to the other server when its own stops."""

from __future__ import annotations

import threading

import pytest

from tests.plugins.webhooks.conftest import FAST, SERVED, subscribe
from tests.support import LocalServer, fresh_pg_dsn

pytestmark = pytest.mark.postgres_only("two servers on a database it names itself")


@pytest.fixture
def pair(tmp_path):
    config = FAST + f'[storage]\nbackend = "postgres"\ndsn = "{fresh_pg_dsn()}"\n'
    servers = [LocalServer(tmp_path / f"machine{i}", **SERVED,
                           config=config).start() for i in (1, 2)]
    yield servers
    for server in servers:
        server.stop()


def emit(server, n: int) -> None:
    server.kernel.emit("memory.created", actor="alice", data={"n": n})


def test_two_servers_deliver_each_event_once_in_order_and_hand_the_sender_over(pair, receiver):
    one, two = pair
    hook = subscribe(one, receiver, events=["memory.*"])
    assert two.get(f"/v1/webhooks/{hook['id']}").json["url"] == receiver.url  # one store
    for n in range(10):
        emit(pair[n % 2], n)
    got = receiver.wait(10)
    assert [r.json["data"]["n"] for r in got] == list(range(10))
    assert [r.json["id"] for r in got] == sorted(r.json["id"] for r in got)
    assert len({r.delivery for r in got}) == 10 and all(r.verified for r in got)

    lease = one.kernel.leases.get("webhooks.sender")
    sender = next(s for s in pair if s.kernel.state("webhooks").sender.holder == lease["owner"])
    other = two if sender is one else one
    sender.stop()  # hands the lease over at once
    for n in range(10, 14):
        emit(other, n)
    got = receiver.wait(14)
    assert [r.json["data"]["n"] for r in got] == list(range(14))
    assert len({r.delivery for r in got}) == 14
    assert other.kernel.leases.get("webhooks.sender")["owner"] == \
        other.kernel.state("webhooks").sender.holder


def test_deleting_a_hook_while_the_sender_records_its_delivery_does_not_deadlock(pair,
                                                                                receiver):
    """The sender locks a delivery, then its hook; removing the hook locks both the same way
    round (a cascade from the hook, the other way, made PostgreSQL abort one of the two)."""
    one, _ = pair
    hook = subscribe(one, receiver)
    assert one.post(f"/v1/webhooks/{hook['id']}/test").status == 200  # a delivery row
    store = one.kernel.state("webhooks").store
    removed: list = []
    with store.db.transaction() as conn:  # as the sender records an answer
        conn.execute("UPDATE deliveries SET attempts = attempts + 1 WHERE hook_id = ?",
                     (hook["id"],))
        remover = threading.Thread(target=lambda: removed.append(store.remove_hook(hook["id"])))
        remover.start()
        remover.join(0.5)  # it waits for the delivery's lock (holding nothing the sender needs)
        conn.execute("UPDATE hooks SET last_success_at = 1 WHERE id = ?", (hook["id"],))
    remover.join()
    assert removed == [True]
    assert one.get(f"/v1/webhooks/{hook['id']}").status == 404
