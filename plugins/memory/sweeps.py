"""The decay policy of each project, the sweep that archives forgotten records, and the
daemon's daily run of it.

A sweep (``POST …/memories/decay``, a kernel job) archives every ACTIVE or STALE record that
is not pinned and whose strength (:mod:`plugins.memory.decay`) fell below the policy's
``archive_threshold``: status ARCHIVED with an ``archived`` event naming the strength. An
archived record keeps its history, leaves default search and listing, and comes back with
restore. A sweep reads and judges its candidates, then writes them 500 to a transaction,
judging each again on its row as that transaction reads it: a change made meanwhile (a pin,
an edit, another status) is never overwritten. Each kernel also runs the sweep by itself
every ``[memory] decay_sweep_hours`` (0 turns it off) on each project that has memories; a
lease row in the project's store lets one worker of a server sweep at a time, and the time of
the last sweep lets one sweep a period.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from neuralmind import Actor, log_failure, now_iso
from plugins.memory.backfill import STOP_WAIT_S
from plugins.memory.decay import parse_time, to_archive
from plugins.memory.models import DecayPolicy

log = logging.getLogger("neuralmind.memory")
SWEEP_LEASE_S = 600.0
LIVE = ("ACTIVE", "STALE")  # what a sweep archives
SWEEP_ACTOR = Actor("decay-sweep", role="admin", kind="system")  # the daily run, in history


class Sweeps:
    def __init__(self, memories):
        self.m = memories
        self.owner = f"{os.getpid()}-{id(self):x}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- policy --------------------------------------------------------------------------

    def put_policy(self, project, changes: dict[str, Any], actor, request_id) -> dict[str, Any]:
        store = self.m.store(project)
        current = self.m.policy(store)
        if "half_life_days" in changes:  # kinds given change; {} changes none
            changes["half_life_days"] = {**current["half_life_days"], **changes["half_life_days"]}
        new = DecayPolicy.model_validate({**current, **changes}).model_dump()
        with store.writing() as w:
            w.put_config("decay", new)
        self.m.emit("decay_policy", project, actor, request_id, **new)
        return new

    # -- the sweep -----------------------------------------------------------------------

    def sweep(self, project, dry_run: bool, actor, ctx=None,
              before_write: Callable[[], None] | None = None) -> dict[str, Any]:
        """Archive what fell below the threshold; report each change (all of them: a dry run
        reports what a sweep would do).

        The candidates are read and judged first, then written 500 to a transaction; each
        transaction reads its records again and judges them on the rows it reads, so a
        record pinned, edited, recalled or moved out of ACTIVE/STALE since the candidates
        were read is left as it is now (an edit refreshes it). ``before_write`` is called
        before each write transaction (tests make a change land there)."""
        store = self.m.store(project)
        policy = self.m.policy(store)
        now = now_iso()
        at = parse_time(now)
        candidates = store.retained()
        found = to_archive(candidates, policy, at)
        if not found or dry_run:
            return self._result(dry_run, policy, candidates, found)
        done: list[tuple[dict[str, Any], float]] = []
        for i in range(0, len(found), 500):
            if ctx is not None:
                ctx.check()
            if before_write is not None:
                before_write()
            with store.writing() as w:
                rows = w.get_many([rec["id"] for rec, _ in found[i:i + 500]])
                live = [r for r in rows.values() if r["status"] in LIVE]
                for cur, s in to_archive(live, policy, at):
                    self.m.change_status(w, cur, "ARCHIVED", kind="archived", at=now,
                                         actor=self.m.actor_for(actor, cur), current=cur,
                                         note=f"strength {s:.4f} below "
                                              f"{policy['archive_threshold']}")
                    done.append((cur, s))  # as it was: the change reports its old status
        done.sort(key=lambda pair: (pair[1], pair[0]["id"]))
        if done:
            self.m.written(store)
            self.m.emit("decayed", project, actor, None, archived=[r["id"] for r, _ in done])
        return self._result(dry_run, policy, candidates, done)

    @staticmethod
    def _result(dry_run: bool, policy: dict[str, Any], candidates: list[dict[str, Any]],
                archived: list[tuple[dict[str, Any], float]]) -> dict[str, Any]:
        changes = [{"id": rec["id"], "title": rec["title"], "kind": rec["kind"],
                    "strength": round(s, 6), "status": [rec["status"], "ARCHIVED"]}
                   for rec, s in archived]
        return {"dry_run": dry_run, "enabled": policy["enabled"], "checked": len(candidates),
                "archived": len(changes), "changes": changes}

    # -- the daily run -------------------------------------------------------------------

    def start(self, period_hours: float) -> None:
        if period_hours <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, args=(period_hours * 3600,),
                                        name="memory-decay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """No sweep starts from now; one under way is waited for (``STOP_WAIT_S`` at most), as
        the backfill is: the kernel closes the stores once its plugins have stopped."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)

    def _run(self, period_s: float) -> None:
        while not self._stop.wait(min(period_s, 3600.0)):
            for project in self.m.kernel.projects.all():
                if self._stop.is_set():
                    return
                try:
                    self.run_due(project, period_s)
                except Exception as ex:
                    log_failure(log, f"decay sweep for project {project.id}", ex)

    def run_due(self, project, period_s: float) -> dict[str, Any] | None:
        """Sweep ``project`` when its period has passed and no other worker is sweeping it;
        the job's result, or None. Projects without memories are left alone."""
        if not self.m.kept(project):
            return None
        store, now = self.m.store(project), time.time()
        if not store.sweep_due(now, period_s) or not store.lease("decay", self.owner, now,
                                                                 SWEEP_LEASE_S):
            return None
        try:
            job = self.m.kernel.jobs.submit(
                "memory.decay", lambda ctx: self.sweep(project, False, SWEEP_ACTOR, ctx),
                project_id=project.id, actor=SWEEP_ACTOR.id, wait=True)
            store.swept(time.time())
            return job.result
        finally:
            store.release("decay", self.owner)
