"""What the client costs on top of the API: import time, per-call overhead against a bare
http.client request to the same daemon, and the CLI's start-up. Figures from a shared
2-core machine; compare the ratios, which are measured in the same run.

    python bench/client.py
"""

from __future__ import annotations

import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.client.conftest import Daemon  # noqa: E402


def wall(cmd: list[str], env: dict, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def import_cost(module: str, env: dict, n: int) -> float:
    """Median cumulative import time of ``module`` from ``-X importtime`` (ms): unlike wall
    time, not drowned by interpreter start-up on a loaded machine."""
    costs = []
    for _ in range(n):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                             env=env, cwd=ROOT, capture_output=True, text=True, check=True).stderr
        line = next(l for l in err.splitlines() if l.rstrip().endswith(f"| {module}"))
        costs.append(int(line.split("|")[1]) / 1000)
    return statistics.median(costs)


def per_call(fn, n: int) -> tuple[float, float]:
    for _ in range(20):
        fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2] * 1000, times[int(len(times) * 0.95)] * 1000


def main() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bare = wall([sys.executable, "-c", "pass"], env, 15)
    client_import = wall([sys.executable, "-c", "import neuralmind.client"], env, 15)
    print(f"python start-up            {bare:7.1f} ms")
    print(f"+ import neuralmind.client {client_import:7.1f} ms  (+{client_import - bare:.1f} ms wall)")
    cost = import_cost("neuralmind.client", env, 15)
    print(f"import neuralmind.client   {cost:7.1f} ms  (-X importtime, cumulative, median of 15)")

    with tempfile.TemporaryDirectory() as tmp:
        d = Daemon(Path(tmp), plugins=["auth"]).start()
        try:
            from neuralmind.client import NeuralMindClient
            nm = NeuralMindClient(home=d.home)
            repo = Path(tmp) / "repo"
            repo.mkdir()
            pid = nm.projects.add(repo).id
            headers = {"Authorization": f"Bearer {d.token}", "Host": f"127.0.0.1:{d.port}"}

            def raw():
                conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
                conn.request("GET", f"/v1/projects/{pid}", headers=headers)
                conn.getresponse().read()
                conn.close()

            raw_p50, raw_p95 = per_call(raw, 500)
            cli_p50, cli_p95 = per_call(lambda: nm.projects.get(pid), 500)
            print(f"GET /v1/projects/{{id}}   raw http.client p50 {raw_p50:.2f} ms p95 {raw_p95:.2f} ms")
            print(f"                         client          p50 {cli_p50:.2f} ms p95 {cli_p95:.2f} ms"
                  f"  ({cli_p50 / raw_p50:.2f}x raw)")
            cli_env = {**d.env}
            cli = wall([sys.executable, "-m", "neuralmind.cli", "project", "list", "--json"], cli_env, 7)
            print(f"`neuralmind project list` {cli:7.1f} ms wall (start-up + plugins' commands + 1 call)")
        finally:
            d.stop()
    print(f"summary: import {cost:.0f} ms; client call {cli_p50 / raw_p50:.2f}x a bare "
          f"http.client GET (p50 {cli_p50:.2f} vs {raw_p50:.2f} ms); CLI call {cli:.0f} ms")


if __name__ == "__main__":
    main()
