"""Vectors and workers, with the deterministic fake embedder: re-embedding when the content or
the model changes, writes in one gunicorn worker seen by searches in another, the background
backfill, and 8 threads × 50 concurrent creates through 2 workers losing nothing."""

from __future__ import annotations

import threading
import time

import pytest

from tests.embeddings import fake_embedder
from tests.plugins.memory.conftest import Api, memory_database, start

pytestmark = pytest.mark.slow  # gunicorn workers and child processes: started first under xdist

PLUGINS = ["auth", "memory", "fake_embedder"]
PER_THREAD = 50  # 400 creates racing over 2 workers (1,600 cost ~13 s of CPU for no new case)


def vectors(api) -> dict[str, tuple[str, str]]:
    with memory_database(api.server.home, api.dir, api.pid) as db:
        return {r[0]: (r[1], r[2]) for r in db.conn.execute(
            "SELECT memory_id, model_id, content_sha FROM memory_vectors")}


def wait_for(check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def workers2(tmp_path_factory, backend):
    home = tmp_path_factory.mktemp("two-workers")
    srv = start(home, serving=True, plugins=PLUGINS, workers=2,
                env=fake_embedder.server_env(home, model_id="fake@1"))
    yield srv
    srv.stop()


def test_backfill_embeds_after_writes_and_reembeds_changed_content(workers2, tmp_path):
    api = Api(workers2, tmp_path)
    mid = api.create(title="alpha beta", rationale="gamma delta")["id"]
    assert wait_for(lambda: mid in vectors(api)), "the backfill never embedded the new record"
    model, sha = vectors(api)[mid]
    assert model == "fake@1"
    api.server.patch(api.url(mid), {"tags": ["no-content-change"]})
    time.sleep(1.0)
    assert vectors(api)[mid] == (model, sha)  # tags are not embedded: nothing to redo
    api.server.patch(api.url(mid), {"rationale": "epsilon zeta"})
    assert wait_for(lambda: vectors(api)[mid][1] != sha)
    assert api.search("epsilon zeta", mode="semantic")["results"][0]["id"] == mid


def test_search_in_any_worker_sees_every_write(workers2, tmp_path):
    api = Api(workers2, tmp_path)
    for i in range(30):
        word = f"token{i}x"
        mid = api.create(title=f"{word} decision", rationale=f"{word} because")["id"]
        found = api.search(f"{word} decision because", mode="semantic", limit=1)["results"]
        assert [r["id"] for r in found] == [mid], i  # embedded by the search if not yet backfilled
        api.server.delete(api.url(mid))
        after = api.search(f"{word} decision because", mode="semantic")["results"]
        assert mid not in [r["id"] for r in after], i


def test_eight_threads_of_creates_lose_nothing(workers2, tmp_path):
    api = Api(workers2, tmp_path)
    errors: list[str] = []

    def writer(t: int) -> None:
        for i in range(PER_THREAD):
            r = api.server.post(api.base, {"id": f"t{t}-{i}", "title": f"thread {t} item {i}",
                                           "rationale": "concurrent write"})
            if r.status != 201:
                errors.append(f"{t}/{i}: {r.status} {r.body[:200]!r}")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    exported = api.server.get(api.url(tail="export")).body.decode().splitlines()
    assert len(exported) == 8 * PER_THREAD
    assert sorted(line.split('"id": "', 1)[1].split('"', 1)[0] for line in exported) == \
        sorted(f"t{t}-{i}" for t in range(8) for i in range(PER_THREAD))
    assert all('"kind": "created"' in line for line in exported)


def test_changing_the_model_reembeds(tmp_path):
    home = tmp_path / "home"
    project = tmp_path / "proj"
    project.mkdir()
    srv = start(home, extra_plugins=[fake_embedder.FakeEmbedderPlugin("fake@1")])
    try:
        api = Api(srv, project)
        ids = [api.create(title=f"record {i}", rationale="text")["id"] for i in range(5)]
        api.embedded()
        assert {m for m, _ in vectors(api).values()} == {"fake@1"} and set(vectors(api)) == set(ids)
    finally:
        srv.stop()
    srv = start(home, extra_plugins=[fake_embedder.FakeEmbedderPlugin("fake@2")])
    try:
        api = Api(srv, project)
        hits = api.search("record 3", mode="semantic")["results"]
        assert hits[0]["id"] == ids[3]
        api.embedded()
        assert {m for m, _ in vectors(api).values()} == {"fake@2"} and set(vectors(api)) == set(ids)
    finally:
        srv.stop()
