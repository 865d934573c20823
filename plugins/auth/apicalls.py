"""The ``api.call`` event: one per authenticated mutating request, allowed or not.

Mutating is the operation's own word (``Operation.mutating``): a write method whose permission
is not a ``*.read`` one, so a search or query sent as POST is a read and leaves no event.

Denied attempts (403, 404 for a project out of reach) are recorded too, because those are
what an audit most needs to see; requests refused before the actor is known (401, 429, a
bad Host) are not, so an unauthenticated flood cannot fill the event log.

Also here: ``ScopedRefusals``, which makes the 403 of a permission that reaches beyond any
project, refused to a token limited to projects, say why.
"""

from __future__ import annotations

import json
import logging

import falcon

from plugins.auth.roles import GLOBAL_PERMISSIONS, scoped_refusal

log = logging.getLogger("neuralmind.auth")

class ApiCalls:
    """Falcon middleware: after the handler (and its write) finished, emit ``api.call``."""

    def __init__(self, kernel):
        self.kernel = kernel

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource,
                         req_succeeded: bool) -> None:
        ctx = req.context
        op, actor = _called(req)
        if op is None or actor is None or not op.mutating:
            return
        try:
            self.kernel.emit("api.call", project=getattr(ctx, "project", None), actor=actor,
                             request_id=getattr(ctx, "request_id", None),
                             data={"permission": op.permission, "method": req.method,
                                   "path": req.path, "status": resp.status_code,
                                   "role": actor.role, "token_id": actor.extra.get("token_id")})
        except Exception:  # the response is already decided; never turn it into a 500
            log.exception("could not record api.call for request %s",
                          getattr(ctx, "request_id", "?"))


class ScopedRefusals:
    """Falcon middleware: the kernel's 403 for a permission that reaches beyond any project
    (``tokens.manage`` …), refused to a token limited to projects although its role holds it,
    says why — the kernel's own message ("X may not P") reads as if the role lacked it. The
    decision stays the kernel's (``permission_allowed``); only the message changes, and
    ``details`` gains the token's ``projects``."""

    def __init__(self, kernel):
        self.kernel = kernel

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource,
                         req_succeeded: bool) -> None:
        op, actor = _called(req)
        if (resp.status_code != 403 or op is None or actor is None or actor.kind != "token"
                or actor.projects is None or op.permission not in GLOBAL_PERMISSIONS):
            return
        from plugins.auth.plugin import _state
        if not _state(self.kernel).policy.allows(actor.role, op.permission):
            return  # the role lacks it anyway: the kernel's message is the reason
        try:
            body = json.loads(resp.data)
            error = body["error"]
            if error["code"] != "forbidden" or error["details"].get("permission") != op.permission:
                return  # another refusal (a handler's own): leave it as it is
        except (TypeError, ValueError, KeyError, AttributeError):
            return
        error["message"] = scoped_refusal(actor.projects, op.permission)
        error["details"]["projects"] = list(actor.projects)
        resp.data = json.dumps(body, ensure_ascii=False).encode()


def _called(req: falcon.Request) -> tuple:
    """The operation a request reached and who called it (each None when it got no further)."""
    return getattr(req.context, "operation", None), getattr(req.context, "actor", None)
