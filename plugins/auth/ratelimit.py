"""Per-actor rate limits shared by every gunicorn worker: one SQLite row per actor.

The bucket is kept as GCRA's "theoretical arrival time" (``tat``), which is a token bucket
(``rate`` per second, ``burst`` at once) stored as one number, so a request costs a single
UPSERT: it moves ``tat`` forward when the request fits and returns nothing when it does not.
"""

from __future__ import annotations

import time
from pathlib import Path

from kernel.errors import RateLimited
from plugins.auth.roles import RateLimit

RATE_DB = "ratelimit.db"

MIGRATIONS = ["CREATE TABLE IF NOT EXISTS buckets (actor TEXT PRIMARY KEY, tat REAL NOT NULL) "
              "WITHOUT ROWID;"]

# A tat further ahead than the burst allows can only come from the clock going backwards:
# restart that actor's bucket instead of refusing them until the clock catches up.
TAKE = """
INSERT INTO buckets (actor, tat) VALUES (:actor, :now + :interval)
ON CONFLICT (actor) DO UPDATE SET
    tat = CASE WHEN tat - :now > :tolerance THEN :now ELSE max(tat, :now) END + :interval
WHERE max(tat, :now) + :interval - :now <= :tolerance OR tat - :now > :tolerance
RETURNING tat
"""


class RateLimiter:
    def __init__(self, kernel, path: Path | None = None):
        self.db = kernel.open_database(path or kernel.home / RATE_DB, MIGRATIONS)

    def take(self, actor: str, limit: RateLimit) -> None:
        """Let one request of ``actor`` through, or raise 429 with the wait in Retry-After."""
        if limit.rate <= 0:
            return
        interval = 1.0 / limit.rate
        params = {"actor": actor, "now": time.time(), "interval": interval,
                  "tolerance": limit.burst * interval}
        conn = self.db.conn
        if conn.execute(TAKE, params).fetchall():  # fetchall: the statement ends, the lock goes
            return
        row = conn.execute("SELECT tat FROM buckets WHERE actor = ?", (actor,)).fetchone()
        wait = row["tat"] + interval - params["tolerance"] - params["now"] if row else interval
        raise RateLimited(wait, details={"retry_after": max(1, int(wait + 0.999)),
                                         "rate": limit.rate, "burst": limit.burst})
