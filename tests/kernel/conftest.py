"""Kernel test set-up: the auth and third-party example plugins (GET /v1/hello, a sleeping
job), in this process for most tests and under 2-worker gunicorn for those about workers.
Every test runs on both storage backends (tests/conftest.py ``backend``)."""

from __future__ import annotations

import pytest

from tests.support import LocalServer, Server

CONFIG = "[kernel]\nsse_heartbeat_s = 0.5\n"


@pytest.fixture(scope="module", autouse=True)
def both_backends(backend) -> str:
    return backend


@pytest.fixture(scope="module")
def kapp(tmp_path_factory, example_plugin, backend):
    """The kernel with the auth and example plugins, served from this process."""
    with LocalServer(tmp_path_factory.mktemp("kapp") / "home", plugins=["auth", "example"],
                     config=CONFIG) as server:
        yield server


@pytest.fixture(scope="session")
def kservers(tmp_path_factory, example_plugin):
    """One 2-worker gunicorn per backend for the session, started on first use."""
    started: dict[str, Server] = {}

    def get(backend: str) -> Server:
        if backend not in started:
            home = tmp_path_factory.mktemp(f"khome-{backend}")
            started[backend] = Server(home / "home", plugins=["auth", "example"], workers=2,
                                      env={"HOME": str(home), **example_plugin},
                                      config=CONFIG).start()
        return started[backend]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(scope="module")
def kserver(kservers, backend):
    """The 2-worker gunicorn with the same plugins, for what only workers show: an event
    stream fed by both, any worker answering for a job, chunked bodies as gunicorn reads them."""
    return kservers(backend)
