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
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from neuralmind import ConfigError, file_in_the_way, now_iso, write_private
from plugins.auth.loopback import new_token

log = logging.getLogger("neuralmind.auth")

TOKENS_FILE = "tokens.json"
SHORT_ID = 8
SEEN_MAX = 4096
DURATION = re.compile(r"^([+-]?\d{1,12})([dhm])$")
HASH = re.compile(r"^[0-9a-f]{64}$")
FIELDS = ("actor", "role", "projects", "created_at", "expires_at")


class TokenError(ConfigError):
    """Stored tokens that cannot be read, a tokens file that cannot be where the config puts
    it, or an argument the CLI refuses. A ConfigError, so a command and a server's start-up
    say it as it is, in one line."""

    exit_code = 2


class AmbiguousId(TokenError):
    """A short token id that more than one hash starts with."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def now() -> datetime:
    return datetime.now(UTC)


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def instant(text: str) -> datetime:
    """An ISO datetime, UTC when it names no zone; ValueError when ``text`` is none."""
    at = datetime.fromisoformat(text.strip())
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def expiry_instant(text: str) -> datetime:
    """When an expiry passes, one rule for ``--expires`` and a stored ``expires_at``: a date,
    in any form ``date.fromisoformat`` takes (2026-12-31, 20261231, 2026-W53-4), lasts
    through that day (UTC), as "expires 2026-12-31" reads; else :func:`instant`. ValueError
    when ``text`` is neither, OverflowError for a date ending past the year 9999."""
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        return instant(text)
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)


def parse_expiry(text: str, start: datetime | None = None) -> str:
    """``30d``/``12h``/``15m`` from now, or an ISO datetime (UTC when no zone), or a date: the
    token lasts through that day (:func:`expiry_instant`). Each must lie ahead: a token born
    expired is a mistake, never a use — so a fraction of a second is raised to the next whole
    second stored, never cut off."""
    start = start or now()
    if not text.strip():  # `--expires ""` from a script's empty variable: never "no expiry"
        raise TokenError("--expires is empty: leave it out for a token that never expires, or "
                         "give a date (2026-12-31), a datetime or a duration (30d, 12h, 15m)")
    try:
        at = _expiry(text.strip(), start)
        shown = iso(at + timedelta(microseconds=-at.microsecond % 1_000_000))
    except OverflowError:
        raise TokenError(f"--expires {text!r} is too far ahead: past the year 9999") from None
    if at <= start:
        raise TokenError(f"--expires {text!r} is not in the future: give a later date or a "
                         "duration above zero (30d, 12h, 15m)")
    return shown


def _expiry(text: str, start: datetime) -> datetime:
    """The instant ``text`` names, in UTC."""
    m = DURATION.match(text)
    if m:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[m.group(2)]
        at = start + timedelta(**{unit: int(m.group(1))})
    else:
        try:
            at = expiry_instant(text)
        except ValueError:
            raise TokenError(f"--expires {text!r}: use an ISO date (2026-01-31), a datetime, "
                             "or a duration like 30d, 12h, 15m") from None
    return at.astimezone(UTC)  # before rounding: an offset may hold a fraction of a second


@dataclass(frozen=True)
class TokenRecord:
    actor: str
    role: str
    projects: list[str] | str  # "*" for every project
    created_at: str
    expires_at: str | None = None
    # why today's rules for names refuse a record an older NeuralMind wrote (never stored):
    # the token is refused like a revoked one, yet listed and revocable (stored_record)
    set_aside: str | None = None

    def stored(self) -> dict:
        """The fields a tokens file holds, as they were read or made."""
        return {name: getattr(self, name) for name in FIELDS}

    @property
    def expires_ts(self) -> float:
        """Expiry as epoch seconds (infinity for none), for a cheap per-request comparison."""
        return (float("inf") if self.expires_at is None
                else expiry_instant(self.expires_at).timestamp())

    def expired(self) -> bool:
        return now().timestamp() >= self.expires_ts

    @property
    def project_ids(self) -> tuple[str, ...] | None:
        """``Actor.projects``: None for every project."""
        return None if self.projects == "*" else tuple(self.projects)


ACTOR_MAX = 200  # characters of an actor's name: it is shown in every list, event and history


def plain(text: object) -> bool:
    """A name a listing can show in its column: a non-empty string of printable characters
    (no newline, tab or other control character to break the lines)."""
    return isinstance(text, str) and bool(text.strip()) and text.isprintable()


def _shown(value: object) -> str:
    """A stored value in a message: JSON, on one line, cut short."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


KEY_SHOWN = 4  # characters of a key that is no hash a message shows: it may be a raw token


def _key_shown(key: object) -> str:
    """A stored key that is no sha256 in a message: its first few characters and its length,
    never more, as a hand edit may have pasted the token itself where its hash goes."""
    if not isinstance(key, str) or len(key) <= KEY_SHOWN:
        return _shown(key)
    return f"{json.dumps(key[:KEY_SHOWN])[:-1]}...\" ({len(key)} characters)"


def stored_record(source: str, key: object, fields: object) -> TokenRecord:
    """A stored token the server can trust, or TokenError naming ``source`` (the file, the
    table), the token and what is wrong: a hand edit costs one clear line, never a 500 at
    each request that presents the token.

    Structural faults — the key, the fields, their types, the role (what the token may do),
    the times — refuse the whole file. Names that are strings but not printable (an actor of
    spaces or with a tab, a project id with one) break only a rule older NeuralMinds did not
    apply, so a file they wrote may hold them: such a record is ``set_aside``, not refused —
    its token grants nothing, while the rest of the file serves and ``token revoke`` can
    remove it."""
    if not (isinstance(key, str) and HASH.match(key)):
        raise TokenError(f"{source}: {_key_shown(key)} is not a token's sha256 (64 hex "
                         "characters)")
    where = f"{source}: token {key[:SHORT_ID]}"
    if not isinstance(fields, dict):
        raise TokenError(f"{where} is {_shown(fields)}, not an object of {', '.join(FIELDS)}")
    missing = [f for f in FIELDS[:-1] if f not in fields]  # expires_at may be left out
    unknown = [_shown(f) for f in sorted(set(fields) - set(FIELDS))]
    faults = [f"{what} {', '.join(names)}" for what, names in (("missing", missing),
                                                                ("unknown", unknown)) if names]
    if faults:
        raise TokenError(f"{where}: {'; '.join(faults)} (a token holds {', '.join(FIELDS)})")
    actor, role, projects = fields["actor"], fields["role"], fields["projects"]
    if not plain(role):
        raise TokenError(f"{where}: role {_shown(role)} is not a name of printable characters")
    if not isinstance(actor, str):
        raise TokenError(f"{where}: actor {_shown(actor)} is not a string")
    if projects != "*" and not (isinstance(projects, list)
                                and all(isinstance(p, str) for p in projects)):
        raise TokenError(f'{where}: projects {_shown(projects)} is neither "*" nor a list of '
                         "project ids")
    aside = []
    if not plain(actor):
        aside.append(f"actor {_shown(actor)} is not a name of printable characters")
    if projects != "*" and not all(map(plain, projects)):
        aside.append(f"projects {_shown(projects)} holds an id that is not a name of "
                     "printable characters")
    for name, read in (("created_at", instant), ("expires_at", expiry_instant)):
        value = fields.get(name)
        if value is None and name == "expires_at":
            continue
        try:
            read(value)
        except (AttributeError, ValueError):  # not a string, or not a datetime
            raise TokenError(f"{where}: {name} {_shown(value)} is not an ISO datetime "
                             "(2026-12-31T00:00:00Z)"
                             + (", a date or null" if name == "expires_at" else "")) from None
        except OverflowError:  # 9999-12-31: through that day is past what a datetime holds
            raise TokenError(f"{where}: {name} {_shown(value)} ends past the year 9999: give "
                             "an earlier date, or null for no expiry") from None
    return TokenRecord(**fields, set_aside="; ".join(aside) or None)


def tokens_path(settings) -> Path:
    return Path(settings.server.tokens_file or settings.home / TOKENS_FILE).expanduser()


def path_fault(path: Path) -> str | None:
    """Why no tokens file can be at ``path`` — a directory in its place, or a file where one
    of its folders goes — or None."""
    if path.is_dir():
        return (f"tokens file {path} is a directory: [server] tokens_file names the file "
                "itself (e.g. tokens.json in it)")
    if blocker := file_in_the_way(path.parent):
        return f"tokens file {path} cannot be made: {blocker} is a file, not a directory"
    return None


def _parse(raw: bytes, path: Path) -> dict[str, TokenRecord]:
    """The records of a tokens file, each checked: TokenError names the file and what is
    wrong (an empty file holds no tokens)."""
    source = f"tokens file {path}"
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as ex:  # JSON or UTF-8 broken
        raise TokenError(f"{source} is not valid JSON: {ex}") from None
    shape = '{"version": 1, "tokens": {sha256: {actor, role, projects, created_at, expires_at}}}'
    if not isinstance(data, dict):
        raise TokenError(f"{source} holds {_shown(data)}, not {shape}")
    if data.get("version") != 1:
        raise TokenError(f"{source} is version {_shown(data.get('version'))}: this NeuralMind "
                         "reads version 1")
    if not isinstance(data.get("tokens"), dict):
        raise TokenError(f'{source}: "tokens" is {_shown(data.get("tokens"))}, not an object '
                         f"(the file holds {shape})")
    return {h: stored_record(source, h, rec) for h, rec in data["tokens"].items()}


class Tokens(ABC):
    """Server mode's tokens: the server's lookup, cached for one version of the records, and
    the CLI's edits. Where the records live is the subclass's: :class:`TokenFile` (one
    machine) or :class:`PgTokens` (the database several servers share)."""

    where = ""

    def __init__(self):
        self._lock = threading.Lock()
        self._stamp: Hashable | None = None
        self._records: dict[str, TokenRecord] = {}  # the usable ones
        self.set_aside: dict[str, TokenRecord] = {}  # this version's records set aside
        self._seen: dict[str, tuple[str, TokenRecord] | None] = {}  # token → lookup, this version
        self.unreadable: str | None = None  # why this version of the records could not be read

    @abstractmethod
    def _current(self) -> Hashable | None:
        """A stamp that moves whenever the records change (None: there are none)."""

    @abstractmethod
    def _read(self) -> dict[str, TokenRecord]:
        """Every record, read now."""

    @abstractmethod
    def _editing(self) -> AbstractContextManager[dict[str, TokenRecord]]:
        """The records, locked against other writers; changes made to the dict are saved."""

    def misplaced(self) -> str | None:
        """Why the records cannot be kept where the config puts them, or None."""
        return None

    # -- the server's side: one cheap check per request ------------------------------------

    def records(self) -> dict[str, TokenRecord]:
        """The records whose tokens are taken: none while they cannot be read, and never one
        set aside (its token is refused like a revoked one)."""
        stamp = self._current()
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    every, self.unreadable = self._load() if stamp is not None else ({}, None)
                    self._records = {h: r for h, r in every.items() if r.set_aside is None}
                    self.set_aside = {h: r for h, r in every.items() if r.set_aside is not None}
                    self._seen = {}
                    self._stamp = stamp
        return self._records

    def _load(self) -> tuple[dict[str, TokenRecord], str | None]:
        """``(records, None)``, or no records and why: fail closed, as a broken hand edit must
        not keep a revoked token alive. Said once per version of the records."""
        try:
            return self._read(), None
        except TokenError as ex:
            log.error("%s; refusing every token until it is fixed", ex)
            return {}, str(ex)

    def lookup(self, token: str) -> tuple[str, TokenRecord] | None:
        """``(hash, record)`` for a presented token. A dict lookup by sha256 leaks nothing
        useful through timing: learning a prefix of a hash does not help find a preimage."""
        asked = time.monotonic()
        found = self._look(token)
        if found is None:  # a token created before this request works at once, in any thread
            self._recheck(asked)
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

    def _recheck(self, asked: float) -> None:
        """Make the next look read the records' version again, unless it was read since
        ``asked`` (the file is stat'ed anyway)."""

    # -- the CLI's side: locked read-modify-write ------------------------------------------

    def create(self, actor: str, role: str, projects: list[str] | str,
               expires_at: str | None = None) -> tuple[str, str, TokenRecord]:
        """``(token, hash, record)``; the token itself is never stored."""
        token = new_token()
        rec = TokenRecord(actor, role, projects, now_iso(), expires_at)
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
                    raise TokenError(f"a token id is at least {SHORT_ID} hex characters "
                                     "(see `neuralmind token list`)")
                hits = [h for h in records if h.startswith(prefix)]
                if len(hits) > 1:
                    raise AmbiguousId(f"token id {short_id} is ambiguous; give more characters")
            else:
                hits = [h for h, r in records.items() if r.actor == actor]
            removed = [(h, records.pop(h)) for h in hits]
        return removed

    def listing(self) -> list[tuple[str, TokenRecord]]:
        """Every record, read now, by actor, those set aside too (``revoke`` removes them);
        TokenError when they cannot be read."""
        return sorted(self._read().items(), key=lambda kv: (kv[1].actor, kv[1].created_at))


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
        except OSError as ex:  # a file where a folder of the path goes: _read says so
            return ex.errno
        return st.st_mtime_ns, st.st_ino, st.st_size

    def _read(self) -> dict[str, TokenRecord]:
        """The file's records; none when there is no file yet."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as ex:
            raise TokenError(path_fault(self.path)
                             or f"tokens file {self.path} cannot be read: {ex.strerror}") from None
        return _parse(raw, self.path)

    def misplaced(self) -> str | None:
        return path_fault(self.path)

    @contextmanager
    def _editing(self) -> Iterator[dict[str, TokenRecord]]:
        if fault := path_fault(self.path):
            raise TokenError(fault)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(f".{self.path.name}.lock")
        fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            records = self._read()
            yield records
            body = {"version": 1, "tokens": {h: r.stored() for h, r in sorted(records.items())}}
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
EDIT_LOCK = 0x6E6D_746B  # pg_advisory_xact_lock key of token edits ("nmtk")
NEXT_VERSION = "UPDATE auth_tokens_version SET version = version + 1"  # 0: never held a token


class PgTokens(Tokens):
    """The records in the database several servers share; a version row, read at most every
    quarter second, tells each server's cache that they changed."""

    where = "the shared database (auth_tokens)"

    def __init__(self, db):
        super().__init__()
        self.db = db
        self._checked = (float("-inf"), None)  # (monotonic time, version)

    def _recheck(self, asked: float) -> None:
        """A miss reads the version again unless some thread read it after the request was
        asked (its reload, if the version moved, is then what the next look sees): a token
        created before the request is never refused, and misses arriving together share one
        read of a one-row table."""
        if self._checked[0] < asked:
            self._checked = (float("-inf"), None)

    def _current(self) -> Hashable | None:
        at, version = self._checked
        if time.monotonic() - at >= PG_RECHECK_S:
            at = time.monotonic()  # before the read: what it sees was committed by then
            version = self.db.conn.execute("SELECT version FROM auth_tokens_version").fetchone()[0]
            self._checked = (at, version)
        return version

    def _read(self) -> dict[str, TokenRecord]:
        rows = self.db.conn.execute("SELECT * FROM auth_tokens").fetchall()
        return {r["digest"]: self._record(r) for r in rows}

    @contextmanager
    def _editing(self) -> Iterator[dict[str, TokenRecord]]:
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (EDIT_LOCK,))
            before = {r["digest"]: self._record(r)
                      for r in conn.execute("SELECT * FROM auth_tokens").fetchall()}
            records = dict(before)
            yield records
            for h in before.keys() - records.keys():
                conn.execute("DELETE FROM auth_tokens WHERE digest = ?", (h,))
            _insert(conn, {h: records[h] for h in records.keys() - before.keys()})
            conn.execute(NEXT_VERSION)
        self._checked = (float("-inf"), None)

    def seed(self, records: dict[str, TokenRecord]) -> bool:
        """Fill a table that never held a token with ``records`` (``storage migrate``), or
        write nothing and return False. Once the table has held tokens (a first copy, a
        server's create or revoke), the database has the last word: copying again would bring
        back a token an admin revoked there."""
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (EDIT_LOCK,))
            if conn.execute("SELECT version FROM auth_tokens_version").fetchone()[0]:
                return False
            _insert(conn, records)
            conn.execute(NEXT_VERSION)
        return True

    def _record(self, row) -> TokenRecord:
        try:
            projects = json.loads(row["projects"])
        except ValueError:  # a hand edit: checked as it is
            projects = row["projects"]
        return stored_record(self.where, row["digest"], {
            "actor": row["actor"], "role": row["role"], "projects": projects,
            "created_at": row["created_at"], "expires_at": row["expires_at"]})


def _insert(conn, records: dict[str, TokenRecord]) -> None:
    for h, r in records.items():
        conn.execute("INSERT INTO auth_tokens VALUES (?, ?, ?, ?, ?, ?)",
                     (h, r.actor, r.role, json.dumps(r.projects), r.created_at, r.expires_at))


def copy_tokens(home, target) -> list:
    """``neuralmind storage migrate``: the home's tokens file into the shared table, while
    that has never held a token (:meth:`PgTokens.seed`); verified when every token of the file
    is in the table — a token revoked there since the first copy is a MISMATCH, not a copy."""
    from neuralmind import Check
    records = dict(TokenFile(tokens_path(home.settings)).listing())
    if records:
        PgTokens(target).seed(records)
    in_table = {r["digest"] for r in target.conn.execute("SELECT digest FROM auth_tokens")}
    return [Check("tokens of the file in auth_tokens", len(records),
                  len(records.keys() & in_table))]


def token_store(settings, shared_db) -> Tokens:
    """Where server mode keeps tokens: the shared database when there is one, else the file."""
    return PgTokens(shared_db) if shared_db is not None else TokenFile(tokens_path(settings))
