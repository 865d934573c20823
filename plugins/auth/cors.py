"""CORS for exact origins only; none at all unless the operator lists origins.

An origin is ``scheme://host[:port]`` and nothing else: wildcards, paths, queries, fragments
and credentials are refused at start-up, so a typo cannot open the API to every site.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import falcon
from pydantic import BaseModel, ConfigDict, Field, field_validator

from neuralmind import ConfigError, Forbidden

ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE"
ALLOW_HEADERS = "Authorization, Content-Type, If-Match, If-None-Match, Last-Event-ID, X-Request-Id"
EXPOSE_HEADERS = "ETag, Location, NeuralMind-API-Version, Retry-After, X-Request-Id"
MAX_AGE = "600"
HOST = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]*[a-z0-9])?)(:\d{1,5})?$")


def check_origin(origin: str) -> str:
    """The origin as browsers send it (lower-case, no trailing slash), or ConfigError."""
    def refuse(why: str) -> ConfigError:
        return ConfigError(f"--allow-origin / [server] allow_origins {origin!r}: {why}; give an "
                           "exact origin such as https://dashboard.example.com:8443")

    if "*" in origin:
        raise refuse("wildcards are not allowed")
    try:
        parts = urlsplit(origin.strip())
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as ex:
        raise refuse(str(ex)) from None
    if parts.scheme not in ("http", "https"):
        raise refuse("the scheme must be http or https")
    if "@" in parts.netloc:
        raise refuse("credentials are not allowed in an origin")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in origin or "#" in origin:
        raise refuse("an origin has no path, query or fragment")
    netloc = parts.netloc.lower()
    if not HOST.match(netloc):
        raise refuse("the host is not valid")
    return f"{parts.scheme}://{netloc}"


def check_origins(origins: list[str]) -> frozenset[str]:
    return frozenset(check_origin(o) for o in origins)


class OriginsOfServer(BaseModel):
    """``[server]`` as this plugin reads it: its ``allow_origins``, declared in
    ``config_sections`` so a server checks them before it forks, not in each worker after it
    said it was listening (the kernel's own model checks the section's other keys)."""

    model_config = ConfigDict(extra="ignore")

    allow_origins: list[str] = Field(default_factory=list)

    @field_validator("allow_origins")
    @classmethod
    def _exact(cls, origins: list[str]) -> list[str]:
        check_origins(origins)  # its ConfigError is the server's one line
        return origins


class CORS:
    """Falcon middleware: answers preflights for allowed origins, refuses the rest (403
    ``origin_not_allowed``), and tags responses to allowed origins."""

    def __init__(self, origins: frozenset[str]):
        self.origins = origins

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        origin = req.get_header("Origin")
        if req.method != "OPTIONS" or not origin or not req.get_header("Access-Control-Request-Method"):
            return
        if origin not in self.origins:
            raise Forbidden("this origin may not call the API", code="origin_not_allowed")
        resp.status = falcon.HTTP_204
        resp.set_header("Access-Control-Allow-Methods", ALLOW_METHODS)
        resp.set_header("Access-Control-Allow-Headers", ALLOW_HEADERS)
        resp.set_header("Access-Control-Max-Age", MAX_AGE)
        resp.complete = True

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource,
                         req_succeeded: bool) -> None:
        origin = req.get_header("Origin")
        resp.append_header("Vary", "Origin")
        if origin and origin in self.origins:
            resp.set_header("Access-Control-Allow-Origin", origin)
            resp.set_header("Access-Control-Expose-Headers", EXPOSE_HEADERS)
