"""The ``api.call`` event: one per authenticated mutating request, allowed or not.

Mutating is the operation's own word (``Operation.mutating``): a write method whose permission
is not a ``*.read`` one, so a search or query sent as POST is a read and leaves no event.

Denied attempts (403, 404 for a project out of reach) are recorded too, because those are
what an audit most needs to see; requests refused before the actor is known (401, 429, a
bad Host) are not, so an unauthenticated flood cannot fill the event log.
"""

from __future__ import annotations

import logging

import falcon

from neuralmind import log_failure

log = logging.getLogger("neuralmind.auth")

class ApiCalls:
    """Falcon middleware: after the handler (and its write) finished, emit ``api.call``."""

    def __init__(self, kernel):
        self.kernel = kernel

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource,
                         req_succeeded: bool) -> None:
        ctx = req.context
        op, actor = getattr(ctx, "operation", None), getattr(ctx, "actor", None)
        if op is None or actor is None or not op.mutating:
            return
        try:
            self.kernel.emit("api.call", project=getattr(ctx, "project", None), actor=actor,
                             request_id=getattr(ctx, "request_id", None),
                             data={"permission": op.permission, "method": req.method,
                                   "path": req.path, "status": resp.status_code,
                                   "role": actor.role, "token_id": actor.extra.get("token_id")})
        except Exception as ex:  # the response is already decided; never turn it into a 500
            log_failure(log, f"recording api.call for request {getattr(ctx, 'request_id', '?')}",
                        ex)
