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

    def allows(self, role: str, permission: str) -> bool:
        return permission in self.grants.get(role, ())
