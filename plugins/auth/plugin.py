"""Hooks of the auth plugin: who is asking, and whether they may."""

from __future__ import annotations

from kernel.auth import Actor
from kernel.errors import Unauthorized
from kernel.plugins import hookimpl
from plugins.auth.loopback import LoopbackToken, ensure_token

LOCAL_ACTOR = "local"


def bearer(request) -> str | None:
    header = request.get_header("Authorization") or ""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class _State:
    loopback: LoopbackToken | None = None


@hookimpl
def startup(kernel):
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
    raise Unauthorized("invalid token")


@hookimpl
def permission_allowed(kernel, actor, permission, project):
    if actor.kind == "loopback":
        return True
    return None
