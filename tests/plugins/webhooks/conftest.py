"""Fixtures of the webhooks tests: a receiver, and servers whose sender polls fast and may
post to 127.0.0.1. Every test runs on both storage backends (tests/conftest.py ``backend``)."""

from __future__ import annotations

import time

import pytest

from neuralmind import EventKind, hookimpl
from tests.plugins.webhooks.receiver import Receiver

# fast polls and retries, and 127.0.0.1 allowed: the receiver is a local thread
FAST = """
[webhooks]
allow_private = ["127.0.0.1/32"]
poll_s = 0.05
retry_base_s = 0.2
retry_max_s = 1
timeout_s = 0.5
lease_s = 2
"""


class TheirKinds:
    """The event kinds of plugins these servers leave out (memory, index, auth's CLI), which
    the tests emit as those plugins would: declared here as those plugins declare them."""

    @hookimpl
    def register_event_kinds(self, kernel):
        return [EventKind(kind, "emitted by the tests")
                for kind in ("memory.created", "memory.deleted", "index.built")]


# what a LocalServer of these tests serves: LocalServer(home, **SERVED, config=FAST)
SERVED = {"plugins": ["auth", "webhooks"], "extra_plugins": [TheirKinds()]}


@pytest.fixture
def make_server(make_server):
    """The servers of tests/conftest.py, with :class:`TheirKinds` in process."""
    def make(serving: bool = False, **kw):
        if not serving:
            kw.setdefault("extra_plugins", [TheirKinds()])
        return make_server(serving=serving, **kw)
    return make


@pytest.fixture(scope="module", autouse=True)
def both_backends(backend) -> str:
    return backend


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def subscribe(server, receiver: Receiver, events=("*",), projects=None, **extra) -> dict:
    """A hook from ``server`` to ``receiver``, whose secret the receiver then checks with."""
    r = server.post("/v1/webhooks", {"url": receiver.url, "events": list(events),
                                     "projects": projects, **extra})
    assert r.status == 201, r.body
    receiver.secret = r.json["secret"]
    return r.json


@pytest.fixture
def served(make_server):
    """The auth and webhooks plugins served from this process with the fast settings."""
    return make_server(plugins=["auth", "webhooks"], config=FAST)


def emitted(server, kind: str, timeout: float = 15.0) -> list:
    """The kernel's events of ``kind``, once there is one: the sender records a try and then
    emits what the try caused (``webhook.disabled``), so the event follows the hook's state."""
    deadline = time.monotonic() + timeout
    while not (found := [e for e in server.kernel.events.after(0) if e.kind == kind]):
        assert time.monotonic() < deadline, f"no {kind} event in {timeout} s"
        time.sleep(0.02)
    return found
