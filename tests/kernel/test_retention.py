"""The kernel keeps events ``keep_events_days`` and finished jobs ``keep_jobs_days``: older
ones are pruned (both tables only grew: ~18,000 events in ten minutes of a busy server), a job
still running never is, and 0 keeps them for ever."""

from __future__ import annotations

from kernel.retention import before
from tests.support import make_kernel


def aged(kernel, days: float) -> None:
    """Every event and job of ``kernel`` made ``days`` old."""
    with kernel.db.transaction() as conn:
        conn.execute("UPDATE events SET at = ?", (before(days),))
        conn.execute("UPDATE jobs SET created_at = ?, finished_at = CASE WHEN finished_at IS "
                     "NULL THEN NULL ELSE ? END", (before(days), before(days)))


def test_old_events_and_finished_jobs_are_pruned_and_running_ones_kept(tmp_path):
    kernel = make_kernel(tmp_path / "home", plugins=[],
                         kernel={"keep_events_days": 7, "keep_jobs_days": 3})
    try:
        kernel.emit("project.registered", data={"old": True})
        done = kernel.jobs.submit("chore", lambda ctx: None, wait=True)
        running = kernel.jobs.create("chore")  # queued, never finished
        aged(kernel, 8)
        kernel.emit("project.registered", data={"old": False})
        fresh = kernel.jobs.submit("chore", lambda ctx: None, wait=True)
        assert kernel.retention.prune() == {"events": 1, "jobs": 1}
        assert [e.data for e in kernel.events.after(0)] == [{"old": False}]
        assert kernel.jobs.find(done.id) is None
        assert {kernel.jobs.get(running).status, kernel.jobs.get(fresh.id).status} == {
            "queued", "done"}
        aged(kernel, 5)  # past the jobs' keep, within the events'
        assert kernel.retention.prune() == {"events": 0, "jobs": 1}
    finally:
        kernel.shutdown()


def test_a_keep_of_0_keeps_for_ever(tmp_path):
    kernel = make_kernel(tmp_path / "home", plugins=[],
                         kernel={"keep_events_days": 0, "keep_jobs_days": 0})
    try:
        kernel.emit("project.registered")
        kernel.jobs.submit("chore", lambda ctx: None, wait=True)
        aged(kernel, 10_000)
        assert kernel.retention.prune() == {"events": 0, "jobs": 0}
        assert len(kernel.events.after(0)) == 1
    finally:
        kernel.shutdown()
