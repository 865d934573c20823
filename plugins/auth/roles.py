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

# the plugin's own permissions: registered by the plugin, and known to the CLI, which runs
# without the plugins' registrations
AUTH_PERMISSIONS = (
    Permission("auth.whoami", "See one's own actor, role and permissions"),
    # every token: other projects' members, `*` admins
    Permission("tokens.manage", "List and revoke server-mode tokens", ("admin",),
               beyond_projects=True),
)


def scoped_refusal(projects, permission: Permission) -> str:
    """Why a token limited to ``projects`` is refused ``permission``, one that reaches beyond
    any project (``Permission.beyond_projects``)."""
    return (f"a token limited to projects {', '.join(projects)} cannot use {permission.name} "
            f"({permission.description}): that reaches beyond its projects and needs a token "
            "for every project (token create --projects '*')")


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


def role_holds(section: AuthSection, role: str, permission: Permission) -> bool:
    """Whether ``role`` holds ``permission``, projects aside: as ``[auth.roles]`` lists the
    role (``*``: every permission), else as the permission's default roles say."""
    if role in section.roles:
        names = section.roles[role]
        return ALL in names or permission.name in names
    return role in permission.roles


def rate_for(section: AuthSection, role: str) -> RateLimit:
    return section.rate_limits.get(role) or section.rate_limits.get("default") or RateLimit()


class RolePolicy:
    """Which permissions each role holds: the registered defaults with the config's overrides;
    a role no configuration knows, or a permission no plugin registers, stops start-up."""

    def __init__(self, permissions: dict[str, Permission], section: AuthSection):
        roles = known_roles(section)
        for perm in permissions.values():
            if unknown := [role for role in perm.roles if role not in roles]:
                raise ConfigError(f"permission {perm.name!r} grants unknown role(s) "
                                  f"{', '.join(unknown)}; known roles: {', '.join(roles)} "
                                  "(the built-in ones and those [auth.roles] defines)")
        for role, names in section.roles.items():
            unknown = sorted(set(names) - set(permissions) - {ALL})
            if unknown:
                raise ConfigError(f"[auth.roles] {role}: unknown permission(s) {', '.join(unknown)}"
                                  f"; registered: {', '.join(sorted(permissions))}")
        self.grants = {role: frozenset(name for name, perm in permissions.items()
                                       if role_holds(section, role, perm)) for role in roles}
        self.beyond_projects = frozenset(name for name, perm in permissions.items()
                                         if perm.beyond_projects)

    def allows(self, role: str, permission: str, projects=None) -> bool:
        """Whether ``role`` holds ``permission``; for a token limited to ``projects`` (not
        None), never one that reaches beyond them (``Permission.beyond_projects``)."""
        if projects is not None and permission in self.beyond_projects:
            return False
        return permission in self.grants.get(role, ())
