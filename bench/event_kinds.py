"""The event kinds bench/webhooks.py writes into a server's log, declared through the
``register_event_kinds`` hook: the kernel refuses a webhook whose pattern matches no declared
kind, and the bench's events must be its own, so no plugin reacts to them as to real ones.

In process: ``make_kernel(..., extra_plugins=[bench.event_kinds])``; a real server:
``site()``'s folder on PYTHONPATH and ``PLUGIN`` among its plugins."""

from __future__ import annotations

from pathlib import Path

from kernel.events import EventKind
from kernel.plugins import hookimpl

PLUGIN = "bench_events"
KINDS = ("bench0.event", "bench1.event", "one.event", "five.event")


@hookimpl
def register_event_kinds(kernel):
    return [EventKind(kind, "written by bench/webhooks.py") for kind in KINDS]


def site(folder: Path) -> Path:
    """A dist-info folder declaring this module as the ``bench_events`` plugin (entry point
    in the ``neuralmind`` group), for a server's PYTHONPATH."""
    from tests.support import plugin_site
    return plugin_site(Path(folder) / "bench-events-site", "neuralmind-bench-events",
                       {PLUGIN: "bench.event_kinds"})
