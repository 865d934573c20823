"""``GET /v1/admin/audit`` and ``GET /v1/admin/seats``: what an administrator reads."""

from __future__ import annotations

from datetime import UTC, datetime

from neuralmind import (InvalidFields, Page, Unavailable, decode_cursor, encode_cursor, operation,
                        row_number)
from plugins.tier2_bridge.models import AuditQuery, AuditRecord, SeatsOut
from plugins.tier2_bridge.storage import StoreUnavailable


def _since(at: datetime | None) -> str | None:
    """``at`` in the trail's own format, so the comparison can be a string comparison."""
    if at is None:
        return None
    try:
        utc = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    except (OverflowError, ValueError):
        raise InvalidFields.one("since", "out of range in UTC", "datetime_range") from None
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AuditResource:
    def __init__(self, bridge):
        self.bridge = bridge

    @operation(permission="audit.read", query=AuditQuery, response=Page[AuditRecord],
               tags=["admin"], summary="The hash-chained audit trail, oldest first")
    def on_get(self, req, resp):
        q = req.context.query
        self.bridge.trail.sync()  # every event committed so far, not just what the copier reached
        try:
            rows = self.bridge.trail.page(after=decode_cursor(q.cursor, row_number) or 0, limit=q.limit + 1,
                                          actor=q.actor, action=q.action, project=q.project,
                                          since=_since(q.since))
        except StoreUnavailable:
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
               summary="Licensed seats against the token actors seen in the last 30 days")
    def on_get(self, req, resp):
        try:
            status = self.bridge.seats.status()
        except StoreUnavailable:
            raise Unavailable("seat counts cannot be read; the server log says why",
                              code="seats_unavailable") from None
        return SeatsOut(**status.as_dict(), license_error=status.license_problem,
                        window_days=self.bridge.seats.ledger.window.days)
