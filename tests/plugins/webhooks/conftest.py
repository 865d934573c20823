"""Fixtures of the webhooks tests: the plugin found through an entry point, a receiver, and
servers whose sender polls fast and may post to 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.plugins.webhooks.receiver import Receiver
from tests.support import plugin_site, pythonpath

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


@pytest.fixture(scope="session", autouse=True)
def webhooks_entry_point(tmp_path_factory):
    """# until the entry point is installed: the ``webhooks`` entry point this tree declares
    in pyproject.toml, on sys.path here and (through ``env``) on a real server's PYTHONPATH.
    Drop this fixture once the editable install is refreshed."""
    site = plugin_site(tmp_path_factory.mktemp("webhooks-site"), "neuralmind-webhooks-dev",
                       {"webhooks": "plugins.webhooks.plugin"})
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(site))
        yield {"PYTHONPATH": pythonpath(site)}


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
