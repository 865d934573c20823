"""Requests/s through our kernel vs a bare Falcon app, same gunicorn settings, same run.

    python bench/http_overhead.py [--seconds 8] [--connections 16]

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import free_port, request  # noqa: E402

BODY = json.dumps({"title": "Use SQLite WAL", "rationale": "x" * 960, "tags": ["storage"]})


def start(app: str, port: int, home: str, worker_class: str) -> subprocess.Popen:
    env = {**os.environ, "BENCH_APP": app, "NEURALMIND_HOME": home, "NEURALMIND_PLUGINS": "auth",
           "NEURALMIND_EMBEDDINGS_WARM": "0", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "gunicorn", "-w", "2", "-k", worker_class, "--threads", "4",
           "-b", f"127.0.0.1:{port}", "--log-level", "warning", "bench.http_apps:application"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            if request(port, "GET", "/v1/health", timeout=2).status == 200:
                return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{app} did not start")


def wrk(url: str, seconds: int, conns: int, headers: dict[str, str], body: str | None) -> float:
    script = None
    cmd = ["wrk", "-t2", f"-c{conns}", f"-d{seconds}s"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    if body is not None:
        script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
        script.write(f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\n'
                     'wrk.headers["Content-Type"] = "application/json"\n')
        script.close()
        cmd += ["-s", script.name]
    out = subprocess.run(cmd + [url], capture_output=True, text=True).stdout
    if script:
        os.unlink(script.name)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise RuntimeError(f"{non2xx.group(1)} failed responses from {url}")
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


def measure(app: str, seconds: int, conns: int, worker_class: str) -> dict[str, float]:
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        proc = start(app, port, home, worker_class)
        try:
            token = (Path(home) / "token").read_text().strip() if app == "kernel" else "x"
            auth = {"Authorization": f"Bearer {token}"}
            assert request(port, "POST", "/v1/bench/echo", body=BODY.encode(), token=token,
                           headers={"Content-Type": "application/json"}).status == 200
            url = f"http://127.0.0.1:{port}"
            if shutil.which("wrk"):
                get = wrk(url + "/v1/health", seconds, conns, {}, None)
                post = wrk(url + "/v1/bench/echo", seconds, conns, auth, BODY)
            else:
                get = python_load(port, "/v1/health", seconds, {}, None)
                post = python_load(port, "/v1/bench/echo", seconds, auth, BODY)
            return {"get": get, "post": post}
        finally:
            proc.terminate()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=16)
    args = ap.parse_args()
    tool = "wrk -t2 -c%d" % args.connections if shutil.which("wrk") else "python loop, 1 connection"
    print(f"load: {tool}, {args.seconds} s per figure; gunicorn -w 2 --threads 4")
    ratios = []
    for worker_class in ("sync", "gthread"):
        bare = measure("bare", args.seconds, args.connections, worker_class)
        ours = measure("kernel", args.seconds, args.connections, worker_class)
        for what, label in (("get", "GET /v1/health"), ("post", "POST 1 KiB validated")):
            ratio = ours[what] / bare[what]
            ratios.append(ratio)
            print(f"{worker_class:8} {label:22} bare {bare[what]:9.0f} req/s   kernel "
                  f"{ours[what]:9.0f} req/s   ratio {ratio:.2f}")
    print(f"summary: kernel/bare min ratio {min(ratios):.2f} (target ≥ 0.80)")


if __name__ == "__main__":
    main()
