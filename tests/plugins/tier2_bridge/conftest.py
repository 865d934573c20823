"""The busy server several tier2 test modules read: made once per session."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.plugins.tier2_bridge.helpers import PLUGINS, PROJECTS, settled
from tests.support import Server


@pytest.fixture(scope="session")
def busy(tmp_path_factory):
    """A 4-worker server after concurrent registrations and removals from 16 clients."""
    root = tmp_path_factory.mktemp("busy")
    dirs = [root / "repos" / f"r{i:03d}" for i in range(PROJECTS)]
    for d in dirs:
        d.mkdir(parents=True)
    server = Server(root / "home", plugins=PLUGINS, workers=4).start()
    try:
        with ThreadPoolExecutor(16) as pool:
            created = list(pool.map(lambda d: server.post("/v1/projects", {"path": str(d)}), dirs))
            assert [r.status for r in created] == [201] * PROJECTS
            gone = list(pool.map(lambda r: server.delete(f"/v1/projects/{r.json['id']}"),
                                 created[::2]))
            assert [r.status for r in gone] == [204] * (PROJECTS // 2)
        settled(server.home)
        yield server
    finally:
        server.stop()
