"""The busy server several tier2 test modules read: made once per session."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.embeddings import fake_embedder
from tests.plugins.tier2_bridge.helpers import MEMORIES, PLUGINS, PROJECTS, settled
from tests.support import Server


@pytest.fixture(scope="session")
def busy(tmp_path_factory):
    """A 4-worker server after 16 clients registered projects, then at once created memories
    in some and removed others. The fake embedder keeps the memory plugin's background
    embedding off the ONNX model (this suite is about the audit, not vectors)."""
    root = tmp_path_factory.mktemp("busy")
    dirs = [root / "repos" / f"r{i:03d}" for i in range(PROJECTS)]
    for d in dirs:
        d.mkdir(parents=True)
    server = Server(root / "home", plugins=["memory", "fake_embedder", *PLUGINS], workers=4,
                    env=fake_embedder.server_env(root)).start()
    try:
        with ThreadPoolExecutor(16) as pool:
            created = list(pool.map(lambda d: server.post("/v1/projects", {"path": str(d)}), dirs))
            assert [r.status for r in created] == [201] * PROJECTS
            pids = [r.json["id"] for r in created]
            kept = pids[1::2][:4]
            writes = [pool.submit(server.post, f"/v1/projects/{kept[i % 4]}/memories",
                                  {"title": f"decision {i}", "rationale": f"because {i}"})
                      for i in range(MEMORIES)]
            writes += [pool.submit(server.delete, f"/v1/projects/{pid}") for pid in pids[::2]]
            statuses = [w.result().status for w in writes]
            assert statuses == [201] * MEMORIES + [204] * (PROJECTS // 2)
        settled(server.home)
        yield server
    finally:
        server.stop()
