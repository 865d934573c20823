"""How long the kernel keeps what is done: events for ``[kernel] keep_events_days``, finished
jobs for ``keep_jobs_days`` (0 keeps them for ever). Without it both tables only grew — some
18,000 events and 1,700 jobs in ten minutes of a busy server, removed projects' included.
Each server process prunes as it starts, before it serves, and then every six hours; what
another already deleted is gone, so workers pruning side by side do no harm. The log is also
the webhooks' and the audit's queue: an event is kept far longer than either takes to read
it."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from kernel import storage
from kernel.clock import iso_time
from kernel.errors import log_failure

log = logging.getLogger("neuralmind.kernel")

PRUNE_EVERY_S = 6 * 3600


def before(days: int) -> str:
    """The ISO time ``days`` ago, in the form every record writes (kernel.clock)."""
    return iso_time(datetime.now(UTC) - timedelta(days=days))


class Retention:
    """Prunes the kernel's events and finished jobs past their settings' age: once as the
    kernel starts, then on a thread."""

    def __init__(self, settings, events, jobs):
        self.settings, self.events, self.jobs = settings, events, jobs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kernel-retention", daemon=True)

    def start(self) -> None:
        """The first round now, before the kernel serves: it reads the tables it prunes
        whole (no index on an age), so a damaged kernel.db the start's other reads missed
        stops the start (the Kernel says it in one line) rather than being a log line while
        every route answers 500. The next rounds run on the thread."""
        if self.settings.keep_events_days or self.settings.keep_jobs_days:
            self._round(damage_stops=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def prune(self) -> dict[str, int]:
        """``{"events": n, "jobs": n}`` deleted now."""
        gone = {"events": 0, "jobs": 0}
        if days := self.settings.keep_events_days:
            gone["events"] = self.events.prune(before(days))
        if days := self.settings.keep_jobs_days:
            gone["jobs"] = self.jobs.prune(before(days))
        if any(gone.values()):
            log.info("pruned %(events)d events and %(jobs)d finished jobs past their keep", gone)
        return gone

    def _round(self, damage_stops: bool = False) -> None:
        try:
            self.prune()
        except Exception as ex:  # a locked or unreachable database: the next round tries
            if damage_stops and storage.damaged(ex):
                raise
            log_failure(log, "pruning old events and jobs", ex)

    def _run(self) -> None:
        while not self._stop.wait(PRUNE_EVERY_S):
            self._round()
            self.events.db.close()  # this thread's connection: not held open for six hours
