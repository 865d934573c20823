"""A removed project lets go of what a process kept for it: its stores' files close and its
caches go (they held ~10 descriptors and ~1 MB a project, for the process's life: a daemon
used for many projects ran out of descriptors), in the process that removed it at once and in
the others (gunicorn's workers) soon after. A project removed and registered again — its
folder deleted and made anew meanwhile — starts afresh with no restart (it was 409
``project_state_replaced`` until one). Its running jobs are asked to stop, and stay visible
to whoever waits on them (they ran on, 404 to everyone). And a stopped server's files are whole
alone: a clean stop left kernel.db's every commit in its ``-wal``, which the documented restore
deletes."""

from __future__ import annotations

import gc
import os
import shutil
import sqlite3
import time

import falcon.testing
import pytest

from neuralmind import Job, JobAccepted, answer_job, hookimpl, operation
from tests.plugins.index.conftest import build
from tests.plugins.index.test_graph import write
from tests.support import LocalServer, make_kernel

PLUGINS = ["auth", "index"]
FILES = {"shop/cart.py": "def cart_total(items):\n    return sum(items)\n",
         "README.md": "# Shop\n\nA cart.\n"}


def open_under(folder) -> list[str]:
    """The files this process holds open inside ``folder``."""
    gc.collect()  # a store let go of closes its connections when it is collected
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{folder}/"):
            found.append(target)
    return found


def used(server, repo) -> str:
    """A project registered, built and searched: its stores are open."""
    pid = server.register(repo)
    build(server, pid)
    r = server.post(f"/v1/projects/{pid}/search", {"query": "cart total", "mode": "keyword"})
    assert r.status == 200 and r.json["results"], r.body
    return pid


def test_removing_a_project_closes_its_files(tmp_path):
    repo = write(tmp_path / "repo", FILES)
    with LocalServer(tmp_path / "home", plugins=PLUGINS) as server:
        pid = used(server, repo)
        assert open_under(repo / ".neuralmind")  # the index is open while it is served
        assert server.delete(f"/v1/projects/{pid}").status == 204
        assert open_under(repo / ".neuralmind") == []


def test_another_process_lets_go_of_a_project_removed_elsewhere(tmp_path):
    """Two kernels on one home, as two gunicorn workers: the one that did not remove the
    project finds out at its next lookup past ``check_every_s``."""
    repo, other = write(tmp_path / "repo", FILES), write(tmp_path / "other", FILES)
    with LocalServer(tmp_path / "home", plugins=PLUGINS) as a, \
            LocalServer(tmp_path / "home", plugins=PLUGINS) as b:
        pid = used(b, repo)
        kept = used(b, other)
        assert a.delete(f"/v1/projects/{pid}").status == 204
        assert open_under(repo / ".neuralmind")  # b still holds it, until it looks again
        b.kernel.projects.check_every_s = 0
        assert b.get(f"/v1/projects/{kept}").status == 200
        assert open_under(repo / ".neuralmind") == []
        assert open_under(other / ".neuralmind")  # a project still registered stays open


def test_a_project_removed_and_registered_again_starts_afresh(tmp_path):
    repo = write(tmp_path / "repo", FILES)
    with LocalServer(tmp_path / "home", plugins=PLUGINS) as server:
        pid = used(server, repo)
        shutil.rmtree(repo)  # cloned anew: the index goes with the folder
        write(repo, {"shop/till.py": "def till_total(items):\n    return sum(items)\n"})
        assert server.delete(f"/v1/projects/{pid}").status == 204
        assert server.register(repo) == pid
        build(server, pid)
        r = server.post(f"/v1/projects/{pid}/search", {"query": "till", "mode": "keyword"})
        assert r.status == 200, r.body
        assert {h["source_file"] for h in r.json["results"]} == {"shop/till.py"}


def test_a_worker_that_only_listed_a_project_serves_it_registered_anew(tmp_path):
    """A listing opens a project's stores (its status) without a lookup of the project: such
    a worker was never told of the removal, held the files, and answered 409
    ``project_state_replaced`` for the project registered anew; and the late news of the
    removal in one worker stopped the watcher another had started for the new registration."""
    repo = write(tmp_path / "repo", FILES)
    with LocalServer(tmp_path / "home", plugins=PLUGINS) as a, \
            LocalServer(tmp_path / "home", plugins=PLUGINS) as b:
        pid = used(a, repo)
        assert b.get("/v1/projects").status == 200  # b opens the index for its status
        assert a.delete(f"/v1/projects/{pid}").status == 204
        shutil.rmtree(repo)  # cloned anew
        write(repo, {"shop/till.py": "def till_total(items):\n    return sum(items)\n"})
        assert a.register(repo) == pid
        build(a, pid)
        assert a.post(f"/v1/projects/{pid}/watch/start").status == 200
        try:
            r = b.post(f"/v1/projects/{pid}/search", {"query": "till", "mode": "keyword"})
            assert r.status == 200, r.body
            assert {h["source_file"] for h in r.json["results"]} == {"shop/till.py"}
            assert a.get(f"/v1/projects/{pid}/watch/status").json["running"] is True
        finally:
            a.post(f"/v1/projects/{pid}/watch/stop")


@pytest.mark.sqlite_only("kernel.db is the SQLite home's")
def test_a_stopped_server_leaves_kernel_db_whole_without_its_log(tmp_path):
    repo = write(tmp_path / "repo", FILES)
    home = tmp_path / "home"
    with LocalServer(home, plugins=PLUGINS) as server:
        pid = server.register(repo)
    alone = tmp_path / "copy" / "kernel.db"  # the file copied without its -wal, as a restore
    alone.parent.mkdir()
    shutil.copy(home / "kernel.db", alone)
    conn = sqlite3.connect(alone)
    try:
        assert conn.execute("SELECT id FROM projects").fetchall() == [(pid,)]
    finally:
        conn.close()


class Chores:
    """A plugin whose project job runs until it is asked to stop."""

    class Resource:
        def __init__(self, kernel):
            self.kernel = kernel

        @operation(permission="projects.write", response=Job, status=202,
                   responses={202: JobAccepted})
        def on_post(self, req, resp, project_id):
            def work(ctx):
                while True:
                    ctx.check()
                    time.sleep(0.02)
            job = self.kernel.jobs.submit("chore", work, project_id=project_id)
            return answer_job(resp, job, False)

    @hookimpl
    def register_routes(self, kernel):
        return [("/v1/projects/{project_id}/chores", self.Resource(kernel))]


def test_removing_a_project_stops_its_jobs_and_whoever_waits_sees_it(tmp_path):
    (tmp_path / "repo").mkdir()
    kernel = make_kernel(tmp_path / "home", plugins=["auth"], extra_plugins=[Chores()])
    try:
        token = (kernel.home / "token").read_text().strip()
        api = falcon.testing.TestClient(kernel.app, headers={
            "Host": "127.0.0.1", "Authorization": f"Bearer {token}"})
        pid = api.simulate_post("/v1/projects", json={"path": str(tmp_path / "repo")}).json["id"]
        jid = api.simulate_post(f"/v1/projects/{pid}/chores").json["job"]["id"]
        assert api.simulate_delete(f"/v1/projects/{pid}").status_code == 204
        deadline, job = time.monotonic() + 10, {}
        while time.monotonic() < deadline and job.get("status") != "cancelled":
            r = api.simulate_get(f"/v1/jobs/{jid}")
            assert r.status_code == 200, r.json  # not 404: its project was removed since
            job = r.json
        assert job["status"] == "cancelled"
    finally:
        kernel.shutdown()
