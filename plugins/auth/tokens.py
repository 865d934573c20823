"""Server mode's tokens: sha256(token) → ``{actor, role, projects, created_at, expires_at}``.

Only hashes are stored, so a leaked file (or table) grants nothing. On one machine they live
in a file every worker stats per request and re-reads when it changed, so ``neuralmind token
create/revoke`` takes effect on every gunicorn worker at its next request, with no restart and
no signal; with a shared PostgreSQL database, in a table whose version each server reads at
most every quarter second.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from neuralmind import write_private
from plugins.auth.loopback import new_token

log = logging.getLogger("neuralmind.auth")

TOKENS_FILE = "tokens.json"
SHORT_ID = 8
SEEN_MAX = 4096
DURATION = re.compile(r"^([+-]?\d+)([dhm])$")


class TokenFileError(Exception):
    """A tokens file that cannot be read or an argument the CLI refuses."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def now() -> datetime:
    return datetime.now(UTC)


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_expiry(text: str, start: datetime | None = None) -> str:
    """``30d``/``12h``/``15m`` from now, or an ISO datetime (UTC when no zone), or a date: the
    token lasts through that day (UTC), as "expires 2026-12-31" reads. Each must lie ahead: a
    token born expired is a mistake, never a use."""
    start = start or now()
    m = DURATION.match(text.strip())
    if m:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[m.group(2)]
        try:
            at = start + timedelta(**{unit: int(m.group(1))})
        except OverflowError:
            raise TokenFileError(f"--expires {text!r} is too far ahead: past the year 9999"
                                 ) from None
    else:
        try:
            at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise TokenFileError(f"--expires {text!r}: use an ISO date (2026-01-31), a datetime, "
                                 "or a duration like 30d, 12h, 15m") from None
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        if len(text.strip()) == 10:  # a date alone: through its last second
            at += timedelta(days=1)
    if at <= start:
        raise TokenFileError(f"--expires {text!r} is not in the future: give a later date or a "
                             "duration above zero (30d, 12h, 15m)")
    return iso(at)


@dataclass(frozen=True)
class TokenRecord:
    actor: str
    role: str
    projects: list[str] | str  # "*" for every project
    created_at: str
    expires_at: str | None = None

    @property
    def expires_ts(self) -> float:
        """Expiry as epoch seconds (infinity for none), for a cheap per-request comparison."""
        if self.expires_at is None:
            return float("inf")
        return datetime.fromisoformat(self.expires_at.replace("Z", "+00:00")).timestamp()

    def expired(self) -> bool:
        return now().timestamp() >= self.expires_ts

    @property
    def project_ids(self) -> tuple[str, ...] | None:
        """``Actor.projects``: None for every project."""
        return None if self.projects == "*" else tuple(self.projects)


def tokens_path(settings) -> Path:
    return Path(settings.server.tokens_file or settings.home / TOKENS_FILE).expanduser()


def _parse(text: str, path: Path) -> dict[str, TokenRecord]:
    try:
        data = json.loads(text) if text.strip() else {}
        return {h: TokenRecord(**rec) for h, rec in data.get("tokens", {}).items()}
    except (ValueError, TypeError, AttributeError) as ex:
        raise TokenFileError(f"tokens file {path} is not valid: {ex}") from None


class Tokens(ABC):
    """Server mode's tokens: the server's lookup, cached for one version of the records, and
    the CLI's edits. Where the records live is the subclass's: :class:`TokenFile` (one
    machine) or :class:`PgTokens` (the database several servers share)."""

    where = ""

    def __init__(self):
        self._lock = threading.Lock()
        self._stamp: Hashable | None = None
        self._records: dict[str, TokenRecord] = {}
        self._seen: dict[str, tuple[str, TokenRecord] | None] = {}  # token → lookup, this version

    @abstractmethod
    def _current(self) -> Hashable | None:
        """A stamp that moves whenever the records change (None: there are none)."""

    @abstractmethod
    def _read(self) -> dict[str, TokenRecord]:
        """Every record, read now."""

    @abstractmethod
    def _editing(self) -> AbstractContextManager[dict[str, TokenRecord]]:
        """The records, locked against other writers; changes made to the dict are saved."""

    # -- the server's side: one cheap check per request ------------------------------------

    def records(self) -> dict[str, TokenRecord]:
        stamp = self._current()
        if stamp is None:
            return {}
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    try:
                        self._records = self._read()
                    except (TokenFileError, OSError) as ex:
                        # fail closed: a broken hand edit must not keep a revoked token alive
                        log.error("%s; refusing every token until it is fixed", ex)
                        self._records = {}
                    self._seen = {}
                    self._stamp = stamp
        return self._records

    def lookup(self, token: str) -> tuple[str, TokenRecord] | None:
        """``(hash, record)`` for a presented token. A dict lookup by sha256 leaks nothing
        useful through timing: learning a prefix of a hash does not help find a preimage."""
        found = self._look(token)
        if found is None and self._recheck():  # a token created a moment ago works at once
            found = self._look(token)
        return found

    def _look(self, token: str) -> tuple[str, TokenRecord] | None:
        records = self.records()
        seen = self._seen
        if token not in seen:
            if len(seen) >= SEEN_MAX:  # bounded: a flood of wrong tokens cannot grow it
                seen.clear()
            h = digest(token)
            seen[token] = (h, records[h]) if h in records else None
        return seen[token]

    def _recheck(self) -> bool:
        """Whether looking again may find a token just missed (the file is stat'ed anyway)."""
        return False

    # -- the CLI's side: locked read-modify-write ------------------------------------------

    def create(self, actor: str, role: str, projects: list[str] | str,
               expires_at: str | None = None) -> tuple[str, str, TokenRecord]:
        """``(token, hash, record)``; the token itself is never stored."""
        token = new_token()
        rec = TokenRecord(actor, role, projects, iso(now()), expires_at)
        with self._editing() as records:
            records[digest(token)] = rec
        return token, digest(token), rec

    def revoke(self, short_id: str | None = None, actor: str | None = None) -> list[tuple[str, TokenRecord]]:
        """Remove the token whose hash starts with ``short_id`` (≥ 8 hex) or every token of
        ``actor``; returns what was removed. An ambiguous prefix removes nothing."""
        with self._editing() as records:
            if short_id is not None:
                prefix = short_id.lower()
                if len(prefix) < SHORT_ID or not re.fullmatch(r"[0-9a-f]+", prefix):
                    raise TokenFileError(f"a token id is at least {SHORT_ID} hex characters "
                                         "(see `neuralmind token list`)")
                hits = [h for h in records if h.startswith(prefix)]
                if len(hits) > 1:
                    raise TokenFileError(f"token id {short_id} is ambiguous; give more characters")
            else:
                hits = [h for h, r in records.items() if r.actor == actor]
            removed = [(h, records.pop(h)) for h in hits]
        return removed

    def listing(self) -> list[tuple[str, TokenRecord]]:
        try:
            records = self._read()
        except FileNotFoundError:
            return []
        return sorted(records.items(), key=lambda kv: (kv[1].actor, kv[1].created_at))


class TokenFile(Tokens):
    """The records in one JSON file of hashes: every worker stats it per request and re-reads
    it when it changed; writers take an ``flock`` and replace it atomically."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = Path(path)
        self.where = str(self.path)

    def _current(self) -> Hashable | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_ino, st.st_size

    def _read(self) -> dict[str, TokenRecord]:
        return _parse(self.path.read_text(), self.path)

    @contextmanager
    def _editing(self) -> Iterator[dict[str, TokenRecord]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(f".{self.path.name}.lock")
        fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                records = self._read()
            except FileNotFoundError:
                records = {}
            yield records
            body = {"version": 1, "tokens": {h: asdict(r) for h, r in sorted(records.items())}}
            write_private(self.path, json.dumps(body, indent=2) + "\n")
        finally:
            os.close(fd)


PG_MIGRATION = """
CREATE TABLE auth_tokens (
    digest TEXT PRIMARY KEY,
    actor TEXT NOT NULL,
    role TEXT NOT NULL,
    projects TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT
);
CREATE TABLE auth_tokens_version (one INTEGER PRIMARY KEY CHECK (one = 1), version BIGINT NOT NULL);
INSERT INTO auth_tokens_version VALUES (1, 0);
"""
PG_RECHECK_S = 0.25  # a revocation reaches every server within this
PG_MISS_RECHECK_S = 0.01
EDIT_LOCK = 0x6E6D_746B  # pg_advisory_xact_lock key of token edits ("nmtk")


class PgTokens(Tokens):
    """The records in the database several servers share; a version row, read at most every
    quarter second, tells each server's cache that they changed."""

    where = "the shared database (auth_tokens)"

    def __init__(self, db):
        super().__init__()
        self.db = db
        self._checked = (float("-inf"), None)  # (monotonic time, version)

    def _recheck(self) -> bool:
        """A miss looks again at once — at most every few milliseconds, so a flood of wrong
        tokens costs the database little."""
        if time.monotonic() - self._checked[0] < PG_MISS_RECHECK_S:
            return False
        self._checked = (float("-inf"), None)
        return True

    def _current(self) -> Hashable | None:
        at, version = self._checked
        if time.monotonic() - at >= PG_RECHECK_S:
            version = self.db.conn.execute("SELECT version FROM auth_tokens_version").fetchone()[0]
            self._checked = (time.monotonic(), version)
        return version

    def _read(self) -> dict[str, TokenRecord]:
        rows = self.db.conn.execute("SELECT * FROM auth_tokens").fetchall()
        return {r["digest"]: _record(r) for r in rows}

    @contextmanager
    def _editing(self) -> Iterator[dict[str, TokenRecord]]:
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (EDIT_LOCK,))
            before = {r["digest"]: _record(r)
                      for r in conn.execute("SELECT * FROM auth_tokens").fetchall()}
            records = dict(before)
            yield records
            for h in before.keys() - records.keys():
                conn.execute("DELETE FROM auth_tokens WHERE digest = ?", (h,))
            for h in records.keys() - before.keys():
                r = records[h]
                conn.execute("INSERT INTO auth_tokens VALUES (?, ?, ?, ?, ?, ?)",
                             (h, r.actor, r.role, json.dumps(r.projects), r.created_at,
                              r.expires_at))
            conn.execute("UPDATE auth_tokens_version SET version = version + 1")
        self._checked = (float("-inf"), None)


def _record(row) -> TokenRecord:
    return TokenRecord(row["actor"], row["role"], json.loads(row["projects"]), row["created_at"],
                       row["expires_at"])


def copy_tokens(home, target) -> list:
    """``neuralmind storage migrate``: the home's tokens file into the shared table (tokens
    already there stay); verified when every token of the file is in the table."""
    from neuralmind import Check
    records = TokenFile(tokens_path(home.settings)).listing()
    shared = PgTokens(target)
    with shared._editing() as stored:
        for h, record in records:
            stored.setdefault(h, record)
    in_table = shared._read()
    return [Check("tokens of the file in auth_tokens", len(records),
                  sum(h in in_table for h, _ in records))]


def token_store(settings, shared_db) -> Tokens:
    """Where server mode keeps tokens: the shared database when there is one, else the file."""
    return PgTokens(shared_db) if shared_db is not None else TokenFile(tokens_path(settings))
