"""Hooks of the auth plugin: who is asking, and whether they may.

Loopback mode (the default): one per-user token, the local user holds every permission.
Server mode: per-user tokens from the tokens file, each with a role and a project list,
rate-limited per actor across workers.
"""

from __future__ import annotations

import logging

from kernel.auth import Actor, Permission
from kernel.errors import Unauthorized
from kernel.plugins import hookimpl
from plugins.auth.apicalls import ApiCalls
from plugins.auth.cors import CORS, check_origins
from plugins.auth.loopback import LoopbackToken, ensure_token
from plugins.auth.ratelimit import RateLimiter
from plugins.auth.roles import AuthSection, RolePolicy, auth_section, rate_for
from plugins.auth.tokens import SHORT_ID, TokenFile, tokens_path

log = logging.getLogger("neuralmind.auth")

LOCAL_ACTOR = "local"


def bearer(request) -> str | None:
    header = request.get_header("Authorization") or ""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class _State:
    """This process's credentials checkers, made at start-up."""

    loopback: LoopbackToken | None = None
    tokens: TokenFile | None = None
    policy: RolePolicy | None = None
    limiter: RateLimiter | None = None
    section: AuthSection = AuthSection()


@hookimpl
def register_permissions(kernel):
    return [Permission("auth.whoami", "See one's own actor, role and permissions"),
            Permission("tokens.manage", "List and revoke server-mode tokens", ("admin",))]


@hookimpl
def register_middleware(kernel):
    # origins are checked here, while the app is built, so a bad one stops the worker booting
    origins = check_origins(kernel.settings.server.allow_origins)
    return ([CORS(origins)] if origins else []) + [ApiCalls(kernel)]


@hookimpl
def register_routes(kernel):
    from plugins.auth.resources import TokensResource, WhoAmIResource
    tokens = TokensResource(kernel, TokenFile(tokens_path(kernel.settings)))
    return [("/v1/auth/whoami", WhoAmIResource(kernel)),
            ("/v1/auth/tokens", tokens),
            ("/v1/auth/tokens/{token_id}", tokens, "item")]


@hookimpl
def startup(kernel):
    _State.section = auth_section(kernel.settings)
    _State.policy = RolePolicy(kernel.permissions, _State.section)
    if kernel.settings.server_mode:
        _State.loopback = None
        _State.tokens = TokenFile(tokens_path(kernel.settings))
        _State.limiter = RateLimiter(kernel)
        if not _State.tokens.records():
            log.warning("no tokens in %s yet: every request is 401 until `neuralmind token "
                        "create --actor A --role R` adds one", _State.tokens.path)
        return
    _State.tokens = _State.limiter = None
    token = ensure_token(kernel.home)
    _State.loopback = LoopbackToken(kernel.home)
    from kernel.daemon import update_discovery
    update_discovery(kernel.home, token=token)


@hookimpl
def actor_from_request(kernel, request):
    token = bearer(request)
    if token is None:
        if request.get_header("Authorization"):
            raise Unauthorized("only `Authorization: Bearer <token>` is accepted")
        return None
    if _State.loopback is not None and _State.loopback.check(token):
        return Actor(LOCAL_ACTOR, role="admin", kind="loopback")
    found = _State.tokens.lookup(token) if _State.tokens is not None else None
    if found is None:
        raise Unauthorized("invalid token")
    digest, record = found
    if record.expired():
        raise Unauthorized("this token has expired", code="token_expired")
    _State.limiter.take(record.actor, rate_for(_State.section, record.role))
    return Actor(record.actor, role=record.role, projects=record.project_ids, kind="token",
                 extra={"token_id": digest[:SHORT_ID]})


@hookimpl
def permission_allowed(kernel, actor, permission, project):
    if actor.kind == "loopback":
        return True
    if actor.kind != "token":
        return None
    # a hard False: no other plugin's True can widen a token beyond its projects or role
    if project is not None and actor.projects is not None and project.id not in actor.projects:
        return False
    return _State.policy.allows(actor.role, permission)


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.auth.commands import add_commands
    add_commands(subparsers)
