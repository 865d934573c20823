"""Loopback mode: one per-user token in ``$NEURALMIND_HOME/token`` (0600 in a 0700 dir).

The file is re-read when it changes (checked at most every 250 ms), so ``neuralmind token
rotate`` takes effect in a running server within a second, with no restart.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
import time
from pathlib import Path

from neuralmind import write_private

TOKEN_FILE = "token"


def token_path(home: Path) -> Path:
    return Path(home) / TOKEN_FILE


def new_token() -> str:
    return "nm_" + secrets.token_urlsafe(32)


def ensure_token(home: Path) -> str:
    """The token, created on first use. The file appears whole or not at all (written aside,
    then hard-linked into place), so a worker starting beside another never reads it empty."""
    path = token_path(home)
    try:
        token = path.read_text().strip()
        if token:
            return token
        emptied = True  # no write of ours leaves it empty: an editor or a full disk did
    except FileNotFoundError:
        emptied = False
    token = new_token()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    try:
        if emptied:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    except FileExistsError:  # another worker made it first: theirs is the token
        token = path.read_text().strip()
    finally:
        tmp.unlink(missing_ok=True)
    return token


def rotate(home: Path) -> str:
    token = new_token()
    write_private(token_path(home), token + "\n")
    return token


class LoopbackToken:
    """Checks a bearer token against the file, in constant time, reloading on change."""

    RECHECK_S = 0.25  # rotation reaches a running server well within a second

    def __init__(self, home: Path):
        self.path = token_path(home)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._token = b""
        self._checked = float("-inf")

    def current(self) -> bytes:
        if time.monotonic() - self._checked < self.RECHECK_S:
            return self._token
        with self._lock:  # one thread refreshes; the others wait for its answer
            if time.monotonic() - self._checked >= self.RECHECK_S:
                try:
                    st = os.stat(self.path)
                    stamp = (st.st_mtime_ns, st.st_ino, st.st_size)
                    if stamp != self._stamp:
                        self._token = self.path.read_text().strip().encode()
                        self._stamp = stamp
                except FileNotFoundError:
                    self._token, self._stamp = b"", None
                self._checked = time.monotonic()
        return self._token

    def check(self, presented: str) -> bool:
        expected = self.current()
        return bool(expected) and hmac.compare_digest(presented.encode(), expected)
