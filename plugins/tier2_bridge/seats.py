"""Seat checks: the licence file, and the distinct token actors seen in the last 30 days.

The core never enforces seats (spec §11, open decision 1): going over logs a warning, emits
``seats.exceeded`` once per transition (the state is shared by every worker in ``seats.db``)
and shows in ``GET /v1/admin/seats``. A missing or invalid licence is a warning, never a crash.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import Field, TypeAdapter

from neuralmind import ConfigSection, ISODate, database_errors

from plugins.tier2_bridge.selfhosted import SelfHosted
from plugins.tier2_bridge.storage import LazyDatabase, StoreUnavailable

log = logging.getLogger("neuralmind.tier2.seats")

LICENSE_ENV = "NEURALMIND_LICENSE_PATH"
LICENSE_FILE = "license.json"
SEATS_FILE = "seats.db"
WINDOW_DAYS = 30
TOUCH_EVERY_S = 300.0  # a worker refreshes an actor's last_seen at most this often
COUNTED_KINDS = ("token",)  # server-mode tokens; the loopback user is not a seat

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS seen (actor TEXT PRIMARY KEY, last_seen TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS seen_by_time ON seen (last_seen);
CREATE TABLE IF NOT EXISTS seat_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""]
PG_MIGRATIONS = MIGRATIONS
TABLES = ("seen", "seat_state")


class SeatsSection(ConfigSection):
    """``[tier2]``: where the licence is (``$NEURALMIND_LICENSE_PATH`` wins) and the window."""

    license_path: str | None = None
    seats_window_days: int = Field(WINDOW_DAYS, ge=1, le=3650)
    self_hosted: SelfHosted = Field(default_factory=SelfHosted)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- the licence -----------------------------------------------------------------------------

@dataclass(frozen=True)
class License:
    """What the licence file says, or why it says nothing (``problem``)."""

    path: Path
    seats: int | None = None
    licensee: str | None = None
    expires: str | None = None
    problem: str | None = None

    @property
    def expired(self) -> bool:
        """Past its ``expires`` day in UTC, as every other date here is read: the server's
        local day would end it up to 14 hours early or 12 late."""
        return (self.expires is not None
                and date.fromisoformat(self.expires) < datetime.now(UTC).date())


_DATE = TypeAdapter(ISODate)


def _iso_date(value: object) -> bool:
    """``YYYY-MM-DD`` text and a day of the calendar, as a request's date field takes it."""
    try:
        return isinstance(value, str) and bool(_DATE.validate_python(value))
    except ValueError:  # pydantic's ValidationError is one
        return False


def license_path(home: Path, configured: str | None = None) -> Path:
    return Path(os.environ.get(LICENSE_ENV) or configured or Path(home) / LICENSE_FILE).expanduser()


def read_license(path: Path) -> License:
    """Parse ``{licensee, seats, expires}``; any problem is reported, not raised."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        hint = "" if os.environ.get(LICENSE_ENV) else f" (set {LICENSE_ENV} to name another)"
        return License(path, problem=f"no licence file at {path}{hint}")
    except (OSError, UnicodeDecodeError, ValueError) as ex:
        return License(path, problem=f"licence file {path} is not readable JSON: {ex}")
    if not isinstance(data, dict):
        return License(path, problem=f"licence file {path} is not a JSON object")
    seats, licensee, expires = data.get("seats"), data.get("licensee"), data.get("expires")
    if isinstance(seats, bool) or not isinstance(seats, int) or seats < 1:
        return License(path, problem=f"licence file {path}: `seats` must be a whole number ≥ 1")
    if not isinstance(licensee, str) or not licensee.strip():
        return License(path, problem=f"licence file {path}: `licensee` must be a non-empty string")
    if expires is not None and not _iso_date(expires):
        return License(path, problem=f"licence file {path}: `expires` must be an ISO date "
                                     "(YYYY-MM-DD)")
    return License(path, seats, licensee.strip(), expires)


class LicenseFile:
    """The licence, re-read when the file changes, so a new licence needs no restart."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._stamp: tuple | None = ()
        self._license = License(self.path)
        self._lock = threading.Lock()

    def current(self) -> License:
        try:
            st = os.stat(self.path)
            stamp: tuple | None = (st.st_mtime_ns, st.st_ino, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            with self._lock:
                self._license = read_license(self.path)
                self._stamp = stamp
                warn_about(self._license)
        return self._license


def warn_about(lic: License) -> None:
    if lic.problem:
        log.warning("tier2 seats: %s; seat checks are off until a valid licence is in place",
                    lic.problem)
    elif lic.expired:
        log.warning("tier2 seats: the licence for %s expired on %s", lic.licensee, lic.expires)


# -- the ledger of actors --------------------------------------------------------------------

@dataclass(frozen=True)
class SeatStatus:
    seats: int | None
    active_actors: int
    exceeded: bool
    licensee: str | None
    expires: str | None
    license_problem: str | None = None
    # when the count next falls by itself: the oldest active actor leaves the window then
    recount_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"seats": self.seats, "active_actors": self.active_actors,
                "exceeded": self.exceeded, "licensee": self.licensee, "expires": self.expires}


class SeatLedger:
    """``seats.db``: when each actor was last seen, and whether seats were last exceeded."""

    def __init__(self, db: LazyDatabase, window_days: int = WINDOW_DAYS):
        self.db = db
        self.window = timedelta(days=window_days)

    def touch(self, actor: str, lic: License, now: datetime | None = None
              ) -> tuple[SeatStatus, bool]:
        """Mark ``actor`` seen, then :meth:`settle` in the same write transaction."""
        now = now or datetime.now(UTC)
        with self.db.get().transaction(serial=True) as conn:
            conn.execute("INSERT INTO seen (actor, last_seen) VALUES (?, ?) ON CONFLICT (actor) "
                         "DO UPDATE SET last_seen = excluded.last_seen "
                         "WHERE excluded.last_seen > seen.last_seen",
                         (actor, _iso(now)))
            return self._decide(conn, lic, now)

    def settle(self, lic: License, now: datetime | None = None) -> tuple[SeatStatus, bool]:
        """Whether ``exceeded`` changed under ``lic`` (a new licence, actors gone from the
        window) without noting anyone: returns the status and whether this call recorded the
        change. Decided inside a write transaction, so exactly one worker sees each change;
        when nothing changed (every worker but one) it is a read and takes no write lock."""
        now = now or datetime.now(UTC)
        db = self.db.get()
        status = self._status(db.conn, lic, now)
        if self._stored(db.conn) == status.exceeded:
            return status, False
        with db.transaction(serial=True) as conn:
            return self._decide(conn, lic, now)

    def _decide(self, conn, lic: License, now: datetime) -> tuple[SeatStatus, bool]:
        status = self._status(conn, lic, now)
        changed = self._stored(conn) != status.exceeded
        if changed:
            conn.execute("INSERT INTO seat_state (key, value) VALUES ('exceeded', ?) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         ("1" if status.exceeded else "0",))
        return status, changed

    @staticmethod
    def _stored(conn) -> bool:
        row = conn.execute("SELECT value FROM seat_state WHERE key = 'exceeded'").fetchone()
        return row[0] == "1" if row else False

    def status(self, lic: License, now: datetime | None = None) -> SeatStatus:
        try:
            return self._status(self.db.get().conn, lic, now or datetime.now(UTC))
        except database_errors() as ex:
            raise StoreUnavailable(f"cannot read {self.db.path}: {ex}") from ex

    def _status(self, conn, lic: License, now: datetime) -> SeatStatus:
        active, oldest = conn.execute("SELECT COUNT(*), MIN(last_seen) FROM seen "
                                      "WHERE last_seen >= ?",
                                      (_iso(now - self.window),)).fetchone()
        exceeded = lic.seats is not None and active > lic.seats
        # times are whole seconds: the oldest still counts through its last second
        return SeatStatus(lic.seats, active, exceeded, lic.licensee, lic.expires, lic.problem,
                          _instant(oldest) + self.window + timedelta(seconds=1)
                          if oldest else None)


def _instant(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text)
    except (TypeError, ValueError):  # not written by us: look again at the next request
        return datetime.now(UTC) - timedelta(days=36500)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


class SeatWatch:
    """Per process: notes token actors as requests arrive, and reports transitions.

    A worker writes an actor's ``last_seen`` at most every ``TOUCH_EVERY_S``, so the
    per-request cost is a dict lookup and a stat of the licence; a new actor is written at
    once, so crossing the seat count is noticed on the first request of the actor that
    crosses it. Whether seats are exceeded is decided again, without noting anyone, at the
    first noted request after this worker finds a new licence, and after the oldest active
    actor leaves the window — so a licence change (either way) and a count that falls are
    warned about, and emitted, at the next noted request, whichever worker serves it, once.
    """

    def __init__(self, ledger: SeatLedger, license_file: LicenseFile, on_change):
        self.ledger = ledger
        self.license_file = license_file
        self._on_change = on_change
        self._touched: dict[str, float] = {}
        self._decided_under: License | None = None  # the licence of this worker's last decision
        self._recount_at = float("-inf")  # epoch seconds: when to decide again regardless

    def seen(self, actor: str) -> None:
        lic = self.license_file.current()
        last = self._touched.get(actor)
        clock = time.monotonic()
        if last is None or clock - last >= TOUCH_EVERY_S:
            status, changed = self.ledger.touch(actor, lic)
            self._touched[actor] = clock  # noted once written: a failed write is tried again
        elif lic is not self._decided_under or time.time() >= self._recount_at:
            status, changed = self.ledger.settle(lic)
        else:
            return
        self._decided_under = lic
        self._recount_at = (status.recount_at.timestamp() if status.recount_at is not None
                            else float("inf"))
        if changed:
            self._on_change(status)

    def status(self) -> SeatStatus:
        return self.ledger.status(self.license_file.current())


def stored_files(home) -> list:
    from neuralmind import StoredFile
    return [StoredFile(home.path / SEATS_FILE, MIGRATIONS)]


def copy_seats(home, target) -> list:
    """seats.db into the shared database: who was seen when, and the exceeded flag."""
    from neuralmind import copy_table
    source = home.open(stored_files(home)[0])
    if source is None:
        return []
    try:
        return [copy_table(source, target, "seen", ("actor",)),
                copy_table(source, target, "seat_state", ("key",))]
    finally:
        source.close()
