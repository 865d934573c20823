"""A removed project's memories leave the process (the kernel's ``forget_project``): its
store, its vectors and ANN index, its gathered recalls. Kept, a long-running server held
every removed project's memory.db open (~10 descriptors and ~0.9 MB a project), and a project
removed and registered again after its folder was made anew was 409
``project_state_replaced`` until a restart."""

from __future__ import annotations

import gc
import shutil
import weakref

import pytest

from plugins.memory.plugin import memories
from tests.kernel.test_forget_projects import open_under
from tests.plugins.memory.conftest import Api, start

# a low threshold: the ANN index (its files mapped, on SQLite) serves this module's searches
SETTINGS = {"decay_sweep_hours": 0, "ann_min_records": 20}


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    srv = start(tmp_path_factory.mktemp("forget-home"), memory=SETTINGS)
    yield srv
    srv.stop()


def mapped_under(folder) -> list[str]:
    """The files this process maps inside ``folder`` (the ANN index's graph and arrays)."""
    gc.collect()
    with open("/proc/self/maps") as maps:
        return sorted({line.split(None, 5)[5].strip() for line in maps
                       if len(line.split(None, 5)) == 6
                       and line.split(None, 5)[5].startswith(f"{folder}/")})


def used(server, folder) -> tuple[Api, dict]:
    """A project with memories, searched every way: its store, vectors and index in use."""
    api = Api(server, folder)
    r = server.post(api.url(tail="batch"), {"items": [
        {"op": "create", "title": f"Cache sessions in store {i}",
         "rationale": f"Measured latency of store {i} under load."} for i in range(30)]})
    assert r.status == 200, r.body
    api.embedded()
    service = memories(server.kernel)
    for mode in ("semantic", "semantic", "hybrid"):  # a build starts; then its files serve
        assert api.search("cache the sessions in a store", mode=mode)["results"]
        service.searcher.ann.wait()
    return api, service


def test_removing_a_project_lets_go_of_its_memories(server, tmp_path, backend):
    folder = tmp_path / "proj"
    folder.mkdir()
    api, service = used(server, folder)
    project = server.kernel.projects.get(api.pid)
    store = weakref.ref(service.store(project))
    vectors = weakref.ref(service.searcher.index(store(), server.kernel.embedder))
    if backend == "sqlite":
        assert open_under(folder / ".neuralmind") and mapped_under(folder / ".neuralmind")
    hit = api.search("cache the sessions in a store", mode="keyword")["results"][0]["id"]
    del project

    assert server.delete(f"/v1/projects/{api.pid}").status == 204
    assert open_under(folder / ".neuralmind") == []
    assert mapped_under(folder / ".neuralmind") == []
    assert store() is None and vectors() is None  # nothing of it is kept
    # the recalls gathered before the removal were written, not dropped
    assert Api(server, folder).get(hit)["access_count"] >= 1


def test_a_project_registered_again_in_a_new_folder_takes_memories_at_once(server, tmp_path,
                                                                           backend):
    folder = tmp_path / "proj"
    folder.mkdir()
    api, _ = used(server, folder)
    shutil.rmtree(folder)  # cloned anew: on SQLite its memories go with the folder
    folder.mkdir()
    assert server.delete(f"/v1/projects/{api.pid}").status == 204
    again = Api(server, folder)
    assert again.pid == api.pid
    created = again.create(title="Sessions live in Redis")  # was 409 project_state_replaced
    again.embedded()
    found = [r["id"] for r in again.search("sessions live in redis", mode="semantic")["results"]]
    assert found[0] == created["id"]
    if backend == "sqlite":  # no vectors cached of the old file answer for the new one
        assert found == [created["id"]]
