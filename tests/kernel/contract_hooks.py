"""A schemathesis check for tests/kernel/test_contract.py (loaded through
``SCHEMATHESIS_HOOKS``): schema-valid data is never refused on schema grounds.

Schemathesis' own ``positive_data_acceptance`` fails any 422 to a request the schema allows,
but some rules are not JSON Schema's to say — a path must name a directory, a cursor must be
one the server made, a file must lie inside the project, a review date must not have passed.
This check lets those 422s through when every error is such a domain rule (its type is not one
of pydantic's, which all stand for something the schema states), and fails the rest: a type,
a bound, a pattern or a required field the server enforces beyond what it publishes."""

from __future__ import annotations

import json
import typing

import schemathesis
from pydantic_core.core_schema import ErrorType

import tests.schemathesis_media  # noqa: F401  (the JSON Lines bodies, as every run sends them)

SCHEMA_ERRORS = frozenset(typing.get_args(ErrorType)) - {"value_error", "assertion_error"}
ACCEPTED = range(200, 300)
# bodies JSON Schema does not describe here: a JSONL import, and batch items whose required
# fields depend on their `op` (an `id` for patch and delete); every other check holds for them
UNDESCRIBED = frozenset({"/v1/projects/{project_id}/memories/import",
                         "/v1/projects/{project_id}/memories/batch"})


@schemathesis.check
def schema_valid_data_is_accepted(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or case.path in UNDESCRIBED:
        return
    status = response.status_code
    if status in ACCEPTED or status in (401, 403, 404, 409, 412, 429) or status >= 500:
        return  # 5xx: not_a_server_error's to report
    if status == 422:
        errors = json.loads(response.content)["error"]["details"].get("errors", [])
        schema = [e for e in errors if e["type"] in SCHEMA_ERRORS]
        if errors and not schema:
            return
        raise AssertionError(f"a schema-valid request was refused on schema grounds: {schema}")
    raise AssertionError(f"a schema-valid request was refused with {status}")
