"""Hooks of the tier2 bridge: it consumes the core's hooks and events, and nothing imports it.

``track_event`` wakes the copier that appends kernel events to the hash-chained ``audit.db``;
a middleware notes which token actors make requests, for the seat check; ``server_settings``
feeds ``[tier2.self_hosted]`` to server mode. A failure in here is logged and never fails a request.
"""

from __future__ import annotations

import logging

from neuralmind import EventKind, Permission, hookimpl, log_failure
from plugins.tier2_bridge import audit, seats
from plugins.tier2_bridge.selfhosted import server_keys
from plugins.tier2_bridge.storage import LazyDatabase

log = logging.getLogger("neuralmind.tier2")


class Bridge:
    """This process's audit trail and seat watch for one kernel."""

    def __init__(self, kernel):
        self.kernel = kernel
        section = kernel.settings.section("tier2", seats.SeatsSection)
        self.trail = audit.AuditTrail(_lazy(kernel, "tier2_audit", audit.audit_path(kernel.home),
                                            audit.MIGRATIONS, audit.PG_MIGRATIONS), kernel.events)
        ledger = seats.SeatLedger(_lazy(kernel, "tier2_seats", kernel.home / seats.SEATS_FILE,
                                        seats.MIGRATIONS, seats.PG_MIGRATIONS),
                                  section.seats_window_days)
        licence = seats.LicenseFile(seats.license_path(kernel.home, section.license_path))
        self.seats = seats.SeatWatch(ledger, licence, self._seats_changed)

    def _seats_changed(self, status: seats.SeatStatus) -> None:
        if status.exceeded:
            log.warning("tier2 seats: %d token actors in the last %d days exceed the %d seats "
                        "licensed to %s", status.active_actors, self.seats.ledger.window.days,
                        status.seats, status.licensee)
            self.kernel.emit("seats.exceeded", data=status.as_dict())
        elif status.seats is None:
            log.warning("tier2 seats: seat checks are off (%s); seats are no longer exceeded",
                        status.license_problem)
        else:
            log.warning("tier2 seats: back within the %s seats licensed (%d active)",
                        status.seats, status.active_actors)


def _lazy(kernel, component: str, path, migrations, pg_migrations) -> LazyDatabase:
    """The file in the home, or the database servers share when the kernel has one."""
    if kernel.settings.storage.backend == "postgres":
        return LazyDatabase(f"the shared database ({component})",
                            lambda: kernel.shared_database(component, pg_migrations))
    return LazyDatabase(str(path), lambda: kernel.open_database(path, migrations))


def bridge(kernel) -> Bridge:
    return kernel.state("tier2_bridge", lambda: Bridge(kernel))


class SeatCounter:
    """Falcon middleware: after each authenticated request, note a token actor as active.

    ``after_events``: the kernel runs it once the request's events are written, since noting
    can wait on seats.db's lock (up to its busy timeout) — a worker that dies meanwhile must
    not take a committed write's events with it."""

    after_events = True

    def __init__(self, bridge_: Bridge):
        self.bridge = bridge_

    def process_response(self, req, resp, resource, req_succeeded: bool) -> None:
        actor = getattr(req.context, "actor", None)
        if actor is None or actor.kind not in seats.COUNTED_KINDS:
            return
        try:
            self.bridge.seats.seen(actor.id)
        except Exception as ex:  # seat counting never turns a response into an error
            log_failure(log, f"tier2 seats: noting actor {actor.id}", ex)


@hookimpl
def register_event_kinds(kernel):
    return [EventKind("seats.exceeded", "more active token actors than the licence's seats")]


@hookimpl
def register_permissions(kernel):
    return [Permission("audit.read", "Read the tier2 hash-chained audit trail", ("admin",),
                       beyond_projects=True),
            Permission("seats.read", "See licensed seats against active token actors", ("admin",),
                       beyond_projects=True)]


@hookimpl
def register_middleware(kernel):
    return [SeatCounter(bridge(kernel))]


@hookimpl
def register_routes(kernel):
    from plugins.tier2_bridge.resources import AuditResource, SeatsResource
    b = bridge(kernel)
    return [("/v1/admin/audit", AuditResource(b)), ("/v1/admin/seats", SeatsResource(b))]


@hookimpl
def startup(kernel):
    b = bridge(kernel)
    b.seats.license_file.current()  # a missing or bad licence is warned about now
    b.trail.start()


@hookimpl
def shutdown(kernel):
    b = kernel.drop_state("tier2_bridge")
    if b is not None:
        b.trail.stop()


@hookimpl
def track_event(kernel, event):
    bridge(kernel).trail.notify()


@hookimpl
def server_settings(config):
    return server_keys(config)


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.tier2_bridge.commands import add_commands
    add_commands(subparsers)


@hookimpl
def storage_components(settings):
    from neuralmind import StorageComponent
    return [StorageComponent("tier2_audit", audit.PG_MIGRATIONS, ("audit", "audit_meta"),
                             audit.stored_files, audit.copy_trail),
            StorageComponent("tier2_seats", seats.PG_MIGRATIONS, seats.TABLES,
                             seats.stored_files, seats.copy_seats)]


@hookimpl
def config_sections():
    return {"tier2": seats.SeatsSection}
