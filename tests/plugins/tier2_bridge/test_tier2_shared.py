"""tier2 on a shared PostgreSQL database: two servers write, one chain — every kernel event
exactly once, in event order, whole under `neuralmind audit verify`, and append-only."""

from __future__ import annotations

import json
import time

import psycopg
import pytest

from plugins.tier2_bridge.plugin import bridge
from tests.support import LocalServer, fresh_pg_dsn, run_cli


def test_two_servers_one_whole_chain(tmp_path):
    dsn = fresh_pg_dsn()
    config = tmp_path / "config.toml"
    config.write_text(f'[storage]\nbackend = "postgres"\ndsn = "{dsn}"\n')
    servers = [LocalServer(tmp_path / f"home{i}", plugins=["auth", "tier2_bridge"],
                           config=config.read_text()).start() for i in (1, 2)]
    try:
        for i in range(6):
            repo = tmp_path / f"repo{i}"
            repo.mkdir()
            servers[i % 2].register(repo)
        events = servers[0].kernel.events.after(0)
        deadline = time.monotonic() + 15
        while True:
            for server in servers:
                bridge(server.kernel).trail.sync()
            code, out, err = run_cli("audit", "verify", "--config", str(config), "--json",
                                     env={"NEURALMIND_PLUGINS": "auth,tier2_bridge"})
            verdict = json.loads(out)
            if verdict["records"] >= len(events) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert code == 0 and verdict["whole"] and verdict["records"] == len(events), err
        code, out, _ = run_cli("audit", "export", "--config", str(config),
                               env={"NEURALMIND_PLUGINS": "auth,tier2_bridge"})
        rows = [json.loads(line) for line in out.splitlines()]
        assert [r["seq"] for r in rows] == list(range(1, len(events) + 1))
        assert [r["action"] for r in rows] == [e.kind for e in events]
        with psycopg.connect(dsn) as conn, pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("UPDATE audit SET actor = 'mallory' WHERE seq = 1")
    finally:
        for server in servers:
            server.stop()
