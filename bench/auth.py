"""Cost of authentication: requests/s of an authenticated GET vs the same route with auth
disabled, measured in one run with wrk against real gunicorn (2 workers × 4 threads).

    python bench/auth.py [--seconds 8] [--rounds 2]

Three servers take turns on ``GET /v1/projects/a``:
  open      — no auth plugin; a bench-only plugin hands every request an admin actor
  token     — server mode: sha256 token lookup + the shared rate limiter (mmap + flock)
  loopback  — loopback mode: constant-time compare with the token file (no rate limit)
Each round runs the three back to back in a rotating order; the ratios are the medians of the
per-round ratios, because the machine is shared with other work and its load drifts.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernel.auth import Actor  # noqa: E402
from kernel.plugins import hookimpl  # noqa: E402

ROUTE = "/v1/projects/a"


class OpenDoor:
    """Auth disabled: every request is an admin, nothing is checked or counted."""

    @hookimpl
    def actor_from_request(self, kernel, request):
        return Actor("bench", role="admin", kind="open")

    @hookimpl
    def permission_allowed(self, kernel, actor, permission, project):
        return True


def serve(mode: str) -> None:
    """Run in the child: gunicorn for ``mode`` with the config in $NEURALMIND_CONFIG."""
    from kernel.app import Kernel
    from kernel.config import load_settings
    from kernel.serving import Server, gunicorn_options

    class BenchServer(Server):
        def load(self):
            if mode != "open":
                return super().load()
            return Kernel(load_settings(), plugins=[], extra_plugins=[OpenDoor()]).app

    Server = BenchServer  # noqa: N806
    Server(gunicorn_options(load_settings())).run()


def start(mode: str, root: Path, port: int) -> subprocess.Popen:
    home = root / f"home-{mode}"
    config = root / f"{mode}.toml"
    server_mode = mode.startswith("token")
    rate = 0 if mode == "token0" else 1000000
    config.write_text(
        f"[kernel]\nplugins = [\"auth\"]\nhome = \"{home}\"\n"
        f"[server]\nport = {port}\nworkers = 2\nthreads = {os.environ.get('BENCH_THREADS', 4)}\nallow_remote = {str(server_mode).lower()}\n"
        f"[auth.rate_limits]\ndefault = {{ rate = {rate}, burst = 1000000 }}\n"
        f"[[projects]]\nid = \"a\"\npath = \"{root / 'repo'}\"\n")
    env = {**os.environ, "NEURALMIND_CONFIG": str(config),
           "NEURALMIND_EMBEDDINGS_WARM": "0"}
    env.pop("NEURALMIND_PLUGINS", None)
    env.pop("NEURALMIND_HOME", None)
    proc = subprocess.Popen([sys.executable, __file__, "--serve", mode], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{mode} server did not start")


def token_for(mode: str, root: Path) -> str:
    home, config = root / f"home-{mode}", root / f"{mode}.toml"
    env = {**os.environ, "NEURALMIND_PLUGINS": "auth"}
    if mode == "open":
        return "unused"
    args = (["token", "create", "--actor", "bench", "--role", "reader"] if mode != "loopback"
            else ["token", "show"])
    out = subprocess.run([sys.executable, "-m", "neuralmind.cli", *args, "--config", str(config)],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def cpu_seconds(pgid: int) -> float:
    """User + system CPU of every process in the server's process group (master, workers)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, …
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def wrk(port: int, token: str, seconds: int, pgid: int) -> tuple[float, float, str]:
    """``(requests/s, server CPU µs per request, p99)``: the CPU figure holds up on a busy
    machine, where requests/s swings with whatever else runs."""
    cpu0 = cpu_seconds(pgid)
    out = subprocess.run(["wrk", "-t2", "-c16", f"-d{seconds}s", "--latency",
                          "-H", f"Authorization: Bearer {token}",
                          "-H", f"Host: 127.0.0.1:{port}", f"http://127.0.0.1:{port}{ROUTE}"],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"non-2xx responses:\n{out}")
    cpu = cpu_seconds(pgid) - cpu0
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    p99 = re.search(r"\n\s+99%\s+(\S+)", out).group(1)
    return rps, cpu / total * 1e6, p99


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve")
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    from tests.support import free_port
    modes = ("open", "token", "token0", "loopback")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "repo").mkdir()
        ports = {m: free_port() for m in modes}
        procs, tokens = {}, {}
        try:
            for mode in modes:
                procs[mode] = start(mode, root, ports[mode])
                tokens[mode] = token_for(mode, root)
            results: dict[str, list[tuple[float, float, str]]] = {m: [] for m in modes}
            for mode in modes:
                wrk(ports[mode], tokens[mode], 2, procs[mode].pid)  # warm the workers' caches
            for n in range(args.rounds):
                for mode in modes[n % len(modes):] + modes[:n % len(modes)]:
                    results[mode].append(wrk(ports[mode], tokens[mode], args.seconds,
                                             procs[mode].pid))
        finally:
            for proc in procs.values():
                os.killpg(proc.pid, 15)
                proc.wait(20)
    rps = {m: statistics.median(r[0] for r in results[m]) for m in modes}
    cpu = {m: statistics.median(r[1] for r in results[m]) for m in modes}
    for mode in modes:
        runs = ", ".join(f"{r:.0f}/s" for r, _, _ in results[mode])
        print(f"{mode:9} {rps[mode]:6.0f} req/s median  {cpu[mode]:6.0f} µs server CPU/request"
              f"  p99 {results[mode][-1][2]:>8}  (rounds: {runs})")
    ratio = {m: statistics.median(results[m][i][0] / results["open"][i][0]
                                  for i in range(args.rounds)) for m in modes}
    capacity = {m: cpu["open"] / cpu[m] for m in modes}
    for mode in modes[1:]:
        print(f"{mode:9} vs open: req/s ratio {ratio[mode]:.2f} (median of rounds), "
              f"CPU capacity ratio {capacity[mode]:.2f}  (target ≥ 0.9)")
    print(f"SUMMARY auth GET {ROUTE} vs auth disabled: server-mode token + rate limit "
          f"{ratio['token']:.2f}× req/s, {capacity['token']:.2f}× by CPU; loopback "
          f"{ratio['loopback']:.2f}× / {capacity['loopback']:.2f}×  (wrk -t2 -c16, 2 workers × "
          f"{os.environ.get('BENCH_THREADS', 4)} threads, shared 2-core machine)")

if __name__ == "__main__":
    main()
