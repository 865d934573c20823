"""Request and response models of the tier2 admin routes."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from neuralmind import Model, PageQuery


class AuditQuery(PageQuery):
    actor: str | None = Field(None, max_length=256, description="Only this actor's records")
    action: str | None = Field(None, max_length=256, description="An event kind (`api.call`, "
                               "`memory.created`); a trailing `*` matches a prefix (`memory.*`)")
    project: str | None = Field(None, max_length=256, description="Only this project's records")
    since: datetime | None = Field(None, description="ISO 8601; records at or after this time "
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
