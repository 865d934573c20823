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
    """A permission a route can name; ``roles`` are the roles granted it by default.
    ``beyond_projects``: what it reads or changes belongs to no project, or to all of them,
    so a token limited to projects never holds it (docs/security.md)."""

    name: str
    description: str
    roles: tuple[str, ...] = ROLES
    beyond_projects: bool = False

    def __post_init__(self) -> None:
        # ("admin") is the string "admin", which would grant roles "a", "d", "m", "i", "n"
        if not isinstance(self.roles, (tuple, list)):
            hint = (f" (one role needs a comma: ({self.roles!r},))"
                    if isinstance(self.roles, str) else "")
            raise TypeError(f"Permission {self.name!r}: roles must be a tuple of role names, "
                            f"not {self.roles!r:.60}{hint}")
        if not all(isinstance(role, str) and role for role in self.roles):
            raise TypeError(f"Permission {self.name!r}: roles must be role names, not "
                            f"{self.roles!r:.60}")
        if not isinstance(self.beyond_projects, bool):
            raise TypeError(f"Permission {self.name!r}: beyond_projects must be True or False")
        object.__setattr__(self, "roles", tuple(self.roles))  # a list, as a hashable tuple


KERNEL_PERMISSIONS = (
    Permission("projects.read", "See a project and list projects", ROLES),
    Permission("projects.paths", "See projects' filesystem paths", ("builder", "admin")),
    Permission("projects.write", "Register and unregister projects", ("builder", "admin")),
    Permission("jobs.read", "See jobs", ROLES),
    Permission("jobs.cancel", "Ask a running job to stop", ("admin",)),
    Permission("events.read", "Follow the event stream", ROLES),
    Permission("events.global", "See events of no project (token changes, job cancels, seats) "
               "and of removed projects", ("admin",), beyond_projects=True),
    Permission("system.read", "See server status (embedder, plugins)", ROLES),
    Permission("system.shutdown", "Stop the local daemon through the API", ("admin",),
               beyond_projects=True),
)
