"""The shared rate limiter across real processes, and origin checking as a property."""

from __future__ import annotations

import fcntl
import multiprocessing
import threading
import time
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.config import ConfigError
from kernel.errors import RateLimited
from plugins.auth.cors import check_origin
from plugins.auth.ratelimit import (RATE_FILE, SLOT, FileBuckets, PgBuckets, RateLimiter,
                                    actor_key, grant, lease_size)
from plugins.auth.schema import PG_MIGRATIONS
from tests.support import fresh_pg_dsn
from plugins.auth.roles import RateLimit


def buckets_of(where):
    """The shared buckets: a home's file, or a PostgreSQL database (a DSN) — opened here, so a
    forked process makes its own connection."""
    if isinstance(where, str):
        from kernel.pg import PgBackend
        return PgBuckets(PgBackend(where, 2).database("auth", PG_MIGRATIONS))
    return FileBuckets(where)


@pytest.fixture(params=["file", "postgres"])
def where(request, tmp_path):
    return fresh_pg_dsn() if request.param == "postgres" else tmp_path


def _spend(where, actor: str, attempts: int, queue) -> None:
    limiter, granted = RateLimiter(buckets_of(where)), 0
    for _ in range(attempts):
        try:
            limiter.take(actor, RateLimit(rate=0.01, burst=40))
            granted += 1
        except RateLimited:
            pass
    queue.put(granted)


def test_processes_share_one_bucket(where):
    buckets_of(where)  # the table exists before the processes race to use it
    queue = multiprocessing.get_context("fork").Queue()
    procs = [multiprocessing.get_context("fork").Process(target=_spend, args=(where, "amy", 30, queue))
             for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert sum(queue.get() for _ in procs) == 40  # the burst, not 40 per process


def _blocked(where) -> bool:
    """Whether a process waits on the buckets' lock: a row lock, or a flock."""
    if isinstance(where, str):
        from kernel.pg import PgBackend
        backend = PgBackend(where, 1)
        try:
            return backend.database("auth", None).conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ).fetchone()[0] > 0
        finally:
            backend.close()
    return any("->" in line and "FLOCK" in line for line in open("/proc/locks"))


def test_a_bucket_spent_while_a_refill_waits_for_its_lock_stays_spent(where):
    """Another process holds the bucket's lock and spends the whole burst; a refill waiting
    on that lock must then find it spent. (Its clock, read before the wait, lagged the
    other's tat past the burst, looked like a clock gone back and refilled the bucket: three
    processes once got 79 requests of a burst of 40.)"""
    limit, actor = RateLimit(rate=0.01, burst=40), "ida"
    RateLimiter(buckets_of(where)).take(actor, limit)  # the bucket exists, nearly full
    other, outcome = buckets_of(where), []

    def refill():
        try:
            RateLimiter(buckets_of(where)).take(actor, limit)
            outcome.append("granted")
        except RateLimited as ex:
            outcome.append(ex.details["retry_after"])

    spent_at = time.time() + limit.burst / limit.rate  # the tat of an empty bucket
    waiter = threading.Thread(target=refill)
    if isinstance(where, str):
        with other.db.transaction() as conn:
            conn.execute("SELECT tat FROM auth_rate WHERE actor = ? FOR UPDATE", (actor,))
            waiter.start()
            deadline = time.monotonic() + 20
            while not _blocked(where) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
            conn.execute("UPDATE auth_rate SET tat = ? WHERE actor = ?", (spent_at + 0.2, actor))
    else:
        fcntl.flock(other._fd, fcntl.LOCK_EX)
        waiter.start()
        deadline = time.monotonic() + 20
        while not _blocked(where) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        SLOT.pack_into(other._map, other._slot(actor_key(actor)), actor_key(actor),
                       spent_at + 0.2)
        fcntl.flock(other._fd, fcntl.LOCK_UN)
    waiter.join(30)
    assert outcome == [100]  # one token's interval, not a new burst


def test_retry_after_says_when_the_next_request_fits(where):
    limiter = RateLimiter(buckets_of(where))
    limit = RateLimit(rate=0.25, burst=2)
    limiter.take("bo", limit)
    limiter.take("bo", limit)
    with pytest.raises(RateLimited) as denied:
        limiter.take("bo", limit)
    assert denied.value.headers["Retry-After"] == "4"
    assert denied.value.details == {"retry_after": 4, "rate": 0.25, "burst": 2}
    limiter.take("cy", limit)  # another actor has its own bucket


def test_rate_zero_turns_limiting_off(tmp_path):
    limiter = RateLimiter(FileBuckets(tmp_path))
    for _ in range(1000):  # a burst of 1: limited, the second would be 429
        limiter.take("dee", RateLimit(rate=0, burst=1))
    assert not any((tmp_path / RATE_FILE).read_bytes())  # no bucket written, nothing spent
    limit = RateLimit(rate=0.01, burst=2)
    limiter.take("dee", limit)
    limiter.take("dee", limit)  # the actor's whole burst is still there …
    with pytest.raises(RateLimited):  # … and a limit with a rate does limit
        limiter.take("dee", limit)


def test_leases_are_small_for_small_limits():
    assert lease_size(RateLimit(rate=20, burst=100)) == 2
    assert lease_size(RateLimit(rate=0.5, burst=3)) == 1
    assert lease_size(RateLimit(rate=1e6, burst=10**6)) == 64


hosts = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,10}){0,3}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(scheme=st.sampled_from(["http", "https"]), host=hosts,
       port=st.none() | st.integers(1, 65535), tail=st.sampled_from(["", "/", "/x", "?q", "#f"]))
def test_accepted_origins_are_exactly_scheme_host_port(scheme, host, port, tail):
    origin = f"{scheme}://{host}" + (f":{port}" if port else "") + tail
    try:
        checked = check_origin(origin)
    except ConfigError:
        assert tail not in ("", "/")
        return
    assert tail in ("", "/")
    parts = urlsplit(checked)
    assert (parts.scheme, parts.hostname, parts.port) == (scheme, host, port)
    assert checked == f"{scheme}://{host}" + (f":{port}" if port else "")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_is_an_origin_or_a_config_error(text):
    try:
        checked = check_origin(text)
    except ConfigError:
        return
    assert "*" not in checked and "@" not in checked and checked.count("/") == 2


def test_a_broken_tokens_file_fails_closed(tmp_path):
    from plugins.auth.tokens import TokenFile
    tokens = TokenFile(tmp_path / "tokens.json")
    token, digest, _ = tokens.create("eve", "reader", "*")
    assert tokens.lookup(token)[0] == digest
    (tmp_path / "tokens.json").write_text('{"tokens": {"%s": {"actor": "eve", "bogus": 1}}}' % digest)
    assert tokens.lookup(token) is None


def test_a_bucket_further_ahead_than_its_burst_is_empty_never_refilled():
    """A tat further ahead than the burst allows (the clock went back, the role's limit was
    lowered, another role's requests once shared the bucket) is an empty bucket: the next
    request waits one interval. (It was taken as a new bucket, its whole burst granted.)"""
    limit, now = RateLimit(rate=0.2, burst=2), 1_000_000.0
    assert grant(now + 3600, limit, now) == (0, now + 10, 5.0)  # stored so: the wait ends
    assert grant(now + 10, limit, now + 5) == (1, now + 15, 0.0)
    assert grant(None, limit, now) == (1, now + 5, 0.0)  # a new bucket is full


def test_a_bucket_far_ahead_is_waited_out_in_one_interval(tmp_path):
    """The emptied bucket is stored, so its wait ends (an interval, not the hour ahead)."""
    buckets, key = FileBuckets(tmp_path), "ann\nslow"
    limit = RateLimit(rate=0.2, burst=2)
    offset = buckets._slot(actor_key(key))
    SLOT.pack_into(buckets._map, offset, actor_key(key), time.time() + 3600)
    granted, wait = buckets.grab(key, limit)
    assert granted == 0 and 4.9 < wait <= 5.0
    assert SLOT.unpack_from(buckets._map, offset)[1] < time.time() + 10.1


def test_an_actors_buckets_and_leases_are_per_role(where):
    """One actor, two roles: a large limit's lease (many tokens a worker spends alone) is
    never spent by a request of the small role, and the small role's bucket is its own."""
    limiter = RateLimiter(buckets_of(where))
    large, small = RateLimit(rate=1000, burst=1000), RateLimit(rate=0.01, burst=1)
    limiter.take("max", large, role="builder")  # leases 62 tokens to this process
    limiter.take("max", small, role="slow")
    with pytest.raises(RateLimited):
        limiter.take("max", small, role="slow")
    for _ in range(10):
        limiter.take("max", large, role="builder")
