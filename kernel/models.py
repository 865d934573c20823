"""The base of every request and response model, and the paging every listing shares."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import unicodedata
from collections.abc import Callable
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field,
                      StringConstraints)

from kernel.errors import PATTERN_SAYS, InvalidFields

T = TypeVar("T")


def no_nul(value: str) -> str:
    """A text field's check (``AfterValidator(no_nul)``): PostgreSQL's text cannot hold NUL,
    so it is refused on both backends alike."""
    if "\x00" in value:
        raise ValueError("text cannot contain a NUL character")
    return value


def not_blank(value: Any) -> Any:
    """Whitespace alone says nothing, nor do invisible format characters (Unicode Cf: a
    zero-width space, a word joiner, a BOM, a direction mark): text of only those is refused
    as blank, before the strip, which would leave whitespace empty and answer "at least 1
    character" of three spaces. A format character beside real text (the joiner inside an
    emoji sequence) is text. Stricter than the ``\\S`` the contract publishes, which takes
    a zero-width space."""
    if not isinstance(value, str) or not value or (value[0].isprintable()
                                                   and not value[0].isspace()):
        return value  # the common case, decided by the first character: a Cf is unprintable
    if all(c.isspace() or unicodedata.category(c) == "Cf" for c in value):
        raise ValueError("is blank: it holds only whitespace" if value.isspace() else
                         "is blank: it holds only whitespace and invisible characters")
    return value


def text(max_length: int) -> Any:
    """A text field of the API: stripped, never blank (refused saying so), at most
    ``max_length`` characters, no NUL. The pattern publishes "not blank" in the contract
    (``not_blank``, the server's own check, is stricter)."""
    return Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                            max_length=max_length, pattern=r"\S"),
                     BeforeValidator(not_blank), AfterValidator(no_nul)]


def matching(pattern: str, says: str, **constraints: Any) -> StringConstraints:
    """A string's ``pattern`` as the contract publishes it; a value that does not match is
    refused with ``says`` — what the pattern asks, in words — not the expression itself."""
    PATTERN_SAYS[pattern] = says
    return StringConstraints(pattern=pattern, **constraints)


class Model(BaseModel):
    """Base for request and response models: unknown request fields are ignored (spec P6)."""

    model_config = ConfigDict(extra="ignore")


class Page(Model, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` for the next."""

    items: list[T]
    next_cursor: str | None = None


class PageQuery(Model):
    limit: int = Field(50, ge=1, le=200, description="Items per page (at most 200)")
    cursor: str | None = Field(None, description="Opaque cursor from the previous page")


def _iso_date(value: Any) -> Any:
    """Only ``YYYY-MM-DD`` as text: pydantic also reads ``"0"`` — and, validating laxly (an
    import line), ``0`` — as a Unix time (1970-01-01), and ``"20260601"`` as a time."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if not isinstance(value, str) or not _ISO_DATE.fullmatch(value):
        raise ValueError("a date is written YYYY-MM-DD")
    if not value.isascii():  # the shape's \d takes the digits of every script (２０２８)
        raise ValueError(f"{value} holds digits other than 0-9 (a date is written YYYY-MM-DD)")
    try:
        return dt.date.fromisoformat(value)  # a date, which strict validation takes as it is
    except ValueError:  # the shape holds, the day does not (2026-02-30)
        raise ValueError(f"{value} is no day of the calendar (YYYY-MM-DD)") from None


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
ISODate = Annotated[dt.date, BeforeValidator(_iso_date)]
"""A date field of a request: ``YYYY-MM-DD`` and nothing else (published as ``format: date``)."""


def encode_cursor(state: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str | None, valid: Callable[[Any], bool] = lambda state: True
                  ) -> Any:
    """The state inside a cursor (None for the first page, an empty cursor included); a
    cursor we did not make, or one of another listing (``valid`` says no), is a 422."""
    if not cursor:
        return None
    try:
        state = json.loads(base64.urlsafe_b64decode(cursor.encode() + b"=" * (-len(cursor) % 4)))
        json.dumps(state, ensure_ascii=False).encode()  # a lone surrogate no database takes
    except (ValueError, UnicodeError):
        state = _NOT_OURS
    if state is _NOT_OURS or not valid(state):
        raise InvalidFields.one("cursor", "not a cursor this server made", "cursor_invalid",
                                "invalid cursor")
    return state


_NOT_OURS = object()


def text_pair(state: Any) -> bool:
    """A ``[created_at, id]`` cursor: the position of a listing in time order."""
    return isinstance(state, list) and len(state) == 2 and all(isinstance(x, str) for x in state)


def row_number(state: Any) -> bool:
    """A cursor holding a row's sequence number: an int a database column holds (a larger one
    would fail in the query, a 500, rather than be refused here)."""
    return isinstance(state, int) and not isinstance(state, bool) and 0 <= state < 2 ** 63
