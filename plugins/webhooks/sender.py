"""The background sender: one thread per worker that takes new events into the queue, and,
in the one worker holding the lease (the kernel lease ``webhooks.sender``: one worker among
every server's, when they share a database), sends what is due.

``track_event`` only wakes the thread, so a request never waits on a webhook. Every worker
fills the queue (the store makes that safe); only the lease holder sends, one delivery in
flight per hook (so each hook receives its events in order) and up to ``concurrency`` hooks
at once. The lease is renewed between tries and outlives the longest try, so a holder still
sending still holds it; a worker killed mid-send leaves its delivery pending, and another
worker takes the lease once it lapses (at once, for a dead process of the same host) and
sends it again, under the same delivery id.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from neuralmind import log_failure
from plugins.webhooks.targets import Connections

log = logging.getLogger("neuralmind.webhooks")

LEASE = "webhooks.sender"
PRUNE_EVERY_S = 3600.0
GATHER_S = 0.02  # after a wake-up, wait this long for the events that follow it
DRAIN_S = 1.0  # a hook sends its backlog on, one delivery after another, this long at most


class Sender:
    def __init__(self, service):
        self.service = service
        self.settings = service.settings
        self.leases = service.kernel.leases
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._busy: set[str] = set()  # hooks with a delivery in flight
        self._lock = threading.Lock()
        self._renewed_at = float("-inf")  # monotonic time the lease was last taken or renewed
        self._pruned_at = float("-inf")
        self._failing = False
        self.connections = Connections()

    def start(self) -> None:
        self._pool = ThreadPoolExecutor(self.settings.concurrency,
                                        thread_name_prefix="webhooks-send")
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """Something to do (an event committed, a hook resumed): look now, not at the next poll."""
        self._wake.set()

    def stop(self) -> None:
        """Stop taking work, let tries in flight finish (each within ``timeout_s``), and hand
        the lease over at once rather than when it lapses."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.timeout_s + 5)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self.connections.close()
        try:
            self.leases.release(LEASE, self.holder)
        except Exception as ex:  # the next holder waits out the lease instead
            log_failure(log, "webhooks: handing over the sender's lease", ex)

    def _run(self) -> None:
        while not self._stopping.is_set():
            if self._wake.wait(self.settings.poll_s):
                self._stopping.wait(GATHER_S)  # the rest of a burst: one round takes it all in
            self._wake.clear()
            if not self._stopping.is_set():
                self.round()

    def round(self) -> None:
        """Take in new events, then send what is due if this worker holds the lease; never
        raises (a failure is logged once per outage and tried again at the next poll)."""
        try:
            self.service.take_in()
            if self.holds_lease():
                self._send_due()
                self._prune()
        except Exception as ex:
            if not self._failing:
                log.error("webhooks: the sender is failing (%s: %s); retrying every %s s",
                          type(ex).__name__, ex, self.settings.poll_s, exc_info=ex)
            self._failing = True
            return
        if self._failing:
            log.warning("webhooks: the sender works again")
            self._failing = False

    def holds_lease(self) -> bool:
        """Take or renew the lease when a third of it has passed since the last renewal, so
        the holder writes about three times per lease, not once per try."""
        if time.monotonic() - self._renewed_at < self.settings.lease_s / 3:
            return True
        if self.leases.acquire(LEASE, self.holder, self.settings.lease_s) is None:
            self._renewed_at = time.monotonic()
            return True
        self._renewed_at = float("-inf")
        return False

    def _send_due(self) -> None:
        with self._lock:
            busy = set(self._busy)
        for row in self.service.store.due(self.service.clock(), busy):
            if self._stopping.is_set() or not self.holds_lease():
                return
            with self._lock:
                self._busy.add(row["hook_id"])
            self._pool.submit(self._deliver, row)

    def _deliver(self, row) -> None:
        """Send the hook's due deliveries one after another while they succeed, for
        :data:`DRAIN_S` at most (a backlog drains on one kept connection without a round of
        the main loop per delivery, and a slow receiver's backlog does not hold a sending
        thread while other hooks wait for one)."""
        hook_id = row["hook_id"]
        until = time.monotonic() + DRAIN_S
        try:
            while self.service.attempt(row) and not self._stopping.is_set() \
                    and time.monotonic() < until and self.holds_lease():
                due = self.service.store.due(self.service.clock(), hook_id=hook_id)
                if not due:
                    break
                row = due[0]
        except Exception as ex:
            log_failure(log, f"webhooks: recording delivery {row['id']} to hook {hook_id}", ex)
        finally:
            with self._lock:
                self._busy.discard(hook_id)
            self._wake.set()  # the hook's next delivery may be due

    def _prune(self) -> None:
        if time.monotonic() - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = time.monotonic()
        cutoff = self.service.clock() - self.settings.keep_days * 86_400
        removed = self.service.store.prune(cutoff)
        if removed:
            log.info("webhooks: forgot %d finished deliveries older than %d days", removed,
                     self.settings.keep_days)
