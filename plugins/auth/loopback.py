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

from neuralmind import read_discovery, write_discovery, write_private

TOKEN_FILE = "token"


def token_path(home: Path) -> Path:
    return Path(home) / TOKEN_FILE


def new_token() -> str:
    return "nm_" + secrets.token_urlsafe(32)


def provide_token(home: Path) -> tuple[str, bool]:
    """The token, made on first use, and whether this call wrote it in place of one that was
    lost: an emptied file, or a missing one while the running daemon's discovery file holds a
    token (a first start's file is missing too, with no token there). The file appears whole or
    not at all (written aside, then hard-linked into place), so a worker starting beside
    another never reads it empty; a token this call wrote reaches the discovery file, where the
    CLI and clients read it."""
    path = token_path(home)
    try:
        token = path.read_text().strip()
        if token:
            return token, False
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
        return path.read_text().strip(), False
    finally:
        tmp.unlink(missing_ok=True)
    return token, publish(home, token) or emptied


def ensure_token(home: Path) -> str:
    """The token, made on first use (:func:`provide_token`)."""
    return provide_token(home)[0]


def rotate(home: Path) -> str:
    """A new token in place of the old one, in the file and the discovery file."""
    token = new_token()
    write_private(token_path(home), token + "\n")
    publish(home, token)
    return token


def publish(home: Path, token: str) -> bool:
    """Put ``token`` in the running daemon's discovery file in place of the one it holds (the
    CLI and clients send the token they find there); False when it holds none to replace — no
    daemon runs, or its worker has yet to write it — or this one already."""
    info = read_discovery(home)
    if info is None or info.get("token") in (None, token):
        return False
    info["token"] = token
    write_discovery(home, info)
    return True


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
