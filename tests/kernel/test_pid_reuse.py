"""A job or lease left by a process that is gone is known as gone even when its pid now
belongs to a live process — as after a container's restart, which numbers processes from 1
again: the row names the process by its pid and its start (kernel/procs.py)."""

from __future__ import annotations

import os
import time

import pytest

from kernel import procs
from kernel.app import kernel_migrations
from kernel.clock import now_iso
from kernel.leases import HOST
from tests.support import home_dsn, make_kernel

pytestmark = pytest.mark.skipif(procs.own_start() is None, reason="no /proc to read starts from")

LEASE = "build:p_reused"


def record_job(db, jid: str, pid_start: int | None, *, lease: bool = False) -> None:
    """A running job (and the build lease naming it) as its process wrote them — with this
    test process's pid, as a restarted server's process may have it."""
    with db.transaction() as conn:
        conn.execute("INSERT INTO jobs (id, kind, project_id, status, created_at, started_at, "
                     "pid, pid_start, host) VALUES (?, 'build', 'p_reused', 'running', ?, ?, ?, "
                     "?, ?)", (jid, now_iso(), now_iso(), os.getpid(), pid_start, HOST))
        if lease:
            conn.execute("INSERT INTO leases (name, owner, host, pid, job_id, heartbeat) "
                         "VALUES (?, 'build-gone', ?, ?, ?, ?)",
                         (LEASE, HOST, os.getpid(), jid, time.time()))


def status(kernel, jid: str) -> tuple[str, str | None]:
    job = kernel.jobs.get(jid)
    return job.status, job.error and job.error.code


def test_a_job_whose_pid_was_reused_is_interrupted_and_its_lease_taken_over(tmp_path):
    home = tmp_path / "home"
    first = make_kernel(home, plugins=[])
    try:
        ours = first.jobs.create("build", project_id="p_other")  # this live process's
        record_job(first.db, "gone", procs.own_start() - 1, lease=True)  # pid reused since
        # before the restart the lease looks held, as the pid is a live process's
        assert first.leases.acquire(LEASE, "build-new", 120)["owner"] == "build-gone"
    finally:
        first.shutdown()

    again = make_kernel(home, plugins=[])
    try:
        assert status(again, "gone") == ("error", "interrupted")
        assert again.jobs.active("build", "p_reused") is None
        assert again.leases.acquire(LEASE, "build-new", 120) is None
        assert again.leases.get(LEASE)["owner"] == "build-new"
        assert status(again, ours) == ("queued", None)  # its process still runs: left alone
        assert again.jobs.active_counts(["p_reused", "p_other"]) == {"queued": 1, "running": 0}
    finally:
        again.shutdown()


def test_a_job_recorded_without_a_start_goes_by_its_pid_after_the_upgrade(tmp_path):
    """A kernel database of the release before (no ``pid_start``) takes the new step; its rows
    are judged by their pid alone, as before."""
    home = tmp_path / "home"
    home.mkdir()
    if dsn := home_dsn(home):
        from kernel.pg import PgBackend
        backend = PgBackend(dsn, 1)
        old = backend.database("kernel", kernel_migrations(postgres=True)[:1])
    else:
        from kernel.storage import Database
        backend = old = Database(home / "kernel.db", kernel_migrations(postgres=False)[:2])
    try:
        with old.transaction() as conn:
            for jid, pid in (("alive", os.getpid()), ("dead", 2 ** 22 + 1)):
                conn.execute("INSERT INTO jobs (id, kind, status, created_at, pid, host) "
                             "VALUES (?, 'sleep', 'running', ?, ?, ?)", (jid, now_iso(), pid, HOST))
    finally:
        backend.close()

    kernel = make_kernel(home, plugins=[])
    try:
        assert status(kernel, "alive") == ("running", None)
        assert status(kernel, "dead") == ("error", "interrupted")
        record_job(kernel.db, "reused", procs.own_start() + 1)
        assert kernel.jobs.mark_interrupted() == 1 and status(kernel, "reused")[0] == "error"
    finally:
        kernel.shutdown()
