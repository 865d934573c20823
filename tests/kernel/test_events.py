"""Server-sent events from the kernel's event table: seen across workers (gunicorn), resumable
and filtered (in process)."""

import sqlite3
import time

import pytest

from kernel.plugins import hookimpl
from tests.support import SSE, make_kernel


def test_events_stream_across_workers_with_filters_and_heartbeats(kserver, tmp_path):
    stream = SSE(kserver, "?kind=project.*")
    hello = SSE(kserver, "?kind=hello.slept")
    time.sleep(0.5)
    assert stream.resp.status == 200
    assert stream.resp.getheader("Content-Type").startswith("text/event-stream")
    ids = []
    for i in range(6):  # new connections: spread over both workers
        d = tmp_path / f"e{i}"
        d.mkdir()
        ids.append(kserver.register(d))
    kserver.post("/v1/hello/jobs", {"seconds": 0, "wait": True})
    got = stream.wait(6)
    assert [e["data"]["project_id"] for e in got] == ids
    assert all(e["data"]["kind"] == "project.registered" for e in got)
    assert all(e["data"]["actor"] == "local" for e in got)
    assert [e["data"]["kind"] for e in hello.wait(1)] == ["hello.slept"]
    time.sleep(1.2)
    assert stream.comments >= 1  # heartbeats every 0.5 s in this server's config
    stream.close(), hello.close()


def test_last_event_id_resumes_after_that_event(kapp, tmp_path):
    first = SSE(kapp, "?kind=project.registered")
    time.sleep(0.3)
    for i in range(3):
        d = tmp_path / f"r{i}"
        d.mkdir()
        kapp.register(d)
    events = first.wait(3)
    first.close()
    resumed = SSE(kapp, "?kind=project.registered", last_event_id=events[0]["id"])
    again = resumed.wait(2)
    resumed.close()
    assert [e["id"] for e in again[:2]] == [e["id"] for e in events[1:3]]
    for bad in ("\u00b2", "-1", "1.5", "abc", "9" * 25, str(2 ** 63)):  # "²" is a digit to str
        r = kapp.request("GET", "/v1/events", headers={"Last-Event-ID": bad})
        assert r.status == 400 and r.error["details"]["header"] == "Last-Event-ID", bad


def test_project_filter_and_unknown_project(kapp, tmp_path):
    a, b = tmp_path / "fa", tmp_path / "fb"
    a.mkdir(), b.mkdir()
    pa = kapp.register(a)
    stream = SSE(kapp, f"?project={pa}&kind=project.*")
    time.sleep(0.3)
    kapp.register(b)
    kapp.delete(f"/v1/projects/{pa}")
    got = stream.wait(1)
    stream.close()
    assert [(e["data"]["kind"], e["data"]["project_id"]) for e in got] == [("project.removed", pa)]
    assert kapp.get("/v1/events?project=p_nope").error["code"] == "project_not_found"


def test_a_requests_many_events_keep_their_order_and_ids(tmp_path, backend):
    """A request's held events are written in statements of many rows: stored and fanned out
    in the order they were made, each under the id the table gave it, across statements."""
    fanned: list[tuple[int, str]] = []

    class Tracker:
        @hookimpl
        def track_event(self, kernel, event):
            fanned.append((event.id, event.kind))

    kernel = make_kernel(tmp_path / "home", plugins=[], extra_plugins=[Tracker()])
    try:
        kernel.emit("before")
        kernel.events.hold()
        kinds = [f"test.k{i}" for i in range(250)]  # three statements' worth
        for kind in kinds:
            kernel.emit(kind, data={"n": kind})
        kernel.events.release()
        stored = kernel.events.after(0, 1000)
        assert [e.kind for e in stored] == ["before", *kinds]
        assert [e.data for e in stored[1:]] == [{"n": k} for k in kinds]
        assert fanned == [(e.id, e.kind) for e in stored]
        assert [e.id for e in stored] == sorted({e.id for e in stored})
    finally:
        kernel.shutdown()


@pytest.mark.sqlite_only("a SQLite lock holds the database; PostgreSQL's outage is "
                         "tests/kernel/test_postgres.py's")
def test_events_the_database_refuses_for_a_while_are_kept_and_written_in_order(
        tmp_path, monkeypatch, backend):
    """kernel.db locked past its busy timeout (another process's long transaction) after a
    write committed: its event is kept, later ones queue behind it, and all are written, in
    order, once the database takes them — the log is the webhooks' queue; none is lost."""
    from kernel import storage
    fanned: list[str] = []

    class Tracker:
        @hookimpl
        def track_event(self, kernel, event):
            fanned.append(event.kind)

    monkeypatch.setattr(storage, "BUSY_TIMEOUT_MS", 200)  # the wait, not the behaviour
    kernel = make_kernel(tmp_path / "home", plugins=[], extra_plugins=[Tracker()])
    try:
        kernel.emit("test.before")
        other = sqlite3.connect(tmp_path / "home" / "kernel.db", isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another process's long transaction
        try:
            kernel.emit("test.during1")  # returns: the write it tells of has committed
            kernel.emit("test.during2")
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert [e.kind for e in kernel.events.after(0)] == ["test.before"]
        kernel.emit("test.after")  # behind the kept ones, whichever thread writes first
        # the retries back off to RETRY_S[1]: a loaded machine may see a few of them fail
        deadline = time.monotonic() + 30
        while len(kernel.events.after(0)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        kinds = ["test.before", "test.during1", "test.during2", "test.after"]
        assert [e.kind for e in kernel.events.after(0)] == kinds, (
            f"kept: {len(kernel.events._unwritten)}, retrying: "
            f"{kernel.events._retrying is not None and kernel.events._retrying.is_alive()}")
        assert fanned == kinds
    finally:
        kernel.shutdown()


def test_a_worker_keeps_a_thread_for_requests_whatever_streams_are_open(make_server):
    """One careless client opening streams took every thread of every worker, and nothing
    was answered: a worker holds streams in all its threads but one (here 2: one stream),
    the next is 503 too_many_streams, and a closed one gives its slot back."""
    server = make_server(plugins=["auth"], config="[server]\nthreads = 2\n"
                                                 "[kernel]\nsse_heartbeat_s = 0.2\n")
    first = SSE(server)
    assert first.resp.status == 200
    refused = server.get("/v1/events")
    assert refused.status == 503 and refused.error["code"] == "too_many_streams"
    assert refused.headers["retry-after"] == "5" and "[server] threads" in refused.error["message"]
    assert server.get("/v1/health").status == 200
    first.close()
    deadline = time.monotonic() + 5  # the server lets it go at its next heartbeat's write
    while (again := SSE(server)).resp.status != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    again.close()


def test_a_requests_events_are_written_before_after_events_middleware_runs(tmp_path, backend):
    """A request's events (its write's and those the plugins' middleware add, as api.call)
    are written as soon as the handler and that middleware are done; a middleware marked
    ``after_events`` — bookkeeping that may wait on a lock, as tier2's seat note on seats.db —
    runs after, so a worker dying while it waits cannot take a committed write's events with
    it. (They were held until the outermost middleware ended, behind every other one.)"""
    from kernel.events import EventKind
    from tests.support import LocalServer
    found: list[list[str]] = []

    class Bookkeeping:
        @hookimpl
        def register_event_kinds(self, kernel):
            return [EventKind("test.noted", "what the test's middleware notes")]

        @hookimpl
        def register_middleware(self, kernel):
            class Noted:  # emits in process_response, as the auth plugin's api.call does
                def process_response(self, req, resp, resource, req_succeeded):
                    if req.method == "POST":
                        kernel.emit("test.noted", request_id=req.context.request_id)

            class After:
                after_events = True

                def process_response(self, req, resp, resource, req_succeeded):
                    if req.method == "POST":
                        rid = req.context.request_id
                        found.append([e.kind for e in kernel.events.after(0)
                                      if e.request_id == rid])

            return [After(), Noted()]  # listed first: the flag, not the order, places it

    with LocalServer(tmp_path / "home", plugins=["auth"], extra_plugins=[Bookkeeping()]) as server:
        (tmp_path / "repo").mkdir()
        server.register(tmp_path / "repo")
        assert [sorted(kinds) for kinds in found] == [["api.call", "project.registered",
                                                       "test.noted"]]
        assert server.get("/v1/projects").status == 200
        assert len(found) == 1  # a read: nothing held, nothing looked for


@pytest.mark.sqlite_only("how a serving process stops")
def test_a_stopping_server_ends_its_event_streams(make_server):
    """SIGTERM with a stream open (a dashboard left open) held the worker to gunicorn's
    10 s graceful timeout; the stream now ends within a poll, cleanly, and the server stops."""
    import os
    import signal
    server = make_server(serving=True, plugins=["auth"])
    stream = SSE(server)
    time.sleep(0.3)
    assert stream.resp.status == 200
    started = time.monotonic()
    os.killpg(server.proc.pid, signal.SIGTERM)
    stream.thread.join(8)
    assert not stream.thread.is_alive()  # the body ended: the server closed the stream
    assert server.proc.wait(8) == 0
    assert time.monotonic() - started < 8  # not cut off at the graceful timeout (10 s)
