"""Shared pieces of the auth tests: the CLI as a user runs it, server-mode configs, tokens,
and the kernel's event table read straight from its SQLite file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT



def cli(home: Path, *args: str, config: Path | None = None, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "neuralmind.cli", *args]
    if config is not None:
        cmd += ["--config", str(config)]
    full_env = {**os.environ, "NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth",
                **(env or {})}
    full_env.pop("NEURALMIND_CONFIG", None)
    done = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def create_token(home: Path, config: Path, actor: str, role: str, projects: str = "*",
                 *extra: str) -> dict:
    done = cli(home, "token", "create", "--actor", actor, "--role", role, "--projects", projects,
               "--json", *extra, config=config)
    return json.loads(done.stdout)


def server_config(root: Path, projects: dict[str, Path], extra: str = "") -> str:
    lines = ["[server]", "allow_remote = true", 'public_hosts = ["nm.internal"]',
             "[auth.rate_limits]", "default = { rate = 10000, burst = 10000 }", extra]
    for pid, path in projects.items():
        path.mkdir(parents=True, exist_ok=True)
        lines += ["[[projects]]", f'id = "{pid}"', f'path = "{path}"']
    return "\n".join(lines) + "\n"


def events(home: Path, kind: str) -> list[dict]:
    conn = sqlite3.connect(home / "kernel.db")
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT * FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    finally:
        conn.close()
    return [{**dict(r), "data": json.loads(r["data"])} for r in rows]
