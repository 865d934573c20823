"""Memory-create throughput with the tier2 audit plugin on vs off, same run.

    python bench/audit.py [--seconds 4] [--rounds 5] [--connections 8] [--workers 2]

Two real servers (`neuralmind serve`, gunicorn gthread) with the same plugins but for
``tier2_bridge``; each gets a project, then wrk POSTs ``/v1/projects/{id}/memories`` against
them in alternating rounds (off, on, off, on …) so drift on this shared 2-core machine hits
both alike. With the plugin on, every create appends two audit records (``memory.created``
and the auth plugin's ``api.call``), each in its own ``BEGIN IMMEDIATE`` transaction.
Target: on ≥ 0.9× off. It needs wrk (apt-get install wrk) and says so, exiting 2, without it.
The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import need_wrk, positive_int  # noqa: E402
from tests.embeddings import fake_embedder  # noqa: E402
from tests.support import Server  # noqa: E402

# a distinct title per create: the memory plugin's duplicate hints search the title, and
# thousands of identical titles would measure that search, not the audit
SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
local n = 0
request = function()
  n = n + 1
  local word = string.format("w%%d%%d", math.random(1, 1000000000), n)
  local body = '{"title": "Decision ' .. word .. '", "tags": ["audit"], "rationale": "%s"}'
  return wrk.format(nil, nil, nil, body)
end
"""
RATIONALE = "One append-only file per home, hash-chained. " * 10
# the fake embedder keeps the memory plugin's background backfill off the ONNX model, whose
# CPU bursts would swamp the difference being measured
BASE = ["auth", "memory", "fake_embedder"]


def wrk(url: str, token: str, seconds: int, conns: int) -> tuple[float, int]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(SCRIPT % (token, RATIONALE))
    try:
        out = subprocess.run(["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "-s", script.name, url],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(script.name)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rate, int(non2xx.group(1)) if non2xx else 0


def count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def copier_rates(kernel_home: Path, scratch: Path) -> tuple[int, float, float]:
    """The copier alone, in this process, over the 'on' server's real events: records/s
    appended in its batches of up to 500, and one transaction per event (its worst case, when
    every event wakes it on its own)."""
    from kernel.events import EventLog
    from kernel.storage import Database
    from plugins.tier2_bridge.audit import MIGRATIONS, AuditTrail
    from plugins.tier2_bridge.storage import LazyDatabase
    events = EventLog(Database(kernel_home / "kernel.db"), lambda event: None)
    total = events.last_id()
    batched = AuditTrail(LazyDatabase(scratch / "batched.db", MIGRATIONS, Database), events)
    start = time.perf_counter()
    batched.sync()
    batch_s = time.perf_counter() - start
    single = AuditTrail(LazyDatabase(scratch / "single.db", MIGRATIONS, Database), events)
    start = time.perf_counter()
    for upto in range(1, total + 1):
        single.copy_until(upto)
    return total, total / batch_s, total / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=positive_int, default=4)
    ap.add_argument("--rounds", type=positive_int, default=5)
    ap.add_argument("--connections", type=positive_int, default=8)
    ap.add_argument("--workers", type=positive_int, default=2)
    args = ap.parse_args()
    need_wrk("audit.py", "its creates/s under load (audit on ÷ off)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        servers = {}
        for name, plugins in (("off", BASE), ("on", [*BASE, "tier2_bridge"])):
            repo = root / f"repo-{name}"
            repo.mkdir()
            server = Server(root / f"home-{name}", plugins=plugins, workers=args.workers,
                            env={**fake_embedder.server_env(root),
                                 "NEURALMIND_LICENSE_PATH": str(root / "none.json")}).start()
            servers[name] = (server, server.register(repo))
        try:
            rates: dict[str, list[float]] = {"off": [], "on": []}
            for i in range(args.rounds):
                for name in ("off", "on"):
                    server, pid = servers[name]
                    url = f"http://127.0.0.1:{server.port}/v1/projects/{pid}/memories"
                    rate, failed = wrk(url, server.token, args.seconds, args.connections)
                    if failed:
                        raise SystemExit(f"{failed} failed creates on the {name} server")
                    rates[name].append(rate)
                    print(f"round {i + 1} audit {name:3}: {rate:8.1f} creates/s")
        finally:
            for server, _ in servers.values():
                server.stop()  # the workers' shutdown copies what the copier had not yet
        on_home = servers["on"][0].home
        audited = count(on_home / "audit.db", "SELECT COUNT(*) FROM audit")
        events = count(on_home / "kernel.db", "SELECT COUNT(*) FROM events")
        copied, batched, single = copier_rates(on_home, root)
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    # each round's on/off pair ran back to back, so their ratio cancels the drift between
    # rounds (the memory tables grow, other work on the machine comes and goes)
    paired = statistics.median(b / a for a, b in zip(rates["off"], rates["on"]))
    print(f"median creates/s: off {off:.1f}, on {on:.1f} ({on / off:.2f}×); median per-round "
          f"ratio {paired:.2f}×; audit records {audited} of {events} kernel events")
    print(f"copier alone over those {copied} events: {batched:,.0f} records/s in batches, "
          f"{single:,.0f} records/s one transaction per event ({1e3 / single:.2f} ms each)")
    print(f"workers {args.workers}, {args.connections} connections, {args.rounds} × "
          f"{args.seconds} s rounds, shared 2-core machine")
    verdict = "meets" if paired >= 0.9 else "MISSES"
    print(f"SUMMARY audit on/off memory-create throughput {paired:.2f}× (per-round median; "
          f"{on:.0f} vs {off:.0f}/s) — {verdict} the ≥ 0.9× target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
