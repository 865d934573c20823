"""Kernel test set-up: the auth and third-party example plugins (GET /v1/hello, a sleeping
job), in this process for most tests and under 2-worker gunicorn for those about workers."""

from __future__ import annotations

import pytest

from tests.support import LocalServer, Server

CONFIG = "[kernel]\nsse_heartbeat_s = 0.5\n"


@pytest.fixture(scope="module")
def kapp(tmp_path_factory, example_plugin):
    """The kernel with the auth and example plugins, served from this process."""
    with LocalServer(tmp_path_factory.mktemp("kapp") / "home", plugins=["auth", "example"],
                     config=CONFIG) as server:
        yield server


@pytest.fixture(scope="session")
def kserver(tmp_path_factory, example_plugin):
    """One 2-worker gunicorn with the same plugins, for what only workers show: an event
    stream fed by both, any worker answering for a job, chunked bodies as gunicorn reads them."""
    home = tmp_path_factory.mktemp("khome")
    with Server(home / "home", plugins=["auth", "example"], workers=2,
                env={"HOME": str(home), **example_plugin}, config=CONFIG) as server:
        yield server
