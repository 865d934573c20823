"""A build's progress on the terminal, redrawn in place on a TTY: its files first
(``files_done`` of ``files_total``), then the nodes the model embeds (``chunks_embedded`` of
``chunks_total``), each with an ETA from its own pace — the embedding runs on after the last
file is read, and is most of a first build."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from neuralmind.client import Job
from neuralmind.commands.common import CommandError, counted, shown


class ProgressBar:
    """Draws each poll's job (nothing when ``quiet``) and keeps the last one seen."""

    WIDTH = 28

    def __init__(self, out: TextIO | None = None, quiet: bool = False):
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.quiet = quiet
        self.started = time.monotonic()
        self.job: Job | None = None
        self._embedding: tuple[float, int] | None = None  # (when, count) at its first sight
        self._last = ""

    def line(self, job: Job) -> str:
        """The line to show; "" for another kind of job when it ends (its summary says it)."""
        if job.kind != "build":
            return "" if job.finished else f"{job.kind} {job.status}…"
        p = job.progress or {}
        total, done = p.get("files_total"), p.get("files_done", 0)
        if not total:
            return f"{job.status}: no files to index" if job.finished else "scanning files…"
        now = time.monotonic()
        elapsed = now - self.started
        embedded, to_embed = p.get("chunks_embedded", 0), p.get("chunks_total", 0)
        if done < total or not to_embed:
            eta = _eta(job, elapsed, done, total)
            return (f"{_bar(done, total, self.WIDTH)} {done}/{total} files · {embedded} nodes "
                    f"embedded · {elapsed:.0f}s{eta}")
        if self._embedding is None:
            self._embedding = (now, embedded)
        since, at = self._embedding
        eta = _eta(job, now - since, embedded - at, to_embed - at)
        return (f"{_bar(embedded, to_embed, self.WIDTH)} {embedded}/{to_embed} nodes embedded"
                f" · {elapsed:.0f}s{eta}")

    def __call__(self, job: Job) -> None:
        self.job = job
        if self.quiet:
            return
        text = shown(self.line(job))
        if not text:
            if self.tty and self._last:
                self.out.write("\r\033[K")
        elif self.tty:
            self.out.write("\r\033[K" + text + ("\n" if job.finished else ""))
        elif job.finished or not self._last:  # a log gets the first and the last line only
            self.out.write(text + "\n")
        self._last = text
        self.out.flush()


class Interrupted(CommandError):
    """Ctrl-C while a command followed a job: the job goes on in the server."""

    exit_code = 130


@contextmanager
def detached_on_interrupt(bar: ProgressBar, waiting: bool = False) -> Iterator[None]:
    """Ctrl-C while following a job ends the command with one line — the job goes on in the
    server, and how to follow or cancel it — instead of a traceback."""
    try:
        yield
    except KeyboardInterrupt:
        if bar.tty and bar._last and not bar.quiet:
            bar.out.write("\n")
        job = bar.job
        if job is None:
            raise Interrupted("interrupted; anything it started goes on in the server") from None
        what = "stopped waiting" if waiting else "interrupted"
        raise Interrupted(f"{what}: {job.kind} job {job.id} goes on in the server — follow it "
                          f"with `neuralmind job wait {job.id}`, stop it with `neuralmind job "
                          f"cancel {job.id}`") from None


def job_summary(job: Job) -> str:
    """One line for a finished job: a build's counts (and what it skipped), else its status."""
    if job.status != "done":
        error = job.error or {}
        return (f"{job.kind} {job.status}: {error.get('message', '')} "
                f"[{error.get('code', job.status)}]")
    r = job.result if isinstance(job.result, dict) else {}
    if "nodes" not in r:
        return f"{job.kind} done"
    seconds = r.get("duration_ms", 0) / 1000
    skipped = r.get("skipped") or {}
    why = ", ".join(f"{n} {reason}" for reason, n in skipped.items())
    # files_total: the repository's files indexed and skipped; files: those indexed, ingested too
    repository = r.get("files_total", r.get("files", 0)) - r.get("files_skipped", 0)
    ingested = r.get("files", 0) - repository
    return (f"indexed {counted(r.get('files', 0), 'file')}"
            + (f" (the repository's {repository}, {ingested} ingested documents)"
               if ingested > 0 else "")
            + f", {r['nodes']} nodes, {r.get('edges')} edges "
            f"in {seconds:.1f}s ({r.get('files_changed')} changed, {r.get('files_deleted')} deleted, "
            + (f"{r['files_reindexed']} re-indexed unchanged, " if r.get("files_reindexed") else "")
            + f"{r.get('chunks_embedded')} embedded)"
            + (f"; skipped {counted(r.get('files_skipped', 0), 'file')}: {why}" if why else "")
            + ("; keyword search only: no embedding model (docs/embeddings.md)"
               if r.get("semantic") is False else ""))


def _bar(done: int, total: int, width: int) -> str:
    filled = int(min(1.0, done / total) * width)
    return "[" + ("#" * filled).ljust(width, "-") + "]"


def _eta(job: Job, spent: float, done: int, total: int) -> str:
    """`` · ETA Ns`` at the pace of ``done`` units in ``spent`` seconds, while there is one."""
    if job.finished or done <= 0 or done >= total:
        return ""
    return f" · ETA {max(0.0, spent / done * (total - done)):.0f}s"
