"""How fast a team server's workers start: ``python bench/workers.py [--workers 2] [--runs 3]``.

Per run, ``neuralmind serve`` on a fresh home and a free port: seconds until ``/v1/health``
answers, the CPU the master and each worker spent by then, and the seconds until a worker
killed with SIGKILL has a replacement whose CPU is counted the same way. The baseline, in the
same run: the CPU of a fresh interpreter importing ``kernel.wsgi`` (a worker's start-up when
nothing is loaded before it forks). The last line is a one-line summary."""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import positive_int  # noqa: E402
from tests.support import free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def healthy(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1).status == 200
    except OSError:
        return False


def wait_healthy(proc: subprocess.Popen, port: int, log: Path) -> None:
    """Until the server answers; if it exits first (``serve`` refuses its arguments), stop
    with its last error line instead of polling a port nobody will open."""
    while not healthy(port):
        if proc.poll() is not None:
            lines = log.read_text(errors="replace").strip().splitlines() or ["no output"]
            raise SystemExit(f"neuralmind serve exited ({proc.returncode}): {lines[-1]}")
        time.sleep(0.01)


def cold_import(home: str) -> float:
    """CPU seconds of a fresh interpreter that imports ``kernel.wsgi`` (builds the Kernel)."""
    script = ("import os, time\nimport kernel.wsgi\nt = os.times()\n"
              "print(t.user + t.system)")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "NEURALMIND_HOME": home})
    return float(out.stdout.split()[-1])


def one_run(workers: int) -> dict:
    with tempfile.TemporaryDirectory() as home:
        port = free_port()
        env = {**os.environ, "NEURALMIND_HOME": home, "NEURALMIND_EMBEDDINGS_WARM": "0"}
        started = time.perf_counter()
        log = Path(home) / "serve.log"  # its error, should it refuse to start
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "neuralmind.cli", "serve", "--port",
                                     str(port), "--workers", str(workers)], cwd=ROOT, env=env,
                                    stdout=subprocess.DEVNULL, stderr=out)
        try:
            wait_healthy(proc, port, log)
            ready = time.perf_counter() - started
            while len(children(proc.pid)) < workers:
                time.sleep(0.01)
            time.sleep(0.3)  # each worker has built its Kernel once it is counted
            kids = children(proc.pid)
            boot = [cpu(k) for k in kids]
            master = cpu(proc.pid)
            os.kill(kids[0], signal.SIGKILL)
            killed = time.perf_counter()
            while not (set(children(proc.pid)) - set(kids)):
                time.sleep(0.005)
            new = (set(children(proc.pid)) - set(kids)).pop()
            time.sleep(0.3)
            return {"ready_s": ready, "master_cpu_s": master, "worker_cpu_s": boot,
                    "respawn_s": time.perf_counter() - killed - 0.3,
                    "respawned_cpu_s": cpu(new), "cold_import_cpu_s": cold_import(home)}
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2,
                    help="as neuralmind serve takes it (its own error is shown if it refuses)")
    ap.add_argument("--runs", type=positive_int, default=3)
    args = ap.parse_args()
    runs = [one_run(args.workers) for _ in range(args.runs)]
    med = statistics.median
    worker = med(c for r in runs for c in r["worker_cpu_s"])
    cold = med(r["cold_import_cpu_s"] for r in runs)
    print(f"load {os.getloadavg()[0]:.2f}; {args.workers} workers, {args.runs} runs (medians)")
    print(f"  ready {med(r['ready_s'] for r in runs):.2f} s; master CPU "
          f"{med(r['master_cpu_s'] for r in runs):.2f} s; worker CPU {worker:.3f} s")
    print(f"  a worker's start-up alone (cold import of kernel.wsgi, baseline): {cold:.3f} s CPU;"
          f" ratio {worker / cold:.2f}×")
    respawn, respawn_cpu = (med(r["respawn_s"] for r in runs),
                            med(r["respawned_cpu_s"] for r in runs))
    print(f"  SIGKILLed worker replaced by a new process in {respawn:.3f} s (its CPU "
          f"{respawn_cpu:.3f} s)")
    print(f"SUMMARY workers: a worker's start-up CPU {worker / cold:.2f}× a cold import of "
          f"kernel.wsgi ({worker:.3f} s ÷ {cold:.3f} s), ready "
          f"{med(r['ready_s'] for r in runs):.2f} s, a killed worker replaced in {respawn:.3f} s "
          f"on {respawn_cpu:.3f} s CPU ({args.workers} workers, {args.runs} runs, load "
          f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
