"""APIError and its subclasses, and the one serializer every error goes through.

Every error the server sends — ours, Falcon's own 404/405, an uncaught exception — has the
shape ``{"error": {"code", "message", "status", "request_id", "details"}}``.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import falcon

from kernel.storage import (NewerSchema, StateReadOnly, StateReplaced, damage_remedy, damage_said,
                            damaged, damaged_file)

log = logging.getLogger("neuralmind.errors")


class APIError(Exception):
    """An error a client should see: an HTTP status, a stable code and a message."""

    status = 500
    code = "internal_error"
    message = "internal error"

    def __init__(self, message: str | None = None, *, code: str | None = None,
                 status: int | None = None, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None):
        self.message = message or self.message
        self.code = code or self.code
        self.status = status or self.status
        self.details = details or {}
        self.headers = headers or {}
        super().__init__(self.message)


class BadRequest(APIError):
    status, code, message = 400, "bad_request", "bad request"


class InvalidJSON(APIError):
    status, code, message = 400, "invalid_json", "the body is not valid UTF-8 JSON"


class Unauthorized(APIError):
    status, code, message = 401, "unauthorized", "missing or invalid credentials"

    def __init__(self, message: str | None = None, **kw):
        kw.setdefault("headers", {"WWW-Authenticate": "Bearer"})
        super().__init__(message, **kw)


class Forbidden(APIError):
    status, code, message = 403, "forbidden", "not allowed"


class NotFound(APIError):
    status, code, message = 404, "not_found", "not found"


class Conflict(APIError):
    status, code, message = 409, "conflict", "conflict"


class PreconditionFailed(APIError):
    status, code, message = 412, "precondition_failed", "the resource has changed"


class PayloadTooLarge(APIError):
    status, code, message = 413, "payload_too_large", "the body is larger than the server accepts"

    def __init__(self, cap: int):
        super().__init__(f"the body is larger than the {cap:,} bytes the server accepts "
                         "([kernel] max_body_bytes)", details={"max_bytes": cap})


class UnsupportedMediaType(APIError):
    status, code, message = 415, "unsupported_media_type", "a body must be sent as application/json"


class ValidationFailed(APIError):
    status, code, message = 422, "validation_error", "the request did not validate"


class InvalidFields(ValidationFailed):
    """Values that passed their model but broke a domain rule, each named by its field
    (``"path"``, ``("items", 3, "id")``) and not by where it was sent: the kernel places each
    field under the query or the body of the operation that raised it."""

    def __init__(self, errors: list[dict[str, Any]], message: str | None = None):
        self.errors = [{**e, "loc": _loc(e["loc"])} for e in errors]
        super().__init__(message, details=validation_details(self.errors))

    @classmethod
    def one(cls, field: str | tuple, msg: str, kind: str = "value_error",
            message: str | None = None) -> InvalidFields:
        return cls([{"loc": field, "msg": msg, "type": kind}], message or msg)

    def place(self, query_fields: frozenset[str] | set[str]) -> None:
        """Under ``query`` the fields the operation's query has, the rest under ``body``."""
        self.details = validation_details(
            [{**e, "loc": ("query" if e["loc"] and e["loc"][0] in query_fields else "body",
                           *e["loc"])} for e in self.errors])


def _loc(loc: str | int | tuple | list) -> tuple:
    return tuple(loc) if isinstance(loc, (tuple, list)) else (loc,)


class RateLimited(APIError):
    status, code, message = 429, "rate_limited", "too many requests"

    def __init__(self, retry_after: float, message: str | None = None, **kw):
        seconds = max(1, int(retry_after + 0.999))
        kw.setdefault("headers", {"Retry-After": str(seconds)})
        kw.setdefault("details", {"retry_after": seconds})
        super().__init__(message, **kw)


class Unavailable(APIError):
    status, code, message = 503, "unavailable", "temporarily unavailable"


PATTERN_SAYS: dict[str, str] = {}
"""What a field's pattern asks, in words, by the pattern (``kernel.models.matching``)."""


def error_message(err: dict[str, Any]) -> str:
    """A pydantic error's message, without the "Value error, " it puts before the text a
    validator of ours raised (that text is written for the reader as it stands), and a
    pattern's words instead of the regular expression pydantic quotes."""
    msg = str(err.get("msg", ""))
    if err.get("type") == "string_pattern_mismatch":
        return PATTERN_SAYS.get((err.get("ctx") or {}).get("pattern"), msg)
    return msg.removeprefix("Value error, ") if err.get("type") == "value_error" else msg


def validation_details(errors: list[dict[str, Any]], prefix: tuple = ()) -> dict[str, Any]:
    """Pydantic errors as ``details.errors``: ``[{loc, msg, type}]`` with JSON-safe locations."""
    out = []
    for err in errors:
        loc = [*prefix, *err.get("loc", ())]
        out.append({"loc": [p if isinstance(p, (int, str)) else str(p) for p in loc],
                    "msg": error_message(err), "type": str(err.get("type", ""))})
    return {"errors": out}


def envelope(code: str, message: str, status: int, request_id: str | None,
             details: dict[str, Any] | None = None) -> bytes:
    body = {"error": {"code": code, "message": message, "status": status,
                      "request_id": request_id, "details": details or {}}}
    return json.dumps(body, ensure_ascii=False, default=str).encode()


def render(req: falcon.Request, resp: falcon.Response, error: APIError) -> None:
    resp.status = error.status
    resp.content_type = "application/json; charset=utf-8"
    for name, value in error.headers.items():
        resp.set_header(name, value)
    resp.data = envelope(error.code, error.message, error.status,
                         getattr(req.context, "request_id", None), error.details)


_FALCON_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 411: "length_required", 413: "payload_too_large",
                 415: "unsupported_media_type", 431: "headers_too_large"}


def storage_failure(ex: BaseException) -> bool:
    """Whether ``ex`` says the store cannot take or give data now — out of reach (down,
    restarting, its pool exhausted, its file locked past the busy timeout), or on a disk that
    is full or cannot be written — rather than that our code is wrong."""
    import sqlite3
    if _unwritable(ex) or _out_of_files(ex):
        return True
    if isinstance(ex, sqlite3.OperationalError):
        return "locked" in str(ex) or "unable to open" in str(ex)
    module = type(ex).__module__
    if module.startswith("psycopg_pool"):
        return True
    if module.startswith("psycopg"):
        import psycopg
        return isinstance(ex, psycopg.OperationalError)
    return False


def _unwritable(ex: BaseException) -> str | None:
    """``"full"`` or ``"read-only"`` when the state's disk or file refuses a write (SQLite
    says so in its message, the OS in its errno); None otherwise."""
    import errno
    import sqlite3
    text = str(ex) if isinstance(ex, sqlite3.DatabaseError) else ""
    code = ex.errno if isinstance(ex, OSError) else None
    if "disk is full" in text or code in (errno.ENOSPC, errno.EDQUOT):
        return "full"
    if isinstance(ex, StateReadOnly) or "readonly database" in text or code == errno.EROFS:
        return "read-only"
    return None


def _out_of_files(ex: BaseException) -> bool:
    """Whether the process (or the system) holds as many open files as it may: the OS says
    so in its errno, SQLite only "unable to open database file", so then the count is read."""
    import errno
    import sqlite3
    if isinstance(ex, OSError):
        return ex.errno in (errno.EMFILE, errno.ENFILE)
    if not (isinstance(ex, sqlite3.OperationalError) and "unable to open" in str(ex)):
        return False
    try:
        held = len(os.listdir("/proc/self/fd"))
    except OSError as err:  # no descriptor left even to look
        return err.errno in (errno.EMFILE, errno.ENFILE)
    return held >= _file_limit() - 2


def _file_limit() -> int:
    import resource
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def storage_error(ex: BaseException) -> APIError:
    """What a request is told when :func:`storage_failure` holds: nothing was written."""
    if _out_of_files(ex):
        return Unavailable(f"the server holds as many open files as it may (its limit, `ulimit "
                           f"-n`, is {_file_limit()}); nothing was written — raise the limit and "
                           "restart it", code="too_many_open_files")
    why = _unwritable(ex)
    if why == "full":
        return APIError("the disk that holds NeuralMind's state is full; nothing was written "
                        "— free space, then try again", status=507, code="storage_full")
    if why == "read-only":
        return Unavailable("NeuralMind's state cannot be written here (a read-only file system "
                           "or file, or no permission); nothing was written",
                           code="storage_read_only")
    return Unavailable("the database cannot be reached; nothing was written — try again",
                       code="storage_unavailable", headers={"Retry-After": "2"})


def damage_error(ex: BaseException) -> APIError:
    """What a request is told of a damaged SQLite file: which component's (never the path),
    and what mends it — a backup, or for a derived store's file a build — a 500, as retrying
    is no use."""
    path = damaged_file(ex)
    which = f"the {path.stem} database" if path else "a database file"
    return APIError(f"{which} of NeuralMind's state is damaged: {damage_remedy(ex)}; the "
                    "server log names the file", code="storage_damaged")


def state_fault(ex: BaseException) -> tuple[APIError, str] | None:
    """``(what a client is told, the one line the log says)`` when ``ex`` is the stored
    state's fault, not our code's — data of a newer NeuralMind, a damaged file, a store out of
    reach or refusing writes (no traceback: it would say nothing more); None otherwise."""
    if isinstance(ex, NewerSchema):  # a project's file a newer NeuralMind wrote
        return Unavailable(ex.public, code="storage_newer"), str(ex)
    if isinstance(ex, StateReplaced):
        return Conflict(str(ex), code="project_state_replaced"), str(ex)
    if damaged(ex):
        return damage_error(ex), damage_said(ex)
    if storage_failure(ex):
        return storage_error(ex), f"the store refused it: {ex}"
    return None


def log_failure(logger: logging.Logger, what: str, ex: BaseException
                ) -> tuple[APIError, str] | None:
    """Log that ``what`` failed with ``ex``, in the background (a thread, a job): one line when
    the stored state is at fault — a full disk, a lock held past the busy timeout, a damaged
    file, an expected condition whose traceback says nothing more — else the traceback.
    Returns that fault (:func:`state_fault`), or None."""
    fault = state_fault(ex)
    if fault is None:
        logger.error("%s failed", what, exc_info=ex)
    else:  # an error all the same, as a request's is: an operator has to act on it
        logger.error("%s failed: %s", what, fault[1])
    return fault


def install(app: falcon.App) -> None:
    """Route every error through :func:`render` (Falcon's own included)."""

    def on_api_error(req, resp, ex, params):
        render(req, resp, ex)

    def on_http_error(req, resp, ex: falcon.HTTPError, params):
        status = ex.status_code
        message = ex.title or "error"
        if ex.description:
            message = f"{message}: {ex.description}"
        details = None
        if isinstance(ex, falcon.HTTPRouteNotFound):  # say which, not only "404 Not Found"
            message = f"no route {req.method} {req.path} (GET /v1/openapi.json lists them)"
        elif isinstance(ex, falcon.HTTPMethodNotAllowed):  # and which methods the route takes
            allowed = [m.strip() for m in (ex.headers or {}).get("Allow", "").split(",") if m]
            message = f"{req.path} takes {', '.join(allowed)}, not {req.method}"
            details = {"allowed": allowed}
        err = APIError(message, status=status, code=_FALCON_CODES.get(status, "http_error"),
                       details=details)
        if ex.headers:
            err.headers = dict(ex.headers)
        render(req, resp, err)

    def on_exception(req, resp, ex, params):
        if fault := state_fault(ex):
            log.error("request %s: %s", getattr(req.context, "request_id", "?"), fault[1])
            render(req, resp, fault[0])
            return
        log.error("unhandled error in request %s", getattr(req.context, "request_id", "?"),
                  exc_info=ex)
        render(req, resp, APIError())

    app.add_error_handler(Exception, on_exception)
    app.add_error_handler(falcon.HTTPError, on_http_error)
    app.add_error_handler(APIError, on_api_error)
