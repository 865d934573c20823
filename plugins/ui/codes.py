"""One-time sign-in codes (loopback mode): ``neuralmind ui`` asks for one with the local token
and opens the browser at ``/ui#code=…``; the page trades it for that token once.

A code is 256 random bits, stored as its sha256 beside the token it stands for, in
``ui.db`` in the state home (0700), so every worker can redeem it; it lives at most
``sign_in_code_ttl_s`` seconds and is deleted when used (one transaction: used once even
when two workers are asked at the same moment)."""

from __future__ import annotations

import hashlib
import secrets
import time

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS sign_in_codes (
    code_hash TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires REAL NOT NULL
);
"""]


def _hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class Codes:
    def __init__(self, db, ttl_s: float):
        self.db, self.ttl_s = db, ttl_s

    def issue(self, token: str) -> tuple[str, float]:
        """A new code for ``token`` and when it expires (epoch seconds)."""
        code = secrets.token_urlsafe(32)
        expires = time.time() + self.ttl_s
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM sign_in_codes WHERE expires < ?", (time.time(),))
            conn.execute("INSERT INTO sign_in_codes VALUES (?, ?, ?)", (_hash(code), token, expires))
        return code, expires

    def redeem(self, code: str) -> str | None:
        """The token ``code`` stands for, once; None for a code unknown, used or expired."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM sign_in_codes WHERE expires < ?", (time.time(),))
            rows = conn.execute("DELETE FROM sign_in_codes WHERE code_hash = ? RETURNING token",
                                (_hash(code),)).fetchall()
        return rows[0][0] if rows else None

    def close(self) -> None:
        self.db.close()
