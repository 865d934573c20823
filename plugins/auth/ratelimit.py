"""Rate limits per actor and role, shared by every gunicorn worker on the host — or, with a
shared PostgreSQL database, by every server.

Each bucket is GCRA's "theoretical arrival time" (``tat``): a token bucket (``rate`` per
second, ``burst`` at once) stored as one number, one bucket per (actor, role) — an actor
holding tokens of two roles spends each role's limit with that role's tokens only, so one
role's requests never refill (nor spend) the other's bucket. On one machine the numbers live
in a memory-mapped table in the state home (``ratelimit.bin``, 4,096 slots of 16 bytes),
updated under a ``flock``; with PostgreSQL, in a row per bucket. A worker takes a small lease
of tokens at once (at most 1/16 of the burst and 0.1 s of the rate, so 1 for small limits),
kept per bucket, and spends it without touching the shared numbers.

Why not a SQLite row per actor (the first version: one UPSERT per request): any lock shared
by workers is held while its holder waits for its own process's GIL (the write, and even
``flock``, release it), so under load the lock was held for milliseconds and throughput fell
to a third of the unauthenticated route (docs/performance-auth.md). Leases make the shared
step rare; rate state is disposable, so it needs no durability.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import mmap
import os
import struct
import threading
import time
from pathlib import Path

from neuralmind import RateLimited
from plugins.auth.roles import RateLimit

RATE_FILE = "ratelimit.bin"
SLOTS = 4096
PROBES = 16
SLOT = struct.Struct("<Qd")  # actor key (never 0), tat (epoch seconds)
LEASE_S = 1.0  # unspent leased tokens lapse after this, so a worker cannot hoard them
MAX_LEASE = 64


def lease_size(limit: RateLimit) -> int:
    return max(1, min(MAX_LEASE, limit.burst // 16, int(limit.rate * 0.1)))


@functools.lru_cache(maxsize=SLOTS)
def actor_key(actor: str) -> int:
    return int.from_bytes(hashlib.blake2b(actor.encode(), digest_size=8).digest(), "little") or 1


def bucket_of(actor: str, role: str | None) -> str:
    """The bucket's key: the actor and the role whose limit it holds (neither holds a
    newline: both are printable, docs/security.md)."""
    return actor if role is None else f"{actor}\n{role}"


def grant(tat: float | None, limit: RateLimit, now: float) -> tuple[int, float, float]:
    """GCRA on one bucket: ``(tokens granted, new tat, 0)`` — a lease if it fits, else one —
    or ``(0, tat, seconds until one fits)``, where ``tat`` may have been brought back to an
    empty bucket's (below): the caller stores the new tat whenever it changed, so the wait
    ends."""
    interval = 1.0 / limit.rate
    tolerance = limit.burst * interval
    if tat is None:  # a new bucket is full
        tat = now
    elif tat - now > tolerance:
        # further ahead than the burst allows (the clock went back, the role's limit was
        # lowered): an empty bucket, never a refilled one — the wait is at most one burst
        tat = now + tolerance
    for want in dict.fromkeys((lease_size(limit), 1)):
        new_tat = max(tat, now) + want * interval
        if new_tat - now <= tolerance:
            return want, new_tat, 0.0
    return 0, tat, new_tat - tolerance - now


class RateLimiter:
    """Spends a worker's leased tokens, and refills the lease from the shared buckets."""

    def __init__(self, buckets: FileBuckets | PgBuckets):
        self.buckets = buckets
        self._lock = threading.Lock()  # one refill at a time in this process
        self._leases: dict[str, tuple[int, float]] = {}  # bucket → (tokens left, lapses at)

    def take(self, actor: str, limit: RateLimit, role: str | None = None) -> None:
        """Let one request of ``actor`` with a token of ``role`` (whose limit ``limit`` is)
        through, or raise 429 with the wait in Retry-After."""
        if limit.rate <= 0:
            return
        bucket = bucket_of(actor, role)
        now = time.time()
        with self._lock:
            left, lapses = self._leases.get(bucket, (0, 0.0))
            if left > 0 and now < lapses:
                self._leases[bucket] = (left - 1, lapses)
                return
            granted, wait = self.buckets.grab(bucket, limit)
            if granted:
                self._leases[bucket] = (granted - 1, now + LEASE_S)
                return
        raise RateLimited(wait, details={"retry_after": max(1, int(wait + 0.999)),
                                         "rate": limit.rate, "burst": limit.burst})


class FileBuckets:
    """The buckets of one machine's workers, in a memory-mapped table of the state home."""

    def __init__(self, home: Path):
        path = Path(home) / RATE_FILE
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(self._fd).st_size < SLOTS * SLOT.size:
            os.ftruncate(self._fd, SLOTS * SLOT.size)  # zero-filled: every slot empty
        self._map = mmap.mmap(self._fd, SLOTS * SLOT.size)

    def _slot(self, key: int) -> int:
        """The slot holding ``key``, else the first empty one, else the stalest probed one."""
        home = key % SLOTS
        stalest, stalest_tat = home, float("inf")
        for i in range(PROBES):
            offset = ((home + i) % SLOTS) * SLOT.size
            found, tat = SLOT.unpack_from(self._map, offset)
            if found == key or found == 0:
                return offset
            if tat < stalest_tat:
                stalest, stalest_tat = offset, tat
        return stalest

    def grab(self, actor: str, limit: RateLimit) -> tuple[int, float]:
        """``(tokens granted, seconds to wait)``; the clock is read once the lock is held: read
        before, while another process spent the bucket, it lags that process's ``tat`` by the
        wait, and a lag past the burst looks like a clock gone back (taken as an empty bucket)."""
        key = actor_key(actor)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            offset = self._slot(key)
            found, tat = SLOT.unpack_from(self._map, offset)
            granted, new_tat, wait = grant(tat if found == key else None, limit, time.time())
            if granted or new_tat != tat:
                SLOT.pack_into(self._map, offset, key, new_tat)
            return granted, wait
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


# rate state is disposable: no write-ahead log for it
PG_MIGRATION = "CREATE UNLOGGED TABLE auth_rate (actor TEXT PRIMARY KEY, tat DOUBLE PRECISION NOT NULL);\n"


class PgBuckets:
    """Every server's buckets, a row per bucket (its ``actor`` column holds the bucket's key,
    :func:`bucket_of`) in the shared database (the row lock taken by
    ``FOR UPDATE`` serialises two servers refilling one actor's lease; refills are rare, as a
    worker spends a lease of tokens between them)."""

    def __init__(self, db):
        self.db = db

    def grab(self, actor: str, limit: RateLimit) -> tuple[int, float]:
        """As :meth:`FileBuckets.grab`, on the database's clock, read once the row is locked:
        the one clock every server sharing the bucket reads."""
        with self.db.transaction() as conn:
            # a new actor's bucket is full (tat in the past); the row exists before it is locked
            conn.execute("INSERT INTO auth_rate (actor, tat) VALUES (?, 0) ON CONFLICT (actor) "
                         "DO NOTHING", (actor,))
            tat = conn.execute("SELECT tat FROM auth_rate WHERE actor = ? FOR UPDATE",
                               (actor,)).fetchone()[0]
            now = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0]
            granted, new_tat, wait = grant(tat, limit, float(now))
            if granted or new_tat != tat:
                conn.execute("UPDATE auth_rate SET tat = ? WHERE actor = ?", (new_tat, actor))
        return granted, wait
