"""A build's progress on the terminal, redrawn in place on a TTY: its files first
(``files_done`` of ``files_total``), then the nodes the model embeds (``chunks_embedded`` of
``chunks_total``), each with an ETA from its own pace — the embedding runs on after the last
file is read, and is most of a first build."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from neuralmind.client import Job


class ProgressBar:
    WIDTH = 28

    def __init__(self, out: TextIO | None = None):
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.started = time.monotonic()
        self._embedding: tuple[float, int] | None = None  # (when, count) at its first sight
        self._last = ""

    def line(self, job: Job) -> str:
        p = job.progress or {}
        total, done = p.get("files_total"), p.get("files_done", 0)
        if not total:
            return f"{job.status}: scanning files…"
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
        text = self.line(job)
        if self.tty:
            self.out.write("\r\033[K" + text + ("\n" if job.finished else ""))
        elif job.finished or not self._last:  # a log gets the first and the last line only
            self.out.write(text + "\n")
        self._last = text
        self.out.flush()


def _bar(done: int, total: int, width: int) -> str:
    filled = int(min(1.0, done / total) * width)
    return "[" + ("#" * filled).ljust(width, "-") + "]"


def _eta(job: Job, spent: float, done: int, total: int) -> str:
    """`` · ETA Ns`` at the pace of ``done`` units in ``spent`` seconds, while there is one."""
    if job.finished or done <= 0 or done >= total:
        return ""
    return f" · ETA {max(0.0, spent / done * (total - done)):.0f}s"
