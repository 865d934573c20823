"""The server's clock, as every record and event writes it: UTC, ISO 8601."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """Now, to the millisecond: ``2026-11-30T13:25:42.692Z``."""
    return iso_time(datetime.now(UTC))


def iso_time(at: datetime) -> str:
    """An aware time as every record writes one (UTC, to the millisecond, ``…Z``): text that
    compares as the times do."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def today() -> str:
    """Today's date in UTC (what review-by dates are compared with)."""
    return datetime.now(UTC).date().isoformat()
