"""``neuralmind job show|wait|cancel ID``: the server's long work — a build left running by
``--no-wait`` or a Ctrl-C, a maintenance job — followed or stopped from the terminal."""

from __future__ import annotations

import argparse
import re

from neuralmind.commands.common import (CommandError, client, common_flags, emit, fields,
                                        seconds)
from neuralmind.commands.progress import ProgressBar, detached_on_interrupt, job_summary

FIELDS = ("id", "kind", "status", "project_id", "progress", "result", "error", "created_at",
          "started_at", "finished_at")


def job_id(text: str) -> str:
    """An argparse ``type``: what a job id can be (16 hex digits), so a path-like one is named
    here rather than read by the server as another route."""
    if not re.fullmatch(r"[0-9a-f]{16}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (16 hex digits, as "
                                         "`build --no-wait` prints it)")
    return text


def cmd_show(args) -> int:
    job = client(args).jobs.get(args.id)
    return emit(args, job.raw, text=fields(job, FIELDS))


def cmd_wait(args) -> int:
    bar = ProgressBar(quiet=args.json)
    try:
        with detached_on_interrupt(bar, waiting=True):
            job = client(args).jobs.wait(args.id, timeout=args.timeout, on_progress=bar)
    except TimeoutError:
        raise CommandError(f"job {args.id} is still running after {args.timeout:g} s: "
                           f"`neuralmind job wait {args.id}` follows it again, `neuralmind job "
                           f"cancel {args.id}` stops it", exit_code=1) from None
    emit(args, job.raw, text=job_summary(job))
    return 0 if job.status == "done" else 1


def cmd_cancel(args) -> int:
    job = client(args).jobs.cancel(args.id)
    return emit(args, job.raw, text=f"asked job {job.id} ({job.kind}) to stop; it is "
                f"{job.status} — `neuralmind job wait {job.id}` follows it to the end")


def add_commands(sub) -> None:
    from kernel.commands import command_group
    group = command_group(sub, "job", "the server's long work: show, wait for or cancel a job")
    common = common_flags()
    for name, func, help in (("show", cmd_show, "one job: status, progress, result"),
                             ("wait", cmd_wait, "follow a job to its end (exit 1 unless done)"),
                             ("cancel", cmd_cancel, "ask a running job to stop")):
        parser = group.add_parser(name, parents=[common], help=help)
        parser.add_argument("id", type=job_id, help="the job id (`build --no-wait` prints it)")
        parser.set_defaults(func=func)
        if name == "wait":
            parser.add_argument("--timeout", type=seconds, default=3600,
                                help="seconds to wait at most (default 3600)")
