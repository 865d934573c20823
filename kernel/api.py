"""``@operation``: the one declaration a responder carries.

The kernel reads it to resolve the actor, check the permission (401/403 before 422; only a
path parameter holding NUL is refused before the project is looked up), validate the query
and body into pydantic models, serialise the response model, and generate the OpenAPI
document. Handlers never parse JSON or build error bodies.
"""

from __future__ import annotations

import codecs
import datetime
import decimal
import json
import re
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Annotated, Any

import falcon
from gunicorn.http.errors import ParseException
from pydantic import AfterValidator, BaseModel, TypeAdapter, ValidationError

from kernel.errors import (BadRequest, InvalidJSON, PayloadTooLarge, UnsupportedMediaType,
                           ValidationFailed, validation_details)
from kernel.jobs import Job, JobAccepted
from kernel.models import no_nul

JSON = "application/json; charset=utf-8"
HTTP_METHODS = ("get", "post", "put", "patch", "delete", "head")


@dataclass(frozen=True)
class Operation:
    permission: str | None
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: Any = None
    status: int = 200
    tags: tuple[str, ...] = ()
    summary: str = ""
    responses: dict[int, Any] = field(default_factory=dict)
    media_type: str = "application/json"
    include_in_schema: bool = True
    raw_types: tuple[str, ...] = ()  # other media types the body may come in, read as bytes
    errors: dict[int, str] = field(default_factory=dict)
    headers: tuple[tuple, ...] = ()  # (name, description, required[, allowed values])
    directory: bool = True  # a {project_id} route needs the directory that holds its state
    method: str = ""  # set when the kernel mounts the responder

    @property
    def public(self) -> bool:
        return self.permission is None

    @property
    def mutating(self) -> bool:
        """Whether the call can change state: not GET/HEAD, and not a ``*.read`` permission
        (a search sent as POST reads). The audit records only mutating calls."""
        return self.method not in ("get", "head") and not (self.permission or "").endswith(".read")

    @property
    def versionless(self) -> bool:
        """A write that declares no 412 compares ``If-Match`` with no version: one other than
        ``*`` cannot be found to hold (RFC 9110 §13.1.1), so the kernel refuses the write
        rather than do it regardless (a memory's amend, delete, invalidate and restore compare
        it with the record's ``updated_at``)."""
        return self.mutating and 412 not in self.errors


def operation(*, permission: str | None, body: type[BaseModel] | None = None,
              query: type[BaseModel] | None = None, response: Any = None, status: int = 200,
              tags: tuple[str, ...] | list[str] = (), summary: str = "",
              responses: dict[int, Any] | None = None, media_type: str = "application/json",
              include_in_schema: bool = True, raw_types: tuple[str, ...] = (),
              errors: dict[int, str] | None = None,
              headers: tuple[tuple, ...] | list = (), directory: bool = True) -> Callable:
    """Declare a responder. ``permission=None`` makes the route public (health, OpenAPI).

    ``responses`` documents other statuses the handler may set (``{202: JobAccepted}``);
    ``errors`` the error statuses it may answer beyond those every route can (400, 401, 403,
    413, 415, 422, 429, 500, and 404 on a route with an id in its path), each with the codes
    it stands for (``{409: "`index_busy`: a build is running"}``); ``headers`` the request
    headers it reads, as ``(name, description, required)``, then the values it accepts when
    they are few; ``media_type`` names what a streaming handler writes itself (SSE, JSONL,
    HTML; several, comma-separated, when a query parameter picks one); ``raw_types`` are
    media types the body may also come in besides JSON (a file upload): such a body reaches
    the handler as bytes in ``req.context.raw``, ``req.context.body`` None — without ``body``,
    the only ones it comes in (any other, or none, is a 415);
    ``directory=False`` serves a ``{project_id}`` route whose project's directory (which
    holds its state) is gone, as every other such route refuses (409
    ``project_directory_missing``). The OpenAPI document publishes all of it: a status the route
    answers and does not list fails the contract test (tests/kernel/test_contract.py).
    """
    _check_shapes(errors or {}, headers)
    op = Operation(permission, body, query, response, status, tuple(tags), summary,
                   dict(responses or {}), media_type, include_in_schema,
                   raw_types=tuple(raw_types), errors=dict(errors or {}),
                   headers=tuple(map(tuple, headers)), directory=directory)

    def mark(fn: Callable) -> Callable:
        fn.__nm_operation__ = op
        return fn

    return mark


def _check_shapes(errors: dict, headers) -> None:
    """``errors`` and ``headers`` as the OpenAPI document reads them, checked where they are
    declared: a wrong shape would otherwise break the whole document at its first request."""
    for status, text in errors.items():
        if not (isinstance(status, int) and 400 <= status <= 599 and isinstance(text, str)):
            raise TypeError(f"@operation errors: {status!r}: {text!r:.40} is not an error "
                            'status and the text saying its codes ({409: "`index_busy`: …"})')
    for header in headers:
        if not (isinstance(header, (tuple, list)) and len(header) in (3, 4)
                and isinstance(header[0], str) and isinstance(header[1], str)
                and isinstance(header[2], bool)):
            raise TypeError(f"@operation headers: {header!r:.60} is not (name, description, "
                            "required[, values])")


def operation_of(responder: Callable) -> Operation | None:
    return getattr(responder, "__nm_operation__", None)


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(arg) for arg in typing.get_args(annotation))
    return False


# path parameters by name, each checked as a text field is for NUL
PATH_TEXT = TypeAdapter(dict[str, Annotated[str, AfterValidator(no_nul)]])


class Validator:
    """Validates one operation's query and body, and serialises its response."""

    def __init__(self, op: Operation, max_body: int):
        self.op = op
        self.max_body = max_body
        self.list_params = ({name for name, f in op.query.model_fields.items()
                             if _is_list(f.annotation)} if op.query else set())
        self.response_adapter = TypeAdapter(op.response) if op.response is not None else None

    def query(self, req: falcon.Request) -> BaseModel:
        data: dict[str, Any] = {}
        for name, value in req.params.items():
            if name in self.list_params and not isinstance(value, list):
                value = [value]
            data[name] = value
        try:
            return self.op.query.model_validate(data)
        except ValidationError as ex:
            raise ValidationFailed(details=validation_details(
                ex.errors(include_url=False), ("query",))) from None

    def path(self, params: dict[str, str]) -> None:
        """A path parameter is text the caller sent, as a field is: one holding NUL, which
        PostgreSQL's text cannot hold, is refused as ``no_nul`` refuses a field — before
        anything is looked up by it, so both backends answer alike."""
        try:
            PATH_TEXT.validate_python(params)
        except ValidationError as ex:
            raise ValidationFailed(details=validation_details(
                ex.errors(include_url=False), ("path",))) from None

    def body(self, req: falcon.Request) -> BaseModel | None:
        raw = read_body(req, self.max_body)
        media = (req.content_type or "").split(";")[0].strip().lower()
        if media in self.op.raw_types:
            req.context.raw = raw
            return None
        if self.op.body is None:  # raw_types alone: a file, never JSON nor nothing
            raise UnsupportedMediaType(
                f"the body came as {media or 'no Content-Type'}; this route takes "
                f"{' or '.join(self.op.raw_types)}")
        raw = raw.removeprefix(codecs.BOM_UTF8)  # editors write one; RFC 8259 §8.1 lets it go
        if not raw.strip():
            raw = b"{}"
        elif media != "application/json":
            if self.op.raw_types:
                raise UnsupportedMediaType(
                    f"the body came as {media or 'no Content-Type'}; this route takes "
                    f"application/json or one of {', '.join(self.op.raw_types)}")
            raise UnsupportedMediaType()
        try:
            try:  # strict: JSON has types, so a wrong one is a client bug (no "5" → 5, 0 → false)
                return self.op.body.model_validate_json(raw, strict=True)
            except ValidationError as ex:
                errors = ex.errors(include_url=False)
                if any(e["type"] == "json_invalid" for e in errors):
                    raise InvalidJSON(_why_not_json(raw, errors[0]["msg"]),
                                      details={"reason": errors[0]["msg"]}) from None
                if not all(_integral_float(e) for e in errors):
                    raise
                # 6.0 is an integer in JSON Schema: validated again, every other rule still holds
                return self.op.body.model_validate_json(raw)
        except ValidationError as ex:
            raise ValidationFailed(details=validation_details(
                ex.errors(include_url=False), ("body",))) from None

    def write(self, resp: falcon.Response, result: Any) -> None:
        if isinstance(result, BaseModel):
            data = result.__pydantic_serializer__.to_json(result)  # bytes, no str round trip
        elif self.response_adapter is not None:
            data = self.response_adapter.dump_json(self.response_adapter.validate_python(result))
        else:
            data = json.dumps(result, default=_as_text).encode()
        resp.content_type = JSON
        resp.data = data


# what an answer without a response model may hold besides JSON's own types: text is their
# faithful form (a set or an object is not: "{1, 2}" would pass for a string)
AS_TEXT = (datetime.date, datetime.time, decimal.Decimal, uuid.UUID, PurePath)


def _as_text(value: Any) -> str:
    if isinstance(value, AS_TEXT):
        return str(value)
    raise TypeError(f"the handler answered a {type(value).__name__}, which has no JSON form: "
                    "answer lists and dicts of JSON values, or declare @operation(response=…)")


SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _why_not_json(raw: bytes, reason: str) -> str | None:
    """What to say of a body pydantic cannot read (None: the class's own message). A lone
    surrogate escape (``"\\ud83d"``, what JavaScript writes of a string cut inside an emoji) is
    valid JSON to some readers, but no character: say so, not that the JSON is broken."""
    if "hex escape" in reason and SURROGATE_ESCAPE.search(raw):
        return ("the body holds a lone surrogate escape (\\ud800–\\udfff without its pair), "
                "which is no character: send whole characters")
    return None


def _integral_float(error: dict[str, Any]) -> bool:
    value = error.get("input")
    return error["type"] == "int_type" and isinstance(value, float) and value.is_integer()


def read_body(req: falcon.Request, cap: int) -> bytes:
    """Read at most ``cap`` bytes; a larger body is a 413, chunked bodies included."""
    length = req.content_length
    if length is not None:
        if length > cap:
            raise PayloadTooLarge(cap)
        return req.bounded_stream.read() if length else b""
    if "chunked" not in (req.get_header("Transfer-Encoding") or "").lower():
        return b""
    try:
        raw = req.stream.read(cap + 1)
    except ParseException as ex:  # gunicorn decodes the chunks as they are read
        raise BadRequest("the request's chunked body is malformed",
                         details={"reason": type(ex).__name__}) from None
    if len(raw) > cap:
        raise PayloadTooLarge(cap)
    return raw


def answer_job(resp: falcon.Response, job: Job, wait: bool) -> JobAccepted:
    """A job's answer: 200 with the finished job when the caller waited for it, else 202 with
    ``Location`` to poll (``/v1/jobs/{id}``)."""
    if wait:
        resp.status = 200
    else:
        resp.status = 202
        resp.location = f"/v1/jobs/{job.id}"
    return JobAccepted(job=job)
