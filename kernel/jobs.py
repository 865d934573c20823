"""Persisted jobs: long work runs in a thread of the worker that took the request, and its
row in the kernel's SQLite lets any worker answer ``GET /v1/jobs/{jid}``."""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Literal

from pydantic import Field

from kernel import procs
from kernel.clock import now_iso
from kernel.errors import APIError, Conflict, NotFound, log_failure, storage_failure
from kernel.leases import HOST
from kernel.models import Model

log = logging.getLogger("neuralmind.jobs")

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    project_id TEXT,
    status TEXT NOT NULL,
    actor TEXT,
    progress TEXT NOT NULL DEFAULT '{}',
    result TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    pid INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_by_project ON jobs (project_id, created_at);
""", "ALTER TABLE jobs ADD COLUMN host TEXT;",
    # when the process ``pid`` names started (kernel/procs.py): a pid is given out again, a pid
    # with its start time is not
    "ALTER TABLE jobs ADD COLUMN pid_start BIGINT;"]
# PostgreSQL's schema started as SQLite's second version, then took the steps after it —
# each harmless run again (an older release may have written back the version it knew)
PG_MIGRATION = MIGRATIONS[0].replace("    pid INTEGER,\n", "    pid INTEGER,\n    host TEXT,\n")
PG_STEPS = [step.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS") for step in MIGRATIONS[2:]]

Status = Literal["queued", "running", "done", "error", "cancelled"]
ACTIVE = ("queued", "running")
_ACTIVE_SQL = "(" + ", ".join(f"'{status}'" for status in ACTIVE) + ")"  # for ``status IN``
FINISH_RETRY_S = 0.5  # first pause before recording a job's end again, doubling to 10 s


class JobError(Model):
    code: str
    message: str


class Job(Model):
    id: str
    kind: str
    project_id: str | None
    status: Status
    progress: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: JobError | None = None
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None


class JobAccepted(Model):
    """The 202 body: poll ``Location`` (``/v1/jobs/{id}``) until the job is done."""

    job: Job


class JobCancelled(Exception):
    """Raised inside a job's work by ``JobContext.check`` once a stop was asked for."""


def _job(row) -> Job:
    return Job(id=row["id"], kind=row["kind"], project_id=row["project_id"], status=row["status"],
               progress=json.loads(row["progress"] or "{}"),
               result=json.loads(row["result"]) if row["result"] else None,
               error=json.loads(row["error"]) if row["error"] else None,
               created_at=row["created_at"], started_at=row["started_at"],
               finished_at=row["finished_at"])


class JobContext:
    """What a job's work sees: report progress, notice a stop request."""

    PROGRESS_EVERY_S = 0.2

    def __init__(self, jobs: Jobs, job_id: str):
        self._jobs = jobs
        self.id = job_id
        self._progress: dict[str, Any] = {}
        self._last_write = 0.0

    def progress(self, force: bool = False, **fields: Any) -> None:
        self._progress.update(fields)
        now = time.monotonic()
        if force or now - self._last_write >= self.PROGRESS_EVERY_S:
            self._last_write = now
            with self._jobs.db.transaction() as conn:
                conn.execute("UPDATE jobs SET progress = ? WHERE id = ?",
                             (json.dumps(self._progress), self.id))

    @property
    def cancelled(self) -> bool:
        row = self._jobs.db.conn.execute("SELECT cancel_requested FROM jobs WHERE id = ?",
                                         (self.id,)).fetchone()
        return bool(row and row[0])

    def check(self) -> None:
        if self.cancelled:
            raise JobCancelled()


Work = Callable[[JobContext], Any]


def _failure(jid: str, ex: Exception) -> dict[str, str]:
    """A failed job's error, logged: the stored state's fault as a route says it (one line),
    else an internal error (its traceback)."""
    fault = log_failure(log, f"job {jid}", ex)
    if fault is None:
        return {"code": "internal_error", "message": "the job failed; the server log has the "
                                                     "details"}
    return {"code": fault[0].code, "message": fault[0].message}


def _marks(values: Collection) -> str:
    """Placeholders for ``IN (…)``: ``NULL`` (which matches nothing) for no values, as
    PostgreSQL refuses an empty list where SQLite takes it."""
    return ",".join("?" * len(values)) or "NULL"


def _seen(visible: Collection[str] | None, hidden: Collection[str]) -> tuple[str, list]:
    """The SQL condition, with its arguments, for the jobs a caller sees: those of no project
    and of the ``visible`` projects; with ``visible`` None (a caller who sees every project),
    those of every project but ``hidden``, removed ones too, as ``GET /v1/jobs/{id}`` shows."""
    if visible is not None:
        return f"(project_id IS NULL OR project_id IN ({_marks(visible)}))", list(visible)
    if not hidden:
        return "1 = 1", []
    return f"(project_id IS NULL OR project_id NOT IN ({_marks(hidden)}))", list(hidden)


class Jobs:
    def __init__(self, db):
        self.db = db

    def submit(self, kind: str, work: Work, *, project_id: str | None = None,
               actor: str | None = None, wait: bool = False) -> Job:
        """Record a job and run ``work(ctx)``: inline when ``wait``, else in a thread."""
        return self.start(self.create(kind, project_id=project_id, actor=actor), work, wait=wait)

    def create(self, kind: str, *, project_id: str | None = None, actor: str | None = None) -> str:
        """Record a queued job and return its id, for work that must name its job before it
        starts (a lock that says which job holds it); then :meth:`start` or :meth:`discard`."""
        jid = secrets.token_hex(8)
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO jobs (id, kind, project_id, status, actor, created_at, pid, "
                         "pid_start, host) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                         (jid, kind, project_id, actor, now_iso(), os.getpid(), procs.own_start(),
                          HOST))
        return jid

    def start(self, jid: str, work: Work, *, wait: bool = False) -> Job:
        """Run ``work(ctx)`` for a created job: inline when ``wait``, else in a thread — once
        the job's row was read, so that a failure here (a locked file, a pool that timed out)
        means the work never started, and the caller may let go of what it holds for it."""
        if wait:
            self._run(jid, work)
            return self.get(jid)
        job = self.get(jid)
        threading.Thread(target=self._run, args=(jid, work), name=f"job-{jid}",
                         daemon=True).start()
        return job

    def discard(self, jid: str) -> None:
        """Forget a created job that never started."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM jobs WHERE id = ? AND status = 'queued' AND started_at IS NULL",
                         (jid,))

    def _finish(self, jid: str, status: str, result: Any = None, error: dict | None = None,
                progress: dict | None = None) -> None:
        """Record how the job ended (with its last progress) — once the database is back, if
        it is out of reach now: a job's end is a write like any other, and is not lost."""
        pause = FINISH_RETRY_S
        while True:
            try:
                with self.db.transaction() as conn:
                    conn.execute("UPDATE jobs SET status = ?, result = ?, error = ?, "
                                 "finished_at = ?, progress = COALESCE(?, progress) WHERE id = ?",
                                 (status, json.dumps(result) if result is not None else None,
                                  json.dumps(error) if error else None, now_iso(),
                                  json.dumps(progress) if progress else None, jid))
                return
            except Exception as ex:
                if not storage_failure(ex):
                    raise
                if pause == FINISH_RETRY_S:
                    log.warning("job %s ended %s; recording it once the database is back (%s)",
                                jid, status, ex)
                time.sleep(pause)
                pause = min(pause * 2, 10.0)

    def _run(self, jid: str, work: Work) -> None:
        ctx = JobContext(self, jid)
        # however it ended, with the progress it reported last (a write is kept to one per
        # PROGRESS_EVERY_S, so the last few may not be stored yet)
        self._finish(jid, *self._outcome(jid, work, ctx), progress=ctx._progress)

    def _outcome(self, jid: str, work: Work, ctx: JobContext
                 ) -> tuple[str, Any, dict[str, str] | None]:
        """Run ``work(ctx)`` as the job: ``(status, result, error)`` of how it ended."""
        try:
            with self.db.transaction() as conn:
                conn.execute("UPDATE jobs SET status = 'running', started_at = ? WHERE id = ?",
                             (now_iso(), jid))
            return "done", work(ctx), None
        except JobCancelled:
            return "cancelled", None, {"code": "cancelled", "message": "stopped on request"}
        except APIError as ex:
            return "error", None, {"code": ex.code, "message": ex.message}
        except Exception as ex:
            return "error", None, _failure(jid, ex)

    def find(self, jid: str) -> Job | None:
        row = self.db.conn.execute("SELECT * FROM jobs WHERE id = ?", (jid,)).fetchone()
        return _job(row) if row else None

    def get(self, jid: str) -> Job:
        job = self.find(jid)
        if job is None:
            raise NotFound(f"no job with id {jid}", code="job_not_found")
        return job

    def active(self, kind: str, project_id: str) -> Job | None:
        row = self.db.conn.execute(
            f"SELECT * FROM jobs WHERE kind = ? AND project_id = ? AND status IN {_ACTIVE_SQL} "
            "ORDER BY created_at DESC LIMIT 1", (kind, project_id)).fetchone()
        return _job(row) if row else None

    def active_counts(self, visible: Collection[str] | None, hidden: Collection[str] = ()
                      ) -> dict[str, int]:
        """``{"queued": n, "running": n}`` over the jobs the caller sees (:func:`_seen`)."""
        seen, args = _seen(visible, hidden)
        rows = self.db.conn.execute(f"SELECT status, COUNT(*) AS n FROM jobs WHERE status IN "
                                    f"{_ACTIVE_SQL} AND {seen} GROUP BY status", args)
        return {"queued": 0, "running": 0, **{r["status"]: r["n"] for r in rows}}

    def list(self, *, visible: Collection[str] | None, hidden: Collection[str] = (),
             project_id: str | None, status: str | None, limit: int, after: list | None
             ) -> list[Job]:
        """Newest first: the jobs the caller sees (:func:`_seen`)."""
        seen, args = _seen(visible, hidden)
        sql = f"SELECT * FROM jobs WHERE {seen}"
        if project_id:
            sql += " AND project_id = ?"
            args.append(project_id)
        if status:
            sql += " AND status = ?"
            args.append(status)
        if after:
            sql += " AND (created_at, id) < (?, ?)"
            args += after
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        args.append(limit)
        return [_job(r) for r in self.db.conn.execute(sql, args).fetchall()]

    def cancel(self, jid: str) -> Job:
        job = self.get(jid)
        if job.status not in ACTIVE:
            raise Conflict(f"job {jid} is already {job.status}", code="job_finished")
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (jid,))
        return self.get(jid)

    def prune(self, before: str) -> int:
        """Delete the jobs that finished before ``before`` (an ISO time); how many went."""
        with self.db.transaction() as conn:
            return conn.execute(f"DELETE FROM jobs WHERE status NOT IN {_ACTIVE_SQL} "
                                "AND finished_at < ?", (before,)).rowcount

    def cancel_project(self, project_id: str) -> None:
        """Ask every job of a project still queued or running to stop (it was removed)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE project_id = ? "
                         f"AND status IN {_ACTIVE_SQL}", (project_id,))

    def mark_interrupted(self) -> int:
        """Jobs left queued/running by a process of this host that no longer exists — its pid
        free, or now another process's (kernel/procs.py) — end as ``interrupted``, and the
        leases they held are let go (another server's jobs are its own to judge)."""
        rows = self.db.conn.execute(
            f"SELECT id, pid, pid_start FROM jobs WHERE status IN {_ACTIVE_SQL} "
            "AND (host = ? OR host IS NULL)", (HOST,)).fetchall()
        dead = [r["id"] for r in rows if not procs.alive(r["pid"], r["pid_start"])]
        if dead:
            error = json.dumps({"code": "interrupted",
                                "message": "the server process running this job stopped"})
            with self.db.transaction() as conn:
                conn.executemany("UPDATE jobs SET status = 'error', error = ?, finished_at = ? "
                                 f"WHERE id = ? AND status IN {_ACTIVE_SQL}",
                                 [(error, now_iso(), jid) for jid in dead])
                # a lease names the job of the process that took it, so that process is gone
                conn.execute(f"DELETE FROM leases WHERE job_id IN ({_marks(dead)})", dead)
        return len(dead)
