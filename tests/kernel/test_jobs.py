"""Jobs persisted in SQLite: any worker answers, 202 + Location, wait, cancel, and jobs left
running by a killed worker are marked interrupted."""

import os
import signal
import sqlite3
import threading
import time

import pytest

from kernel.errors import Conflict
from tests.support import deny_once


def wait_for(server, jid, statuses=("done", "error", "cancelled"), timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = server.get(f"/v1/jobs/{jid}").json
        if job["status"] in statuses:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {jid} still {job['status']}")


def test_long_work_answers_202_with_location(kapp):
    r = kapp.post("/v1/hello/jobs", {"seconds": 0.3})
    assert r.status == 202
    job = r.json["job"]
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] in ("queued", "running") and job["kind"] == "sleep"
    done = wait_for(kapp, job["id"])
    assert done["status"] == "done" and done["result"] == {"slept": 0.3}
    assert done["finished_at"] and done["progress"]["total"] == 3


def test_wait_true_runs_inline(kapp):
    r = kapp.post("/v1/hello/jobs", {"seconds": 0.1, "wait": True})
    assert r.status == 200 and r.json["status"] == "done"


def test_any_worker_answers_for_a_job(kserver):
    jid = kserver.post("/v1/hello/jobs", {"seconds": 0}).json["job"]["id"]
    pids = set()
    deadline = time.monotonic() + 30  # a worker still starting (the session's first use) waits
    while len(pids) < 2 and time.monotonic() < deadline:
        pids.add(kserver.get("/v1/hello").json["pid"])
        assert kserver.get(f"/v1/jobs/{jid}").status == 200
    assert len(pids) == 2, "both workers should have answered"


def test_cancel_stops_a_running_job(kapp):
    jid = kapp.post("/v1/hello/jobs", {"seconds": 30}).json["job"]["id"]
    wait_for(kapp, jid, ("running",))
    r = kapp.delete(f"/v1/jobs/{jid}")
    assert r.status == 202
    assert wait_for(kapp, jid)["status"] == "cancelled"
    again = kapp.delete(f"/v1/jobs/{jid}")
    assert again.status == 409 and again.error["code"] == "job_finished"


def test_job_wait_that_runs_out_of_time_says_how_to_go_on(kapp):
    from tests.support import run_cli
    jid = kapp.post("/v1/hello/jobs", {"seconds": 30}).json["job"]["id"]
    env = {"NEURALMIND_API_URL": kapp.url, "NEURALMIND_API_TOKEN": kapp.token}
    try:
        code, out, err = run_cli("job", "wait", jid, "--timeout", "0.3", "--json", env=env)
        assert (code, out) == (1, "")
        assert err == (f"neuralmind: job {jid} is still running after 0.3 s: `neuralmind job "
                       f"wait {jid}` follows it again, `neuralmind job cancel {jid}` stops it\n")
        for bad in ("0", "-1", "nan", "inf", "soon"):
            code, _, err = run_cli("job", "wait", jid, "--timeout", bad, env=env)
            assert code == 2 and "argument --timeout" in err, bad
    finally:
        kapp.delete(f"/v1/jobs/{jid}")


def test_listing_filters_and_pages(kapp):
    for _ in range(3):
        kapp.post("/v1/hello/jobs", {"seconds": 0, "wait": True})
    r = kapp.get("/v1/jobs?status=done&limit=2")
    assert r.status == 200 and len(r.json["items"]) == 2 and r.json["next_cursor"]
    nxt = kapp.get(f"/v1/jobs?status=done&limit=2&cursor={r.json['next_cursor']}").json
    assert not {j["id"] for j in nxt["items"]} & {j["id"] for j in r.json["items"]}
    assert all(j["status"] == "done" for j in r.json["items"] + nxt["items"])
    assert kapp.get("/v1/jobs?status=bogus").status == 422
    assert kapp.get("/v1/jobs/nope").error["code"] == "job_not_found"


def test_job_of_a_killed_worker_is_marked_interrupted(make_server, example_plugin):
    server = make_server(serving=True, plugins=["auth", "example"], workers=1, env=example_plugin)
    jid = server.post("/v1/hello/jobs", {"seconds": 60}).json["job"]["id"]
    wait_for(server, jid, ("running",))
    worker = server.get("/v1/hello").json["pid"]
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            r = server.get(f"/v1/jobs/{jid}")
            if r.status == 200 and r.json["status"] == "error":
                break
        except OSError:
            pass
        time.sleep(0.2)
    job = server.get(f"/v1/jobs/{jid}").json
    assert job["status"] == "error" and job["error"]["code"] == "interrupted"
    assert server.get("/v1/hello").json["pid"] != worker


def test_created_job_can_be_discarded_until_it_starts(kapp):
    """create → discard leaves nothing; create → start runs it, and discard no longer applies."""
    registry = kapp.kernel.jobs
    dropped = registry.create("build", project_id="p_1", actor="a")
    assert registry.get(dropped).status == "queued"
    registry.discard(dropped)
    assert registry.find(dropped) is None
    kept = registry.create("build", project_id="p_1", actor="a")
    done = registry.start(kept, lambda ctx: {"ok": True}, wait=True)
    registry.discard(kept)
    assert done.status == "done" and registry.get(kept).result == {"ok": True}


def _fails(registry, ctx):
    raise RuntimeError("the work broke")


def _refused(registry, ctx):
    raise Conflict("the work was refused", code="refused")


def _stopped(registry, ctx):
    registry.cancel(ctx.id)
    ctx.check()


@pytest.mark.parametrize("end, status", [(_fails, "error"), (_refused, "error"),
                                         (_stopped, "cancelled")])
def test_a_job_that_fails_or_is_stopped_keeps_its_last_progress(kapp, end, status):
    """Progress is written at most every 0.2 s: the step reported just before the end was
    kept only by a job that succeeded."""
    registry = kapp.kernel.jobs

    def work(ctx):
        ctx.progress(step=1)
        ctx.progress(step=2)  # within 0.2 s of the first: not written yet
        end(registry, ctx)

    job = registry.start(registry.create("sleep"), work, wait=True)
    assert (job.status, job.progress) == (status, {"step": 2})


@pytest.mark.sqlite_only("the failure is made by an SQLite authorizer")
def test_a_job_whose_row_cannot_be_read_at_its_start_never_runs(kapp):
    """``start`` read the row after its thread ran the work: a failed read told the caller
    (the index's build) the job had not started, and it let go of the lease the build ran
    under."""
    registry = kapp.kernel.jobs
    jid = registry.create("sleep")
    ran = threading.Event()
    deny_once(registry.db.conn, sqlite3.SQLITE_READ, "jobs", "kind")
    try:
        with pytest.raises(sqlite3.DatabaseError):
            registry.start(jid, lambda ctx: ran.set(), wait=False)
    finally:
        registry.db.conn.set_authorizer(None)
    assert not ran.wait(0.5)
    assert registry.get(jid).status == "queued"
