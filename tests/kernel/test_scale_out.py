"""Two team servers — two gunicorn masters on two ports, standing for two machines, each with
its own state folder — sharing one PostgreSQL database: a memory written on one is found on
the other at once (keyword and semantic) by every worker, a stream on one sees the other's
events, a build started on one is refused on the other while it runs (and can be cancelled
from there; a lease in the database, so two kernels in this process stand for the machines),
and a kill -9 of one loses no write it acknowledged."""

from __future__ import annotations

import http.client
import os
import signal
import threading
import time
from itertools import count

import psycopg
import pytest

from tests.support import SSE, LocalServer, Server, fresh_pg_dsn, request

pytestmark = pytest.mark.postgres_only("two servers on a database it names itself")


@pytest.fixture
def machines(tmp_path):
    """``machines(name, plugins)``: a 2-worker server on the shared database, its home and
    per-machine state under ``tmp_path/name``; ``serving=False`` makes it a kernel in this
    process instead."""
    dsn = fresh_pg_dsn()
    started: list[Server | LocalServer] = []

    def start(name: str, plugins: tuple[str, ...] = ("auth",),
              serving: bool = True) -> Server | LocalServer:
        root = tmp_path / name
        config = f'[kernel]\nstate_dir = "{root / "state"}"\nsse_heartbeat_s = 0.5\n'
        if serving:
            server = Server(root / "home", plugins=list(plugins), workers=2, config=config,
                            env={"NEURALMIND_DATABASE_URL": dsn})
        else:
            server = LocalServer(root / "home", plugins=list(plugins), config=config +
                                 f'[storage]\nbackend = "postgres"\ndsn = "{dsn}"\n')
        started.append(server.start())
        return server

    start.dsn = dsn
    yield start
    for server in started:
        server.stop()


def folders(root, n: int, prefix: str = "p") -> list:
    made = []
    for i in range(n):
        (root / f"{prefix}{i}").mkdir(parents=True)
        made.append(root / f"{prefix}{i}")
    return made


def test_a_memory_written_on_one_machine_is_found_on_the_other_at_once(machines, tmp_path):
    one, two = machines("one", ("auth", "memory")), machines("two", ("auth", "memory"))
    pid = one.register(folders(tmp_path / "repos", 1)[0])
    memories = f"/v1/projects/{pid}/memories"

    def found(server, query: str, mode: str) -> list[str]:
        r = server.post(memories + "/search", {"query": query, "mode": mode})
        assert r.status == 200, r.body
        return [hit["id"] for hit in r.json["results"]]

    first = one.post(memories, {"title": "Escape HTML in rendered templates",
                                "rationale": "Unescaped user names let scripts run in pages."})
    assert first.status == 201, first.body
    # each worker of two has read the project's vectors before the next write: its index
    # must notice that another machine wrote
    for _ in range(4):
        assert found(two, "cross-site scripting in web pages", "semantic") == [first.json["id"]]
    made = one.post(memories, {"title": "Retry flaky network tests three times",
                               "rationale": "CI runners drop connections now and then."})
    assert made.status == 201, made.body
    mid = made.json["id"]
    for _ in range(4):  # every worker of two, at once
        assert found(two, "flaky network", "keyword") == [mid]
        assert found(two, "tests that fail when the connection drops", "semantic")[0] == mid
    assert two.get(f"{memories}/{mid}").json["title"] == "Retry flaky network tests three times"


def test_a_stream_on_one_machine_sees_the_events_of_the_other(machines, tmp_path):
    one, two = machines("one"), machines("two")
    stream = SSE(two, "?kind=project.*")
    try:
        time.sleep(0.5)
        ids = [one.register(d) for d in folders(tmp_path / "repos", 3)]
        got = stream.wait(3)
        assert [e["data"]["project_id"] for e in got] == ids
        assert all(e["data"]["kind"] == "project.registered" for e in got)
    finally:
        stream.close()


def test_a_build_running_on_one_machine_is_refused_on_the_other(machines, tmp_path):
    one, two = (machines(name, ("auth", "index"), serving=False) for name in ("one", "two"))
    repo = tmp_path / "repo"
    for i in range(400):  # enough work that the build is still running when two is asked
        (repo / "gen").mkdir(parents=True, exist_ok=True)
        (repo / f"gen/m{i}.py").write_text(f"def generated_{i}(x):\n    return x * {i}\n")
    pid = one.register(repo)
    started = one.post(f"/v1/projects/{pid}/build", {})
    assert started.status == 202, started.body
    job = started.json["job"]["id"]
    busy = two.post(f"/v1/projects/{pid}/build", {})
    assert (busy.status, busy.error["code"]) == (409, "index_busy")
    assert busy.error["details"]["job"]["id"] == job
    assert two.delete(f"/v1/jobs/{job}").status == 202  # a stop asked on the other machine
    deadline = time.monotonic() + 60
    while (status := one.get(f"/v1/jobs/{job}").json["status"]) in ("queued", "running"):
        assert time.monotonic() < deadline, "the build never stopped"
        time.sleep(0.1)
    assert status == "cancelled"
    assert two.post(f"/v1/projects/{pid}/build", {}).status == 202  # the lease was released


def test_a_kill_9_of_one_machine_loses_no_acknowledged_write(machines, tmp_path):
    one, two = machines("one"), machines("two")
    acknowledged: list[str] = []
    numbers, stop = count(), threading.Event()

    def write() -> None:
        while not stop.is_set():
            folder = tmp_path / "repos" / f"r{next(numbers)}"
            folder.mkdir(parents=True)
            try:
                r = request(one.port, "POST", "/v1/projects", json_body={"path": str(folder)},
                            token=one.token, timeout=5)
            except (OSError, http.client.HTTPException):  # the machine is gone, maybe while
                continue  # it answered (IncompleteRead): this write was never acknowledged
            if r.status == 201:
                acknowledged.append(r.json["id"])

    writers = [threading.Thread(target=write) for _ in range(4)]
    for w in writers:
        w.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 30:
        assert time.monotonic() < deadline, f"{len(acknowledged)} writes in 60 s"
        time.sleep(0.01)
    os.killpg(one.proc.pid, signal.SIGKILL)
    stop.set()
    for w in writers:
        w.join()
    one.proc.wait()

    listed, cursor = set(), None
    while True:  # what the other machine serves
        page = two.get("/v1/projects?limit=200" + (f"&cursor={cursor}" if cursor else "")).json
        listed |= {p["id"] for p in page["items"]}
        if not (cursor := page["next_cursor"]):
            break
    assert set(acknowledged) <= listed
    with psycopg.connect(machines.dsn) as conn:
        registered = {r[0] for r in conn.execute(
            "SELECT project_id FROM events WHERE kind = 'project.registered'")}
    assert set(acknowledged) <= registered  # each with its event
