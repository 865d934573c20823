"""Shared pieces of the auth tests: the CLI as a user runs it (its ``main``, in this process),
server-mode configs, tokens, and the kernel's event table read beside the server."""

from __future__ import annotations

import http.client
import json
import subprocess
from pathlib import Path

from tests.support import kernel_database, run_cli


def cli(home: Path, *args: str, config: Path | None = None, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``neuralmind ARGS [--config CONFIG]`` with the auth plugin in ``home``."""
    argv = [*args, *(["--config", str(config)] if config is not None else [])]
    code, out, err = run_cli(*argv, env={"NEURALMIND_HOME": str(home),
                                         "NEURALMIND_PLUGINS": "auth", **(env or {})})
    done = subprocess.CompletedProcess(["neuralmind", *argv], code, out, err)
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
    with kernel_database(home) as db:
        rows = db.conn.execute("SELECT * FROM events WHERE kind = ? ORDER BY id",
                               (kind,)).fetchall()
    return [{**dict(r), "data": json.loads(r["data"])} for r in rows]


def replay_events(port: int, token: str, seconds: float = 5.0) -> list[dict]:
    """Every event the token may see, replayed from the start of the log (Last-Event-ID 0):
    read until the first heartbeat, which the server sends once it has nothing more."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=seconds)
    conn.request("GET", "/v1/events", headers={"Host": f"127.0.0.1:{port}", "Last-Event-ID": "0",
                                               "Authorization": f"Bearer {token}"})
    r = conn.getresponse()
    assert r.status == 200
    seen = []
    try:
        for raw in r:
            if raw.startswith(b"data: "):
                seen.append(json.loads(raw[6:]))
            elif raw.startswith(b": keepalive"):
                break
    finally:
        r.close()
        conn.close()
    return seen
