"""OpenAPI 3.1, generated from the route table and the pydantic models: never hand-written."""

from __future__ import annotations

import enum
import re
import typing
from typing import Any

from pydantic import BaseModel, PydanticUserError, TypeAdapter, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from kernel.api import Operation, _is_list

REF = "#/components/schemas/{model}"
PARAM = re.compile(r"{(\w+)(?::[^}]*)?}")

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message", "status", "request_id", "details"],
        "properties": {
            "code": {"type": "string"}, "message": {"type": "string"},
            "status": {"type": "integer"}, "request_id": {"type": ["string", "null"]},
            "details": {"type": "object"},
        },
    }},
}

GONE = "`project_directory_missing`: the project's directory, which held its state, is gone"
ERROR_STATUSES = {400: "Bad request (`invalid_json`, `token_in_query`)",
                  403: "Forbidden (`forbidden`, `host_not_allowed`, …)",
                  413: "Body too large", 415: "Body is not application/json",
                  422: "Validation failed", 429: "Rate limited", 500: "Internal error"}


def component_name(model: type) -> str:
    """The name a model has under ``components.schemas``: ``Page[Job]`` → ``Page_Job``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model.__name__).strip("_")


class ComponentClash(Exception):
    """Two models would publish under one component name: one would document the other's
    routes (index and memory both had a ``SearchIn``; memory's won)."""


def claim_components(tp: Any, owners: dict[str, type]) -> None:
    """Record in ``owners`` the component name of every model (and enum) ``tp`` reaches
    through its fields; a name another class holds already is a :class:`ComponentClash`.
    Walks classes only, so the kernel checks each route as it mounts it, without generating
    the schemas."""
    if isinstance(tp, type) and issubclass(tp, (BaseModel, enum.Enum)):
        name = component_name(tp)
        held = owners.get(name)
        if held is tp:
            return
        if held is not None:
            raise ComponentClash(f"two models publish as component {name!r}: "
                                 f"{held.__module__}.{held.__qualname__} and "
                                 f"{tp.__module__}.{tp.__qualname__}; rename one")
        owners[name] = tp
        for field in getattr(tp, "model_fields", {}).values():
            claim_components(field.annotation, owners)
        return
    for arg in typing.get_args(tp):
        claim_components(arg, owners)


class Unpublishable(Exception):
    """A model an operation declares that requests cannot be read into, or that the document
    cannot publish: found as the route is mounted, it would otherwise break the document (and
    the route) for everyone at their first request."""


_published: set = set()  # (type, mode) whose schema was made once: classes do not change


def check_models(op: Operation) -> None:
    """Raise :class:`Unpublishable` naming the part of ``op`` (``body=``, ``query=``,
    ``response=``, ``responses[202]``) the kernel cannot validate with or publish: ``body``
    and ``query`` must be pydantic models; each must have a JSON Schema, made as the
    document makes it."""
    for part, tp in (("body", op.body), ("query", op.query)):
        if tp is not None and not (isinstance(tp, type) and issubclass(tp, BaseModel)):
            raise Unpublishable(f"{part}={_type_name(tp)} is not a pydantic model (a "
                                "neuralmind.Model subclass)")
    for part, tp, mode in (("body", op.body, "validation"), ("query", op.query, "validation"),
                           ("response", op.response, "serialization"),
                           *((f"responses[{status}]", tp, "serialization")
                             for status, tp in op.responses.items())):
        if tp is not None:
            _check_schema(part, tp, mode)


def _check_schema(part: str, tp: Any, mode: str) -> None:
    key = (tp, mode)
    try:
        hash(key)
    except TypeError:  # an unhashable annotation: checked each time
        key = None
    if key in _published:
        return
    try:
        adapter = TypeAdapter(tp)
    except PydanticUserError as ex:
        raise Unpublishable(f"{part}={_type_name(tp)} is not a type pydantic can validate "
                            f"({_first_sentence(ex)})") from None
    try:
        adapter.json_schema(ref_template=REF, mode=mode, schema_generator=GenerateJsonSchema)
    except PydanticUserError as ex:
        field = _field_at_fault(tp, mode)
        raise Unpublishable(f"{part}={_type_name(tp)} has no JSON Schema, so the OpenAPI "
                            "document cannot publish it"
                            + (f": field {field!r}" if field else "")
                            + f" ({_first_sentence(ex)})") from None
    if key is not None:
        _published.add(key)


def _field_at_fault(model: Any, mode: str) -> str | None:
    """The first field of ``model`` whose type has no JSON Schema, if it is a model's."""
    for name, field in getattr(model, "model_fields", {}).items():
        try:
            TypeAdapter(field.annotation).json_schema(mode=mode)
        except PydanticUserError:
            return name
    return None


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else repr(tp)


def _first_sentence(ex: Exception) -> str:
    return str(ex).split("\n", 1)[0].split(". ", 1)[0].rstrip(".")


class _Schemas:
    """Collects model schemas into ``components.schemas`` with ``$ref``s between them."""

    def __init__(self):
        self.defs: dict[str, Any] = {}

    def ref(self, tp: Any, mode: str) -> dict[str, Any]:
        schema = TypeAdapter(tp).json_schema(ref_template=REF, mode=mode,
                                             schema_generator=GenerateJsonSchema)
        self.defs.update(schema.pop("$defs", {}))
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            name = component_name(tp)
            self.defs[name] = schema
            return {"$ref": REF.format(model=name)}
        return schema


def _query_params(model: type[BaseModel], schemas: _Schemas) -> list[dict[str, Any]]:
    full = model.model_json_schema(ref_template=REF)
    schemas.defs.update(full.pop("$defs", {}))
    out = []
    for name, field in model.model_fields.items():
        prop = full.get("properties", {}).get(name, {})
        param = {"name": name, "in": "query", "required": field.is_required(), "schema": prop}
        if field.description:
            param["description"] = field.description
        if _is_list(field.annotation):
            param.update(style="form", explode=True)
        out.append(param)
    return out


def _error_responses(op: Operation, path_ids: list[str]) -> dict[str, Any]:
    out = {}
    statuses = dict(ERROR_STATUSES)
    if not op.public:
        statuses[401] = "Missing or invalid credentials"
    if path_ids:
        statuses[404] = "Not found: " + ", ".join(
            f"`{name.removesuffix('_id')}_not_found`" for name in path_ids)
    if not (op.body or op.raw_types):  # 413 stays: the guard refuses any body over the cap
        statuses.pop(415)
    if op.versionless:
        statuses[412] = ("`precondition_failed`: an `If-Match` other than `*` (compared with no "
                         "version here)")
    gone = "project_id" in path_ids and op.directory
    if gone:
        statuses[409] = GONE
    for status, text in op.errors.items():  # a route's own 409s come with the kernel's
        statuses[status] = f"{text}; {GONE}" if status == 409 and gone else text
    for status, text in sorted(statuses.items()):
        out[str(status)] = {"description": text, "content": {
            "application/json": {"schema": {"$ref": REF.format(model="Error")}}}}
    return out


# what a text/event-stream response is made of: its schema describes one event
SSE_EVENT = {"type": "object", "properties": {
    "event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"},
    "retry": {"type": "integer"}}}


def _stream_schema(media_type: str) -> dict[str, Any]:
    if media_type.startswith("text/event-stream"):
        return SSE_EVENT
    return {} if media_type.startswith("application/json") else {"type": "string"}


def _refuses_empty(model) -> bool:
    """Whether ``{}`` fails ``model``: a required field, or a rule between fields."""
    try:
        model.model_validate({})
    except ValidationError:
        return True
    return False


def build(routes, version: str, title: str = "NeuralMind API (self-hosted)") -> dict[str, Any]:
    """The document for ``routes``: ``[(uri, method, operation, operation_id)]``."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for uri, method, op, operation_id in routes:
        if not op.include_in_schema:
            continue
        path = PARAM.sub(r"{\1}", uri)
        params = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in PARAM.findall(uri)]
        entry: dict[str, Any] = {"operationId": operation_id, "summary": op.summary or operation_id,
                                 "tags": list(op.tags) or ["misc"]}
        if op.query is not None:
            params += _query_params(op.query, schemas)
        params += [{"name": name, "in": "header", "required": required, "description": text,
                    "schema": {"type": "string", **({"enum": list(values[0])} if values else {})}}
                   for name, text, required, *values in op.headers]
        if params:
            entry["parameters"] = params
        if op.body is not None or op.raw_types:
            # required exactly when a missing body is refused: a missing body is read as {},
            # and one of raw_types alone must come as one of them
            content = {t: {"schema": {"type": "string", "format": "binary"}} for t in op.raw_types}
            if op.body is not None:
                content = {"application/json": {"schema": schemas.ref(op.body, "validation")},
                           **content}
            entry["requestBody"] = {"required": op.body is None or _refuses_empty(op.body),
                                    "content": content}
        responses: dict[str, Any] = {}
        written = {t.split(";")[0]: {"schema": _stream_schema(t)}
                   for t in op.media_type.split(",")}  # what a streaming handler writes
        for status, tp in {op.status: op.response, **op.responses}.items():
            if tp is None:
                if status == 204 or status in op.responses:  # e.g. {202: None}: no body
                    responses[str(status)] = {"description": "No content"}
                else:
                    responses[str(status)] = {"description": "OK", "content": written}
            else:
                content = {"application/json": {"schema": schemas.ref(tp, "serialization")}}
                if status == op.status:
                    # a route that can also stream (ask's server-sent events) publishes both
                    content.update((t, v) for t, v in written.items() if t not in content)
                responses[str(status)] = {"description": "OK", "content": content}
        responses.update(_error_responses(op, PARAM.findall(uri)))
        entry["responses"] = responses
        if not op.public:
            entry["security"] = [{"bearer": []}]
            entry["x-permission"] = op.permission
        else:
            entry["security"] = []
        paths.setdefault(path, {})[method] = entry
    schemas.defs["Error"] = ERROR_SCHEMA
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version,
                 "description": "NeuralMind's /v1 contract. Generated from the route table."},
        "servers": [{"url": "/"}],
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(schemas.defs.items())),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def markdown(doc: dict[str, Any]) -> str:
    """The route reference of ``docs/http-api.md``, rendered from the document itself."""
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            by_tag.setdefault(op["tags"][0], []).append((path, method, op))
    lines = []
    for tag in sorted(by_tag):
        lines += [f"### {tag}", ""]
        for path, method, op in by_tag[tag]:
            perm = op.get("x-permission") or "public"
            lines.append(f"#### `{method.upper()} {path}`")
            lines.append(f"{op['summary']}. Permission: `{perm}`.")
            params = [p for p in op.get("parameters", []) if p["in"] == "query"]
            if params:
                lines.append("Query: " + ", ".join(
                    f"`{p['name']}`" + ("" if not p["required"] else " (required)") for p in params) + ".")
            content = op.get("requestBody", {}).get("content", {})
            body = content.get("application/json", {})
            files = [f"`{t}`" for t in content if t != "application/json"]
            if "$ref" in body.get("schema", {}):
                lines.append(f"Body: `{body['schema']['$ref'].rsplit('/', 1)[1]}`"
                             + (f", or a file as {', '.join(files)}." if files else "."))
            elif files:
                lines.append(f"Body: a file as {', '.join(files)}.")
            ok = []
            for status, r in op["responses"].items():
                if not status.startswith("2"):
                    continue
                media = r.get("content", {})
                schema = next(iter(media.values()), {}).get("schema", {}) if media else {}
                name = schema.get("$ref", "").rsplit("/", 1)[-1] or next(iter(media), "no body")
                ok.append(f"{status} `{name}`")
            lines.append("Success: " + ", ".join(ok) + ".")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
