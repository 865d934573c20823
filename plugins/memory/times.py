"""Times as the memory store writes them — UTC, to the millisecond, ``…Z``, as ``now_iso``
gives them — so that every comparison of them as text (newest first, the date filters, decay's
last touch, an ``If-Match`` against ``updated_at``) is a comparison in time."""

from __future__ import annotations

import datetime as dt

from neuralmind import iso_time, now_iso

MS = dt.timedelta(milliseconds=1)


def utc(stamp: str) -> str:
    """An ISO 8601 time with its zone, in any of the forms ISO allows (an offset, the basic
    format, a space for ``T``, the hour alone), as the store writes times; ValueError for one
    without a zone, or one whose UTC form falls outside the years 0001–9998 (9999 is kept
    free: a write stamps a record a millisecond past its last time when the clock is behind)."""
    try:
        at = dt.datetime.fromisoformat(stamp)
    except ValueError:
        raise ValueError("not an ISO 8601 time (2026-01-31T12:00:00.000Z)") from None
    if at.tzinfo is None:
        raise ValueError("an ISO 8601 time with its zone (…Z)")
    try:
        at = at.astimezone(dt.UTC)  # 0001-01-01T00:00+05:00 falls in the year 0: overflow
        if at.year > 9998:
            raise OverflowError
    except OverflowError:
        raise ValueError("a time between the years 0001 and 9998 in UTC") from None
    return iso_time(at)


def after(previous: str, now: str | None = None) -> str:
    """A record's next ``updated_at``: ``now`` (the clock's by default), or one millisecond
    past ``previous`` when the clock has not passed it — two writes in one millisecond, a
    clock set back, a time imported from ahead. ``updated_at`` is the ETag ``If-Match``
    compares, so every write must move it forward."""
    now = now or now_iso()
    last = dt.datetime.fromisoformat(previous)
    return now if dt.datetime.fromisoformat(now) > last else iso_time(last + MS)
