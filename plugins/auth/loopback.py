"""Loopback mode: one per-user token in ``$NEURALMIND_HOME/token`` (0600 in a 0700 dir).

The file is re-read when it changes, so ``neuralmind token rotate`` takes effect in a
running server at the next request, with no restart.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
import time
from pathlib import Path

from kernel.daemon import write_private

TOKEN_FILE = "token"


def token_path(home: Path) -> Path:
    return Path(home) / TOKEN_FILE


def new_token() -> str:
    return "nm_" + secrets.token_urlsafe(32)


def ensure_token(home: Path) -> str:
    """The token, created on first use."""
    path = token_path(home)
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = new_token()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another worker made it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


def rotate(home: Path) -> str:
    token = new_token()
    write_private(token_path(home), token + "\n")
    return token


class LoopbackToken:
    """Checks a bearer token against the file, in constant time, reloading on change."""

    def __init__(self, home: Path):
        self.path = token_path(home)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._token = b""
        self._checked = float("-inf")

    RECHECK_S = 0.25  # rotation reaches a running server well within a second

    def current(self) -> bytes:
        now = time.monotonic()
        if now - self._checked < self.RECHECK_S:
            return self._token
        self._checked = now
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._token, self._stamp = b"", None
            return b""
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp != self._stamp:
            with self._lock:
                self._token = self.path.read_text().strip().encode()
                self._stamp = stamp
        return self._token

    def check(self, presented: str) -> bool:
        expected = self.current()
        return bool(expected) and hmac.compare_digest(presented.encode(), expected)
