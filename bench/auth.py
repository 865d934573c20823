"""Cost of authentication: requests/s of an authenticated GET vs the same route with auth
disabled, measured in one run with wrk against real gunicorn (2 workers × 4 threads); it needs
wrk (apt-get install wrk) and says so, exiting 2, without it.

    python bench/auth.py [--seconds 3] [--rounds 6]      # BENCH_THREADS=1 for sync-like workers

Four servers take turns on ``GET /v1/projects/a`` (rotating order each round):
  open      — no auth plugin; a bench-only plugin hands every request an admin actor
  token     — server mode: token lookup (sha256, cached per token) + the shared rate limiter
  token0    — server mode with rate limiting off (rate 0): the limiter's share of the cost
  loopback  — loopback mode: constant-time compare with the token file (no rate limit)
Reported per mode: wrk req/s (median and best round), server CPU µs per request (from /proc,
the figure least moved by other load), and µs per request through the WSGI app in-process
(best of interleaved batches). The machine is shared with other work: compare ratios.
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

from bench.common import need_wrk, positive_int  # noqa: E402
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


def write_config(path: Path, mode: str, home: Path, port: int) -> None:
    server_mode = mode.startswith("token")
    rate = 0 if mode == "token0" else 1000000
    threads = os.environ.get("BENCH_THREADS", 4)
    path.write_text(
        f"[kernel]\nplugins = [\"auth\"]\nhome = \"{home}\"\n"
        f"[server]\nport = {port}\nworkers = 2\nthreads = {threads}\n"
        f"allow_remote = {str(server_mode).lower()}\n"
        f"[auth.rate_limits]\ndefault = {{ rate = {rate}, burst = 1000000 }}\n"
        f"[[projects]]\nid = \"a\"\npath = \"{path.parent / 'repo'}\"\n")


def start(mode: str, root: Path, port: int) -> subprocess.Popen:
    config = root / f"{mode}.toml"
    write_config(config, mode, root / f"home-{mode}", port)
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
    config = root / f"{mode}.toml"  # its [kernel] home names the server's state home
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


def in_process(root: Path, batches: int = 15, calls: int = 400) -> tuple[dict, dict]:
    """µs per request through the WSGI app in this process (no sockets): the best of many
    interleaved batches, the figure least moved by other load on the machine."""
    import io

    from kernel.app import Kernel
    from kernel.config import load_settings
    from plugins.auth.tokens import TokenFile, tokens_path
    apps, kernels = {}, {}
    for mode in ("open", "token", "token0", "loopback"):
        config = root / f"inproc-{mode}.toml"
        write_config(config, mode, root / f"inproc-home-{mode}", port=0)
        settings = load_settings(config, embeddings={"warm": False})
        if mode == "open":
            kernel = Kernel(settings, plugins=[], extra_plugins=[OpenDoor()], load_entrypoints=False)
            token = "unused"
        else:
            kernel = Kernel(settings, plugins=["auth"], load_entrypoints=False)
            token = (TokenFile(tokens_path(settings)).create("bench", "reader", "*")[0]
                     if mode != "loopback" else (settings.home / "token").read_text().strip())
        apps[mode] = (kernel.app, token)
        kernels[mode] = kernel

    def status(line, headers, exc_info=None):
        status.line = line

    best = {m: float("inf") for m in apps}
    hooks: dict[str, float] = {}
    for _ in range(batches):
        for mode, (app, token) in apps.items():
            env = {"REQUEST_METHOD": "GET", "PATH_INFO": ROUTE, "QUERY_STRING": "",
                   "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "HTTP_HOST": "127.0.0.1",
                   "HTTP_AUTHORIZATION": f"Bearer {token}", "wsgi.url_scheme": "http",
                   "wsgi.errors": sys.stderr, "SERVER_PROTOCOL": "HTTP/1.1"}
            t0 = time.perf_counter()
            for _ in range(calls):
                b"".join(app({**env, "wsgi.input": io.BytesIO()}, status))
            best[mode] = min(best[mode], (time.perf_counter() - t0) / calls * 1e6)
            assert status.line.startswith("200"), (mode, status.line)
            hooks[mode] = min(hooks.get(mode, float("inf")), hook_cost(kernels[mode], env, calls))
    return best, hooks


def hook_cost(kernel, env: dict, calls: int) -> float:
    """µs for what auth adds to a request: resolving the actor (token, rate limit) and the
    two permission checks the route makes (projects.read, projects.paths)."""
    import io

    import falcon
    req = falcon.Request({**env, "wsgi.input": io.BytesIO()})
    project = kernel.projects.get("a")
    hook = kernel.pm.hook
    t0 = time.perf_counter()
    for _ in range(calls):
        actor = hook.actor_from_request(kernel=kernel, request=req, again=False)
        kernel.allowed(actor, "projects.read", project)
        kernel.allowed(actor, "projects.paths", project)
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve")
    parser.add_argument("--seconds", type=positive_int, default=3)
    parser.add_argument("--rounds", type=positive_int, default=6)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    need_wrk("auth.py", "its req/s figures (the target is wrk's req/s, auth on ÷ off)")
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
        inproc, hooks = in_process(root)
    rps = {m: statistics.median(r[0] for r in results[m]) for m in modes}
    best = {m: max(r[0] for r in results[m]) for m in modes}
    cpu = {m: statistics.median(r[1] for r in results[m]) for m in modes}
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (2 cores, shared with other work)")
    for mode in modes:
        runs = ", ".join(f"{r:.0f}" for r, _, _ in results[mode])
        print(f"{mode:9} wrk {rps[mode]:6.0f} req/s median, {best[mode]:6.0f} best  "
              f"{cpu[mode]:5.0f} µs server CPU/req  p99 {results[mode][-1][2]:>8}  "
              f"in-process {inproc[mode]:6.1f} µs/req, auth hooks {hooks[mode]:5.1f} µs  (rounds: {runs})")
    ratio = {m: statistics.median(results[m][i][0] / results["open"][i][0]
                                  for i in range(args.rounds)) for m in modes}
    for mode in modes[1:]:
        print(f"{mode:9} vs open: req/s median-of-rounds {ratio[mode]:.2f}, best {best[mode] / best['open']:.2f}"
              f", CPU {cpu['open'] / cpu[mode]:.2f}, in-process {inproc['open'] / inproc[mode]:.2f}"
              "  (target ≥ 0.9)")
    added = {m: hooks[m] - hooks["open"] for m in modes}
    print(f"auth adds {added['token']:.1f} µs/request (token + limiter), {added['token0']:.1f} "
          f"(token, no limiter), {added['loopback']:.1f} (loopback) to a route costing "
          f"{inproc['open']:.0f} µs in-process → {inproc['open'] / (inproc['open'] + added['token']):.2f}×"
          f" / {inproc['open'] / (inproc['open'] + added['loopback']):.2f}×")
    print(f"SUMMARY auth GET {ROUTE} vs auth disabled: token + rate limit adds "
          f"{added['token']:.1f} µs/req → {inproc['open'] / (inproc['open'] + added['token']):.2f}× "
          f"in-process, {cpu['open'] / cpu['token']:.2f}× by server CPU/req, wrk req/s "
          f"{ratio['token']:.2f}× median-of-rounds (load avg {os.getloadavg()[0]:.0f} on 2 cores: "
          f"req/s is noisy); loopback adds {added['loopback']:.1f} µs/req")

if __name__ == "__main__":
    main()
