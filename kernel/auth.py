"""Who is asking and what they may do: the kernel's side of authentication.

The kernel authenticates nobody itself. It asks ``actor_from_request`` and
``permission_allowed``; with no plugin answering, every non-public route is 401.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ROLES = ("reader", "builder", "admin")


@dataclass(frozen=True)
class Actor:
    """An authenticated caller. ``role`` and ``projects`` come from credentials, never a body."""

    id: str
    role: str
    projects: tuple[str, ...] | None = None  # None: every project
    kind: str = "token"
    extra: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Permission:
    """A permission a route can name; ``roles`` are the roles granted it by default."""

    name: str
    description: str
    roles: tuple[str, ...] = ROLES


KERNEL_PERMISSIONS = (
    Permission("projects.read", "See a project and list projects", ROLES),
    Permission("projects.paths", "See projects' filesystem paths", ("builder", "admin")),
    Permission("projects.write", "Register and unregister projects", ("builder", "admin")),
    Permission("jobs.read", "See jobs", ROLES),
    Permission("jobs.cancel", "Ask a running job to stop", ("admin",)),
    Permission("events.read", "Follow the event stream", ROLES),
    Permission("events.global", "See events of no project (token changes, job cancels, seats) "
               "and of removed projects", ("admin",)),
    Permission("system.read", "See server status (embedder, plugins)", ROLES),
    Permission("system.shutdown", "Stop the local daemon through the API", ("admin",)),
)
