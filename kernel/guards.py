"""The guards every request passes before routing: request id, version header, Host check,
body-size cap on Content-Length, and refusal of credentials in the query string."""

from __future__ import annotations

import os
import re

import falcon

from kernel import API_VERSION
from kernel.errors import BadRequest, Forbidden, PayloadTooLarge

REQUEST_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
TOKEN_PARAMS = frozenset({"token", "access_token", "api_key", "apikey", "key", "auth"})


def host_name(header: str) -> str:
    """``Host`` without its port: ``[::1]:8765`` → ``[::1]``, ``nm.internal:443`` → ``nm.internal``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if ":" in header else header


class Guards:
    """Falcon middleware; runs first, so even a 404 carries the request id and headers."""

    def __init__(self, allowed_hosts: frozenset[str], max_body: int):
        self.allowed_hosts = allowed_hosts
        self.max_body = max_body

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        rid = req.get_header("X-Request-Id")
        if not rid or not REQUEST_ID.fullmatch(rid):
            rid = os.urandom(16).hex()
        req.context.request_id = rid
        resp.set_header("X-Request-Id", rid)
        resp.set_header("NeuralMind-API-Version", API_VERSION)
        if host_name(req.get_header("Host") or "") not in self.allowed_hosts:
            raise Forbidden("the Host header is not one this server answers to",
                            code="host_not_allowed")
        if req.query_string and TOKEN_PARAMS.intersection(name.lower() for name in req.params):
            raise BadRequest("credentials are accepted only in the Authorization header; "
                             "this token was not used — rotate it if it was logged",
                             code="token_in_query")
        if req.content_length is not None and req.content_length > self.max_body:
            raise PayloadTooLarge(self.max_body)
