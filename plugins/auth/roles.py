"""Roles → permissions, and the plugin's ``[auth]`` config section.

Each permission a plugin registers names its default roles (``Permission.roles``); an operator
can replace a role's list, or define a new role, in ``[auth.roles]``:

    [auth.roles]
    reader = ["projects.read", "memories.read", "jobs.read"]   # replaces the default list
    auditor = ["events.read", "events.global", "system.read"]   # a role of its own
"""

from __future__ import annotations

from pydantic import Field

from neuralmind import ROLES, ConfigError, ConfigSection, Permission

ALL = "*"

# Permissions that reach beyond any project: what they read or change belongs to no project,
# or to all of them. A token limited to projects never holds one, whatever its role (the
# ``permission_allowed`` hook refuses them; ``token create`` says so). Each with what it lets
# a caller do, for the 403's message.
GLOBAL_PERMISSIONS: dict[str, str] = {
    "tokens.manage": "manage tokens",  # every token: other projects' members, `*` admins
    "events.global": "read events of no project",  # token changes, job cancels, seats
    "system.shutdown": "stop the server",  # every project's server
    "ui.sign_in": "make dashboard sign-in codes",  # they hand out the loopback token
    "audit.read": "read the audit trail",  # every project's and actor's trail (tier2)
    "seats.read": "read the seat counts",  # every token actor of the server (tier2)
}


def scoped_refusal(projects, permission: str) -> str:
    """Why a token limited to ``projects`` is refused ``permission`` (one of the global ones)."""
    what = GLOBAL_PERMISSIONS.get(permission, f"use {permission}")
    return (f"a token limited to projects {', '.join(projects)} cannot {what} ({permission}): "
            "that reaches beyond its projects and needs a token for every project "
            "(token create --projects '*')")


def global_permissions_of(section: "AuthSection", role: str) -> list[str]:
    """The global permissions ``role`` holds by the config alone (the CLI runs without the
    plugins' registrations): a role the config lists holds what it names (``*``: all of
    them); otherwise only ``admin`` holds them by default."""
    if role in section.roles:
        names = section.roles[role]
        return list(GLOBAL_PERMISSIONS) if ALL in names else [
            p for p in GLOBAL_PERMISSIONS if p in names]
    return list(GLOBAL_PERMISSIONS) if role == "admin" else []


class RateLimit(ConfigSection):
    rate: float = Field(20.0, ge=0, description="Requests per second refilled; 0 turns limiting off")
    burst: int = Field(100, ge=1, description="Requests allowed at once before the rate applies")


class AuthSection(ConfigSection):
    roles: dict[str, list[str]] = Field(default_factory=dict)
    rate_limits: dict[str, RateLimit] = Field(
        default_factory=dict, description="Per role; the key `default` covers roles not listed")


def auth_section(settings) -> AuthSection:
    return settings.section("auth", AuthSection)


def known_roles(section: AuthSection) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*ROLES, *section.roles]))


def rate_for(section: AuthSection, role: str) -> RateLimit:
    return section.rate_limits.get(role) or section.rate_limits.get("default") or RateLimit()


class RolePolicy:
    """Which permissions each role holds: the registered defaults with the config's overrides."""

    def __init__(self, permissions: dict[str, Permission], section: AuthSection):
        grants: dict[str, set[str]] = {role: set() for role in known_roles(section)}
        for perm in permissions.values():
            for role in perm.roles:
                grants.setdefault(role, set()).add(perm.name)
        for role, names in section.roles.items():
            unknown = sorted(set(names) - set(permissions) - {ALL})
            if unknown:
                raise ConfigError(f"[auth.roles] {role}: unknown permission(s) {', '.join(unknown)}"
                                  f"; registered: {', '.join(sorted(permissions))}")
            grants[role] = set(permissions) if ALL in names else set(names)
        self.grants = {role: frozenset(names) for role, names in grants.items()}

    def allows(self, role: str, permission: str, projects=None) -> bool:
        """Whether ``role`` holds ``permission``; for a token limited to ``projects`` (not
        None), never one of :data:`GLOBAL_PERMISSIONS`."""
        if projects is not None and permission in GLOBAL_PERMISSIONS:
            return False
        return permission in self.grants.get(role, ())
