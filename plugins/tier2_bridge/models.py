"""Request and response models of the tier2 admin routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from neuralmind import Model, PageQuery


def _iso_time(value: Any) -> Any:
    """ISO 8601 in the forms ``datetime.fromisoformat`` reads, as ``token create --expires``
    reads a date: extended (``2026-12-02T13:00:00Z``, ``2026-12-02``) or basic
    (``20261202T130000Z``, ``20261202``). Read here, not by pydantic, which also takes ``"0"``
    or ``"1780000000"`` as a Unix time: a number is none of these forms — eight digits are the
    basic date YYYYMMDD, while a Unix time has ten (since 2001), or a sign, or a fraction, and
    is refused. Kept here until the kernel has a timestamp type beside ``ISODate``."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value.isascii():  # no other script's digits (２０２６…)
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError("an ISO 8601 time is written YYYY-MM-DDTHH:MM:SS (UTC unless a zone "
                     "follows), or a date: YYYY-MM-DD or YYYYMMDD — never as a Unix time")


ISOTime = Annotated[datetime, BeforeValidator(_iso_time)]


class AuditQuery(PageQuery):
    actor: str | None = Field(None, max_length=256, description="Only this actor's records")
    action: str | None = Field(None, max_length=256, description="An event kind (`api.call`, "
                               "`memory.created`); a trailing `*` matches a prefix (`memory.*`)")
    project: str | None = Field(None, max_length=256, description="Only this project's records")
    since: ISOTime | None = Field(None, description="ISO 8601; records at or after this time "
                                   "(UTC when no zone is given)")
    after: int | None = Field(None, ge=0, le=2 ** 63 - 1, description="Records after this `seq`: "
                              "a poller keeps the last seq it read (instead of a cursor)")


class AuditRecord(Model):
    seq: int = Field(description="Position in the chain, from 1, without gaps")
    at: str = Field(description="When the event happened (UTC, ISO 8601)")
    actor: str | None
    action: str = Field(description="The kernel event's kind")
    project: str | None
    target: str | None = Field(description="What the event names: an `api.call`'s "
                               "`METHOD path status`, a memory id, a token id …")
    request_id: str | None
    prev_hash: str
    hash: str = Field(description="sha256(prev_hash + canonical JSON of the first seven fields)")


class SeatsOut(Model):
    seats: int | None = Field(description="Seats the licence grants; null without a valid licence")
    active_actors: int = Field(description="Distinct token actors seen in the window")
    exceeded: bool = Field(description="active_actors > seats (never true without a licence)")
    licensee: str | None
    expires: str | None
    license_error: str | None = Field(None, description="Why no licence is in force, if none is")
    window_days: int = Field(description="The window active actors are counted over")
