"""Which process is which. A pid is reused — a container's restart numbers its processes from 1
again — so a row names the process that wrote it by its pid and the process's start time (field
22 of ``/proc/<pid>/stat``, clock ticks since boot): the process is still there only while a
live process has that pid *and* that start. Where there is no ``/proc`` the start is None and
the pid alone decides."""

from __future__ import annotations

import os

from kernel.daemon import pid_alive


def start_of(pid: int | None) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None: no ``/proc``, no such
    process."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # the fields after the command name (field 2), which is in parentheses and may hold
        # spaces and parentheses itself: field 3 first, so field 22 is the 20th
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def own_start() -> int | None:
    return start_of(os.getpid())


def alive(pid: int | None, start: int | None) -> bool:
    """Whether the process recorded as ``pid`` started at ``start`` still runs: not when the
    pid is free, nor when it now belongs to a process that started at another time. A row
    without a start (written before it was recorded, or without ``/proc``) goes by its pid."""
    if not pid_alive(pid):
        return False
    now = start_of(pid) if start is not None else None
    return now is None or now == start
