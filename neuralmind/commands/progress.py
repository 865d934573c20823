"""A build's progress on the terminal: files, nodes and an ETA from the job's progress
fields (``files_total``, ``files_done``, ``chunks_embedded``), redrawn in place on a TTY."""

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
        self._last = ""

    def line(self, job: Job) -> str:
        p = job.progress or {}
        total, done = p.get("files_total"), p.get("files_done", 0)
        nodes = p.get("nodes", p.get("chunks_embedded", 0))
        if not total:
            return f"{job.status}: scanning files…"
        frac = min(1.0, done / total)
        bar = "#" * int(frac * self.WIDTH)
        elapsed = time.monotonic() - self.started
        if job.finished or not done:
            eta = ""
        elif done >= total:
            eta = " · embedding"
        else:
            eta = f" · ETA {max(0, elapsed / done * (total - done)):.0f}s"
        return (f"[{bar.ljust(self.WIDTH, '-')}] {done}/{total} files · {nodes} nodes embedded"
                f" · {elapsed:.0f}s{eta}")

    def __call__(self, job: Job) -> None:
        text = self.line(job)
        if self.tty:
            self.out.write("\r\033[K" + text + ("\n" if job.finished else ""))
        elif job.finished or not self._last:  # a log gets the first and the last line only
            self.out.write(text + "\n")
        self._last = text
        self.out.flush()
