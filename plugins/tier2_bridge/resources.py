"""``GET /v1/admin/audit`` and ``GET /v1/admin/seats``: what an administrator reads."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from neuralmind import (InvalidFields, Page, Unavailable, decode_cursor, encode_cursor, operation,
                        row_number)
from plugins.tier2_bridge.models import AuditQuery, AuditRecord, SeatsOut
from plugins.tier2_bridge.storage import StoreUnavailable

log = logging.getLogger("neuralmind.tier2")


def _since(at: datetime | None) -> str | None:
    """``at`` in the trail's own format (milliseconds), so the comparison can be a string
    comparison; a time between two milliseconds is raised to the next, as no record written
    at the one below is at or after it."""
    if at is None:
        return None
    try:
        utc = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
        if utc.microsecond % 1000:
            utc += timedelta(microseconds=1000 - utc.microsecond % 1000)
    except (OverflowError, ValueError):
        raise InvalidFields.one("since", "out of range in UTC", "datetime_range") from None
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AuditResource:
    def __init__(self, bridge):
        self.bridge = bridge

    @operation(permission="audit.read", query=AuditQuery, response=Page[AuditRecord],
               tags=["admin"], summary="The hash-chained audit trail, oldest first",
               errors={503: "`audit_unavailable`: audit.db cannot be opened or read (the "
                            "server log says why)"})
    def on_get(self, req, resp):
        q = req.context.query
        if q.cursor and q.after is not None:
            raise InvalidFields.one("after", "give cursor or after, not both")
        after = decode_cursor(q.cursor, row_number) or q.after or 0
        self.bridge.trail.sync()  # every event committed so far, not just what the copier reached
        try:
            rows = self.bridge.trail.page(after=after, limit=q.limit + 1, actor=q.actor,
                                          action=q.action, project=q.project,
                                          since=_since(q.since))
        except StoreUnavailable as ex:
            log.error("audit: GET /v1/admin/audit answered 503: %s", ex)
            raise Unavailable("the audit trail cannot be read; the server log says why",
                              code="audit_unavailable") from None
        more = len(rows) > q.limit
        rows = rows[: q.limit]
        return Page[AuditRecord](items=[AuditRecord(**r) for r in rows],
                                 next_cursor=encode_cursor(rows[-1]["seq"]) if more else None)


class SeatsResource:
    def __init__(self, bridge):
        self.bridge = bridge

    @operation(permission="seats.read", response=SeatsOut, tags=["admin"],
               summary="Licensed seats against the token actors seen in the last 30 days",
               errors={503: "`seats_unavailable`: seats.db cannot be opened or read (the server "
                            "log says why)"})
    def on_get(self, req, resp):
        try:
            status = self.bridge.seats.status()
        except StoreUnavailable as ex:
            log.error("seats: GET /v1/admin/seats answered 503: %s", ex)
            raise Unavailable("seat counts cannot be read; the server log says why",
                              code="seats_unavailable") from None
        return SeatsOut(**status.as_dict(), license_error=status.license_problem,
                        window_days=self.bridge.seats.ledger.window.days)
