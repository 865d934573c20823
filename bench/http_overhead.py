"""Requests/s through our kernel vs a bare Falcon app, same gunicorn settings, same run.

    python bench/http_overhead.py [--seconds 5] [--rounds 3] [--connections 16]

Measures GET /v1/health and a pydantic-validated 1 KiB POST (with the loopback token on the
kernel side) with wrk when it is installed (apt-get install wrk), else a Python load loop.
Target: kernel ≥ 0.8× the bare app. The last line is a one-line summary.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import positive_int  # noqa: E402
from tests.support import free_port, request  # noqa: E402

BODY = json.dumps({"title": "Use SQLite WAL", "rationale": "x" * 960, "tags": ["storage"]})


def start(app: str, port: int, home: str, worker_class: str) -> subprocess.Popen:
    env = {**os.environ, "BENCH_APP": app, "NEURALMIND_HOME": home, "NEURALMIND_PLUGINS": "auth",
           "NEURALMIND_EMBEDDINGS_WARM": "0", "PYTHONPATH": str(ROOT)}
    threads = "4" if worker_class == "gthread" else "1"  # gunicorn makes sync + threads gthread
    cmd = [sys.executable, "-m", "gunicorn", "-w", "2", "-k", worker_class, "--threads", threads,
           "-b", f"127.0.0.1:{port}", "--log-level", "warning", "bench.http_apps:application"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            if request(port, "GET", "/v1/health", timeout=2).status == 200:
                return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{app} did not start")


LUA_FAILURES = """
failed = 0
response = function(status, headers, body)
  if status >= 300 and failed < 3 then
    failed = failed + 1
    io.write("FAILED " .. status .. " " .. body .. "\\n")
  end
end
"""


def wrk(url: str, seconds: int, conns: int, headers: dict[str, str], body: str | None,
        label: str = "") -> float:
    """Requests/s from wrk; a non-2xx response is printed (status and body), never hidden."""
    lua = "".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in headers.items())
    if body is not None:
        lua += (f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\n'
                'wrk.headers["Content-Type"] = "application/json"\n')
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(lua + LUA_FAILURES)
        script.flush()
        out = subprocess.run(["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "-s", script.name, url],
                             capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("FAILED") or "Non-2xx" in line:
            print(f"  ! {url} ({label}): {line[:300]}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def python_load(port: int, path: str, seconds: int, headers: dict[str, str], body: str | None) -> float:
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port)
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        conn.request("POST" if body else "GET", path, body=body, headers={
            "Host": "127.0.0.1", **headers, **({"Content-Type": "application/json"} if body else {})})
        conn.getresponse().read()
        n += 1
    return n / seconds


class Target:
    """One running app with what a request to it needs."""

    def __init__(self, app: str, worker_class: str):
        self.app, self.port = app, free_port()
        self.home = tempfile.TemporaryDirectory()
        self.proc = start(app, self.port, self.home.name, worker_class)
        token = (Path(self.home.name) / "token").read_text().strip() if app == "kernel" else "x"
        self.auth = {"Authorization": f"Bearer {token}"}
        assert request(self.port, "POST", "/v1/bench/echo", body=BODY.encode(), token=token,
                       headers={"Content-Type": "application/json"}).status == 200

    def rate(self, what: str, seconds: int, conns: int) -> float:
        path, headers, body = (("/v1/health", {}, None) if what == "get"
                               else ("/v1/bench/echo", self.auth, BODY))
        if shutil.which("wrk"):
            return wrk(f"http://127.0.0.1:{self.port}{path}", seconds, conns, headers, body,
                       self.app)
        return python_load(self.port, path, seconds, headers, body)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        self.home.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=positive_int, default=5)
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--connections", type=positive_int, default=16)
    args = ap.parse_args()
    tool = "wrk -t2 -c%d" % args.connections if shutil.which("wrk") else "python loop, 1 connection"
    print(f"load: {tool}, {args.seconds} s per figure, {args.rounds} alternating rounds (median); "
          "gunicorn -w 2 (sync, or gthread with 4 threads); kernel POST carries the loopback token")
    ratios = []
    for worker_class in ("sync", "gthread"):
        bare, ours = Target("bare", worker_class), Target("kernel", worker_class)
        try:
            for what, label in (("get", "GET /v1/health"), ("post", "POST 1 KiB validated")):
                b, k = [], []
                for _ in range(args.rounds):
                    b.append(bare.rate(what, args.seconds, args.connections))
                    k.append(ours.rate(what, args.seconds, args.connections))
                b_med, k_med = statistics.median(b), statistics.median(k)
                ratio = k_med / b_med
                ratios.append(ratio)
                print(f"{worker_class:8} {label:22} bare {b_med:9.0f} req/s   kernel "
                      f"{k_med:9.0f} req/s   ratio {ratio:.2f}")
        finally:
            bare.close(), ours.close()
    print(f"summary: kernel/bare min ratio {min(ratios):.2f} (target ≥ 0.80)")


if __name__ == "__main__":
    main()
