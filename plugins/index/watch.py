"""Watch mode: watchdog reports file changes, and after a short quiet period only those
files are re-indexed. One watcher per project across all workers: it holds the project's
``index.watch`` kernel lease, refreshes it with its status every second, and stops when any
worker sets ``stop_requested`` (or on shutdown)."""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections import deque
from typing import Any

from neuralmind import log_failure, now_iso
from plugins.index.service import LOCK_TTL_S, build_lease

log = logging.getLogger("neuralmind.index.watch")
TTL_S = 15.0
TICK_S = 0.2
BEAT_S = 1.0
SKIP_DIRS = (".git", ".neuralmind")
# reads ("opened", "closed_no_write") are not changes: the re-index reads files itself
CHANGES = ("created", "modified", "deleted", "moved", "closed")


def watch_lease(project) -> str:
    """The kernel lease a project's one watcher holds, whichever worker runs it."""
    return f"index.watch:{project.id}"


class _Stopped(Exception):
    """A re-index ends early: its watcher is stopping."""


class _Watcher:
    def __init__(self, service, project, owner: str, debounce_s: float):
        self.service, self.project, self.owner = service, project, owner
        self.leases = service.kernel.leases
        self.lease = watch_lease(project)
        self.root = os.path.realpath(project.path)
        self.state_dir = os.path.realpath(project.state_dir)
        self.debounce_s = debounce_s
        self.pending: set[str] = set()
        self.rescan = False
        self.last_change = 0.0
        self.state: dict[str, Any] = {"root": self.root, "pid": os.getpid(),
                                      "started_at": now_iso(), "last_event": None,
                                      "last_indexed_at": None, "recent_errors": []}
        self.errors: deque = deque(maxlen=10)
        self.guard = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"watch-{project.id}", daemon=True)
        self.observer = None

    # watchdog calls this from its own thread
    def dispatch(self, event) -> None:
        paths = [event.src_path, getattr(event, "dest_path", None) or None]
        for raw in filter(None, paths):
            raw = os.fsdecode(raw)
            if raw == self.state_dir or raw.startswith(self.state_dir + os.sep):
                continue
            rel = os.path.relpath(raw, self.root).replace(os.sep, "/")
            if rel.startswith("..") or rel.split("/")[0] in SKIP_DIRS or rel == ".":
                continue
            dir_noise = event.is_directory and event.event_type in ("created", "modified")
            if event.event_type not in CHANGES or dir_noise:
                continue
            with self.guard:
                # a folder, or a .gitignore (what it leaves out anywhere below changed): walk
                # the whole tree again
                if event.is_directory or rel.rsplit("/", 1)[-1] == ".gitignore":
                    self.rescan = True
                else:
                    self.pending.add(rel)
                self.last_change = time.monotonic()
                self.state["last_event"] = {"type": event.event_type, "path": rel, "at": now_iso()}

    def start(self) -> None:
        from watchdog.observers import Observer
        self.observer = Observer()
        self.observer.schedule(self, self.root, recursive=True)
        self.observer.start()
        self.thread.start()

    def _loop(self) -> None:
        last_beat = 0.0
        try:
            while not self.stopping.is_set():
                now = time.monotonic()
                if now - last_beat >= BEAT_S:
                    last_beat = now
                    if not self._beat():
                        break
                if (self.pending or self.rescan) and now - self.last_change >= self.debounce_s:
                    self._index()
                self.stopping.wait(TICK_S)
        finally:
            self.observer.stop()
            self.observer.join(5)
            self.leases.release(self.lease, self.owner)

    def _beat(self) -> bool:
        """Publish the status; False when a stop was asked for or the lock was lost."""
        with self.guard:
            self.state["queued"] = len(self.pending) + (1 if self.rescan else 0)
            self.state["recent_errors"] = list(self.errors)
            state = dict(self.state)
        if not self.leases.heartbeat(self.lease, self.owner, state):
            return False
        row = self.leases.get(self.lease)
        return not (row and row["stop_requested"])

    def _index(self) -> None:
        owner = "watch-build-" + secrets.token_hex(4)
        build = build_lease(self.project)
        if self.leases.acquire(build, owner, LOCK_TTL_S) is not None:
            return  # a build is running; it or the next tick picks the changes up
        with self.guard:
            paths, rescan = set(self.pending), self.rescan
            self.pending.clear()
            self.rescan = False
        beat = [time.monotonic()]

        def progress(**_) -> None:
            """A long re-index keeps both leases: the build's (or a build would start beside
            it once its TTL lapsed) and the watcher's (its status said not running)."""
            if time.monotonic() - beat[0] >= BEAT_S:
                beat[0] = time.monotonic()
                self.leases.heartbeat(build, owner)
                if not self._beat():
                    self.stopping.set()

        def check() -> None:
            if self.stopping.is_set():
                raise _Stopped

        try:
            self.service.run_build(self.project, paths=None if rescan else paths, trigger="watch",
                                   check=check, progress=progress)
            self.state["last_indexed_at"] = now_iso()
        except _Stopped:  # watch/stop, or the lock lost: a build writes at its end, so nothing
            pass  # of this one was; the next build picks the changes up
        except Exception as ex:  # keep watching; the error shows in the status
            log_failure(log, f"watch re-index of {self.project.id}", ex)
            self.errors.append({"at": now_iso(), "error": f"{type(ex).__name__}: {ex}"[:300],
                                "paths": sorted(paths)[:20]})
        finally:
            self.leases.release(build, owner)


class Watchers:
    """This process's watchers, and the cross-worker view of any project's watcher."""

    def __init__(self, service):
        self.service = service
        self._mine: dict[str, _Watcher] = {}
        self._lock = threading.Lock()

    def start(self, project, actor, show_root: bool = True) -> dict[str, Any]:
        with self._lock:
            mine = self._mine.get(project.id)
            if mine is None or not mine.thread.is_alive():
                owner = f"watch-{os.getpid()}-{secrets.token_hex(4)}"
                if self.service.kernel.leases.acquire(watch_lease(project), owner, TTL_S) is None:
                    watcher = _Watcher(self.service, project, owner,
                                       self.service.settings.watch_debounce_s)
                    watcher.start()
                    watcher._beat()
                    self._mine[project.id] = watcher
        return self.status(project, show_root)

    def stop(self, project, show_root: bool = True) -> dict[str, Any]:
        self.service.kernel.leases.request_stop(watch_lease(project))
        mine = self._mine.pop(project.id, None)
        if mine is not None:
            mine.stopping.set()
            mine.thread.join(10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self._running(project):
            time.sleep(0.1)
        return self.status(project, show_root)

    def forget(self, project) -> None:
        """Stop this process's watcher of a removed registration, without waiting. Only its
        own: asking the lease to stop, a process finding the removal late would stop the
        watcher of the project as registered anew since."""
        with self._lock:
            mine = self._mine.get(project.id)
            if mine is None or mine.project.registered_at != project.registered_at:
                return
            del self._mine[project.id]
        mine.stopping.set()

    def _running(self, project):
        return self.service.kernel.leases.holder(watch_lease(project), TTL_S)

    def status(self, project, show_root: bool = True) -> dict[str, Any]:
        """The project's watcher, whichever worker runs it. ``root`` is the project's absolute
        path: ``show_root=False`` (a caller without ``projects.paths``, to whom
        ``GET /v1/projects/{id}`` shows no ``path`` either) answers it as null."""
        row = self._running(project)
        if row is None:
            return {"project_id": project.id, "running": False}
        state = json.loads(row["state"] or "{}")
        return {"project_id": project.id, "running": True,
                "root": state.get("root") if show_root else None,
                "pid": row["pid"], "started_at": state.get("started_at"),
                "queued": state.get("queued", 0), "last_event": state.get("last_event"),
                "last_indexed_at": state.get("last_indexed_at"),
                "recent_errors": state.get("recent_errors", [])}

    def shutdown(self) -> None:
        for watcher in list(self._mine.values()):
            watcher.stopping.set()
        for watcher in list(self._mine.values()):
            watcher.thread.join(10)
        self._mine.clear()
