"""Shared pieces of the tier2 tests: the audit CLI as an operator runs it (its ``main``, in
this process), and the audit trail read straight from its SQLite file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.plugins.auth.helpers import cli
from tests.support import run_cli

PLUGINS = ["auth", "tier2_bridge"]
PROJECTS = 48  # the busy server registers this many projects and removes half …
MEMORIES = 96  # … while memories are created in four of the others


def audit_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    """``neuralmind audit …`` with tier2_bridge enabled, as an operator would run it."""
    return cli(home, "audit", *args, check=False, env={"NEURALMIND_PLUGINS": ",".join(PLUGINS)})


def in_process(*argv: str) -> tuple[int, str, str]:
    """``neuralmind …`` with tier2_bridge enabled, through the CLI's ``main`` in this process."""
    return run_cli(*argv, env={"NEURALMIND_PLUGINS": ",".join(PLUGINS)})


def verify(home: Path, *args: str) -> tuple[int, dict]:
    code, out, _ = in_process("audit", "verify", "--home", str(home), "--json", *args)
    return code, json.loads(out) if out.strip() else {}


def rows(db: Path, sql: str) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def audit_rows(home: Path) -> list[dict]:
    return rows(home / "audit.db", "SELECT * FROM audit ORDER BY seq")


def settled(home: Path, timeout: float = 15) -> list[dict]:
    """The audit rows once the copier has caught up with the kernel's event log."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = audit_rows(home)
        except sqlite3.OperationalError:  # not made yet: the copier opens it on first use
            found = []
        if len(found) == len(kernel_events(home)) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def kernel_events(home: Path) -> list[dict]:
    return rows(home / "kernel.db", "SELECT * FROM events ORDER BY id")


def copy_db(src: Path, dst: Path) -> None:
    """A consistent copy of a live WAL database (the backup API, not a file copy)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    source, target = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
