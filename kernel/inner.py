"""Requests to the kernel's own app, in process: how a plugin serves one request with other
routes (an MCP tool call, an answer built from memories and code). The inner request carries
the outer request's ``Host``, ``Authorization`` and request id, so authentication, roles,
validation, events, the audit trail and the error envelope are exactly those of the same call
over HTTP."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from kernel.errors import envelope

# what the inner request keeps of the outer one: who is asking, from where, over what
FORWARDED = ("HTTP_HOST", "HTTP_AUTHORIZATION", "HTTP_USER_AGENT", "REMOTE_ADDR", "REMOTE_PORT",
             "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "wsgi.url_scheme", "wsgi.errors",
             "wsgi.version", "wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once")
PARAM = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Answer:
    """What the route answered: its status and its parsed JSON body (None when empty)."""

    status: int
    data: Any

    @property
    def ok(self) -> bool:
        return self.status < 400

    @property
    def error(self) -> dict[str, Any]:
        """The envelope's ``error`` object of a refused call."""
        return self.data["error"]


class Caller:
    """Calls routes of ``app`` as the client of one outer request (``environ``)."""

    def __init__(self, app, environ: dict[str, Any], request_id: str):
        self.app = app
        self.request_id = request_id
        self.base = {key: environ[key] for key in FORWARDED if key in environ}
        self.base["HTTP_X_REQUEST_ID"] = request_id  # the audit ties each write to the outer call

    def __call__(self, method: str, path: str, *, query: dict[str, Any] | None = None,
                 body: Any = None, route: str | None = None) -> Answer:
        """``route``: the uri template ``path`` was filled in from, when its ids come from the
        client (an MCP tool's arguments). Such an id can spell a sibling route's literal
        segment (``memories/stats``, ``contradictions/check/…``), which the router prefers:
        that path runs nothing and is answered the 404 the template's route gives an id it
        does not know — once the ids before it pass (:meth:`_misrouted`)."""
        if route is not None and (misrouted := self._misrouted(path, route)) is not None:
            return misrouted
        raw = b"" if body is None else json.dumps(body).encode()
        environ = dict(self.base, REQUEST_METHOD=method.upper(), SCRIPT_NAME="",
                       PATH_INFO=path.encode().decode("latin-1"),  # WSGI: UTF-8 bytes as latin-1
                       QUERY_STRING=urlencode(list(_pairs(query or {}))),
                       CONTENT_LENGTH=str(len(raw)))
        environ["wsgi.input"] = io.BytesIO(raw)
        if body is not None:
            environ["CONTENT_TYPE"] = "application/json"
        started: list[str] = []

        def start_response(status: str, headers, exc_info=None):
            started.append(status)

        chunks = self.app(environ, start_response)
        try:
            data = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        return Answer(int(started[0].split(" ", 1)[0]), json.loads(data) if data else None)

    def _misrouted(self, path: str, route: str) -> Answer | None:
        """The 404 of the first id in ``path`` that the router reads as another route's literal
        segment, or None when ``path`` reaches ``route`` (or no route: Falcon's own 404). A
        refusal of the id before it (401, 422 for a NUL, ``project_not_found``) comes first. Every
        route says ``no <noun> with id <id>`` (``<noun>_not_found``) of an ``{<noun>_id}`` it
        does not know."""
        found = self.app._router.find(path)  # Falcon's router: where the request would go
        matched = found[3].split("/") if found is not None else []
        wants, values = route.split("/"), path.split("/")
        for at, (want, got, value) in enumerate(zip(wants, matched, values)):
            if want != got and (param := PARAM.fullmatch(want)):
                # the route checks the ids before this one first (the token, a NUL, a project
                # that does not exist): read the last of them, and answer its refusal
                known = [i for i in range(at) if PARAM.fullmatch(wants[i])]
                if known and not (before := self("GET", "/".join(values[:known[-1] + 1]))).ok:
                    return before
                noun = param[1].removesuffix("_id")
                return Answer(404, json.loads(envelope(
                    f"{noun}_not_found", f"no {noun} with id {value}", 404, self.request_id)))
        return None


def _pairs(query: dict[str, Any]):
    """Query parameters as the HTTP client sends them: lists repeated, booleans spelled."""
    for key, value in query.items():
        if value is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            yield key, "true" if item is True else "false" if item is False else str(item)
