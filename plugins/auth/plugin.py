"""Hooks of the auth plugin: who is asking, and whether they may.

Loopback mode (the default): one per-user token, the local user holds every permission.
Server mode: per-user tokens from the tokens file, each with a role and a project list,
rate-limited per actor and role across workers.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

from pydantic import field_validator

from neuralmind import Actor, EventKind, Unauthorized, hookimpl
from plugins.auth.apicalls import ApiCalls
from plugins.auth.cors import CORS, OriginsOfServer, check_origins
from plugins.auth.loopback import LoopbackToken, ensure_token
from plugins.auth.ratelimit import FileBuckets, PgBuckets, RateLimiter
from plugins.auth.roles import (AUTH_PERMISSIONS, AuthSection, RateLimit, RolePolicy,
                                auth_section, rate_for, scoped_refusal)
from plugins.auth.schema import PG_MIGRATIONS
from plugins.auth.tokens import (SEEN_MAX, SHORT_ID, TokenError, TokenRecord, Tokens, path_fault,
                                 token_store)

log = logging.getLogger("neuralmind.auth")

LOCAL_ACTOR = "local"
LOCAL = Actor(LOCAL_ACTOR, role="admin", kind="loopback")  # the one loopback caller, made once


def bearer(request) -> str | None:
    header = request.get_header("Authorization") or ""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class AuthState:
    """One kernel's credentials checkers, made at its start-up (a process may hold several
    kernels: tests, the bench)."""

    def __init__(self, kernel):
        self.section: AuthSection = auth_section(kernel.settings)
        self.policy = RolePolicy(kernel.permissions, self.section)
        self.loopback: LoopbackToken | None = None
        # the database servers share (tokens and rate buckets live there), or None
        self.shared = kernel.shared_database("auth", PG_MIGRATIONS)
        self.tokens: Tokens = token_store(kernel.settings, self.shared)
        self.limiter: RateLimiter | None = None
        # token hash → (record, actor, expiry epoch, limit): built once per version of a token
        self.actors: dict[str, tuple[TokenRecord, Actor, float, RateLimit]] = {}

    def token_actor(self, digest: str, record: TokenRecord) -> tuple[Actor, float, RateLimit]:
        cached = self.actors.get(digest)
        if cached is None or cached[0] is not record:  # new, or the file changed
            if len(self.actors) >= SEEN_MAX:
                self.actors.clear()
            actor = Actor(record.actor, role=record.role, projects=record.project_ids,
                          kind="token", extra={"token_id": digest[:SHORT_ID]})
            cached = self.actors[digest] = (record, actor, record.expires_ts,
                                            rate_for(self.section, record.role))
        return cached[1:]


class ServerKeys(OriginsOfServer):
    """``[server]`` as this plugin reads it, checked before a server forks: its origins, and
    a ``tokens_file`` that a file can be at (a directory there would stop every worker)."""

    tokens_file: str | None = None

    @field_validator("tokens_file")
    @classmethod
    def _usable(cls, value: str | None) -> str | None:
        if value is not None and (fault := path_fault(Path(value).expanduser())):
            raise TokenError(fault)  # a ConfigError: the server's one line
        return value


def _state(kernel) -> AuthState:
    return kernel.state("auth", lambda: AuthState(kernel))


@hookimpl
def register_event_kinds(kernel):
    return [EventKind("api.call", "an authenticated mutating request, allowed or not"),
            EventKind("token.created", "a server-mode token was created (by the CLI)"),
            EventKind("token.revoked", "a server-mode token was revoked"),
            EventKind("token.rotated", "the loopback token was replaced (by the CLI)")]


@hookimpl
def register_permissions(kernel):
    return list(AUTH_PERMISSIONS)


@hookimpl
def register_middleware(kernel):
    # origins are checked here, while the app is built, so a bad one stops the worker booting
    origins = check_origins(kernel.settings.server.allow_origins)
    return ([CORS(origins)] if origins else []) + [ApiCalls(kernel)]


@hookimpl
def register_routes(kernel):
    from plugins.auth.resources import TokensResource, WhoAmIResource
    tokens = TokensResource(kernel, _state(kernel).tokens)
    return [("/v1/auth/whoami", WhoAmIResource(kernel)),
            ("/v1/auth/tokens", tokens),
            ("/v1/auth/tokens/{token_id}", tokens, "item")]


@hookimpl
def startup(kernel):
    state = _state(kernel)
    if kernel.settings.server_mode:
        if fault := state.tokens.misplaced():
            raise TokenError(fault)
        state.limiter = RateLimiter(PgBuckets(state.shared) if state.shared is not None
                                    else FileBuckets(kernel.home))
        from plugins.auth.commands import create_command, set_aside_line
        usable, aside = state.tokens.records(), state.tokens.set_aside
        # tokens with names an older NeuralMind wrote, refused now: once per server, each named
        if aside and _first_worker(kernel, "auth.set-aside-warning"):
            log.warning("%s", set_aside_line(kernel.settings, state.tokens.where, aside))
        if (not usable and not aside and state.tokens.unreadable is None  # else said why
                and _first_worker(kernel, "auth.no-tokens-warning")):
            log.warning("no tokens in %s yet: every request is 401 until %s adds one",
                        state.tokens.where, create_command(kernel.settings))
        return
    token = ensure_token(kernel.home)
    state.loopback = LoopbackToken(kernel.home)
    from neuralmind import update_discovery
    update_discovery(kernel.home, token=token)


WORKERS_START_S = 60.0  # a server's workers all start within it


def _first_worker(kernel, lease: str) -> bool:
    """Whether this worker is its server's first to reach here, so what it says at start-up is
    said once per server, not once per worker: it takes ``lease`` for ``WORKERS_START_S``,
    which the server's other workers then find held (a server started again takes it over
    from the gone process)."""
    owner = f"{socket.gethostname()}:{os.getpid()}"
    return kernel.leases.acquire(lease, owner, WORKERS_START_S) is None


@hookimpl
def actor_from_request(kernel, request, again):
    token = bearer(request)
    if token is None:
        if request.get_header("Authorization"):
            raise Unauthorized("only `Authorization: Bearer <token>` is accepted")
        return None
    state = _state(kernel)
    if state.loopback is not None and state.loopback.check(token):
        return LOCAL
    found = state.tokens.lookup(token) if kernel.settings.server_mode else None
    if found is None:
        raise Unauthorized("invalid token")
    actor, expires, limit = state.token_actor(*found)
    if time.time() >= expires:
        raise Unauthorized("this token has expired", code="token_expired")
    if not again:
        state.limiter.take(actor.id, limit, role=actor.role)  # per (actor, role)
    return actor


@hookimpl
def permission_allowed(kernel, actor, permission, project):
    if actor.kind == "loopback":
        return True
    if actor.kind != "token":
        return None
    # a hard False: no other plugin's True can widen a token beyond its projects or role
    if project is not None and actor.projects is not None and project.id not in actor.projects:
        return False
    # a token limited to projects holds no permission that reaches beyond them (tokens.manage,
    # events.global, …: Permission.beyond_projects), whatever its role; the kernel asks for
    # those with no project, which the line above cannot catch
    return _state(kernel).policy.allows(actor.role, permission, actor.projects)


@hookimpl
def refusal(kernel, actor, permission, project):
    """A token limited to projects, refused a permission its role holds that reaches beyond
    them: say so — the kernel's words would read as if the role lacked it."""
    policy = _state(kernel).policy
    if (actor.kind == "token" and actor.projects is not None
            and permission in policy.beyond_projects and policy.allows(actor.role, permission)):
        return (scoped_refusal(actor.projects, kernel.permissions[permission]),
                {"projects": list(actor.projects)})
    return None


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.auth.commands import add_commands
    add_commands(subparsers)


@hookimpl
def storage_components(settings):
    from plugins.auth.schema import storage_component
    return [storage_component(settings)]


@hookimpl
def config_sections():
    return {"auth": AuthSection, "server": ServerKeys}
