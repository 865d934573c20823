"""The decay policy of each project, the sweep that archives forgotten records, and the
daemon's daily run of it.

A sweep (``POST …/memories/decay``, a kernel job) archives every ACTIVE or STALE record that
is not pinned and whose strength (:mod:`plugins.memory.decay`) fell below the policy's
``archive_threshold``: status ARCHIVED with an ``archived`` event naming the strength. An
archived record keeps its history, leaves default search and listing, and comes back with
restore. Each kernel also runs the sweep by itself every ``[memory] decay_sweep_hours`` (0
turns it off) on each project that has memories; a lease row in the project's store lets one
worker of a server sweep at a time, and the time of the last sweep lets one sweep a period.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from neuralmind import Actor, now_iso
from plugins.memory.decay import parse_time, to_archive
from plugins.memory.models import DecayPolicy

log = logging.getLogger("neuralmind.memory")
SWEEP_LEASE_S = 600.0
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

    def sweep(self, project, dry_run: bool, actor, ctx=None) -> dict[str, Any]:
        """Archive what fell below the threshold; report each change (all of them: a dry run
        reports what a sweep would do)."""
        store = self.m.store(project)
        policy = self.m.policy(store)
        now = now_iso()
        candidates = store.retained()
        found = to_archive(candidates, policy, parse_time(now))
        changes = [{"id": rec["id"], "title": rec["title"], "kind": rec["kind"],
                    "strength": round(s, 6), "status": [rec["status"], "ARCHIVED"]}
                   for rec, s in found]
        if found and not dry_run:
            for i in range(0, len(found), 500):
                if ctx is not None:
                    ctx.check()
                with store.writing() as w:
                    for rec, s in found[i:i + 500]:
                        self.m.change_status(w, rec, "ARCHIVED", kind="archived", at=now,
                                             actor=self.m.actor_for(actor, rec),
                                             note=f"strength {s:.4f} below "
                                                  f"{policy['archive_threshold']}")
            self.m.written(store)
            self.m.emit("decayed", project, actor, None, archived=[c["id"] for c in changes])
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
        self._stop.set()

    def _run(self, period_s: float) -> None:
        while not self._stop.wait(min(period_s, 3600.0)):
            for project in self.m.kernel.projects.all():
                if self._stop.is_set():
                    return
                try:
                    self.run_due(project, period_s)
                except Exception:
                    log.exception("decay sweep failed for project %s", project.id)

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
