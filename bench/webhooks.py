"""Webhook figures on real servers, each next to a baseline measured in the same run.

    python bench/webhooks.py [--events 2000] [--creates 200] [--pace-ms 10] [--rounds 4]
                             [--workers 2]

1. Delivery throughput: a 2-worker ``neuralmind serve`` with the webhooks plugin and 1, then
   5, hooks to one local receiver (a threaded HTTP/1.1 server in a process of its own, at the
   lowest CPU priority: in life it runs on another machine). ``--events`` events, of kinds the
   bench declares (bench/event_kinds.py: the kernel refuses hooks on undeclared kinds), are
   written straight into the server's event log, as a CLI command writes them (the workers
   find them by polling, so no request competes), and the clock runs until every hook has
   every event.
   Baseline: the same receiver sent as many signed POSTs by bare loops in this process (one
   keep-alive connection and one loop per hook) — the HTTP alone, no queue, no lease.
2. What delivery adds to a memory create: two servers with ``auth``, ``memory`` and the
   deterministic fake embedder (so background embedding does not swing the comparison), one
   also with ``webhooks`` and 5 hooks on ``memory.*`` to the receiver. Rounds alternate
   between them (off, on, off, on …); each round times ``--creates`` single creates from one
   keep-alive client paced ``--pace-ms`` apart (the target: a create's own latency, on ÷ off
   ≤ 1.05, as delivery is never on the request path), as many back to back (the deliveries
   of one create then share the two cores with the next), the workers' CPU per create
   (delivery's whole cost, wherever it runs), and, when wrk is installed, 8 connections for
   4 s. At the end every create must have reached all 5 hooks.

3. In one process, where nothing else's CPU is counted: the plugin's CPU per delivery to
   one hook on its kept connection, and per take-in of one event for 5 hooks.

The machine is shared: compare the ratios, not the absolute figures. The last line is a
one-line summary.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import event_kinds  # noqa: E402
from bench.common import positive_int, wrk_note  # noqa: E402
from bench.memory import singles_wrk  # noqa: E402
from neuralmind.client import verify_signature, webhook_signature  # noqa: E402
from tests.embeddings import fake_embedder  # noqa: E402
from tests.support import KeepAlive, Server, pythonpath  # noqa: E402

FAST = """
[webhooks]
allow_private = ["127.0.0.1/32"]
poll_s = 0.05
"""


class Receiver(BaseHTTPRequestHandler):
    """The receiving service, run in a process of its own (``--receive``) so its work never
    holds this process's GIL while it times requests: answers POSTs 200 at once and counts
    them per path, keeping each path's first delivery for a signature check;
    ``GET /counts`` answers ``{counts: {path: n}, unique: {path: distinct delivery ids}}``,
    ``GET /first?path`` the first body and headers."""

    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"  # keep-alive, as most services answer
    counts: dict[str, int] = {}
    ids: dict[str, set[str]] = {}  # path → NeuralMind-Delivery values seen
    first: dict[str, dict] = {}
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.lock:
            seen = self.counts.get(self.path, 0)
            self.counts[self.path] = seen + 1
            self.ids.setdefault(self.path, set()).add(self.headers.get("NeuralMind-Delivery"))
            if not seen:
                self.first[self.path] = {"body": body.decode(), "headers": dict(self.headers)}
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        path, _, query = self.path.partition("?")
        with self.lock:
            data = ({"counts": self.counts, "unique": {p: len(i) for p, i in self.ids.items()}}
                    if path == "/counts" else self.first.get(query))
            body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def receive() -> int:
    os.nice(19)  # the service runs elsewhere in life: here it takes only the CPU left over
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    httpd.daemon_threads = True
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()
    return 0


class Counter:
    """This process's handle on the receiver process."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, __file__, "--receive"],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.secrets: dict[str, str] = {}

    def _get(self, path: str):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path)
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def total(self, prefix: str, key: str = "counts") -> int:
        return sum(n for p, n in self._get("/counts")[key].items() if p.startswith(prefix))

    def repeated(self, prefix: str) -> int:
        """Deliveries to ``prefix`` that arrived more than once (by NeuralMind-Delivery)."""
        return self.total(prefix) - self.total(prefix, "unique")

    def wait(self, prefix: str, count: int, timeout: float = 600) -> float:
        deadline = time.monotonic() + timeout
        while (got := self.total(prefix)) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {got} of {count} deliveries arrived")
            time.sleep(0.02)
        return time.perf_counter()

    def unsigned(self) -> list[str]:
        """The hooks whose first delivery does not carry a valid signature."""
        bad = []
        for path, secret in self.secrets.items():
            first = self._get(f"/first?{path}")
            if first is not None and not verify_signature(secret, first["body"].encode(),
                                                          first["headers"]):
                bad.append(path)
        return bad

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def server_env(root: Path, fake: bool = False) -> dict[str, str]:
    """PYTHONPATH for a server: the fake embedder's entry point when asked, else the bench's
    own event kinds' (the throughput server's hooks listen to them)."""
    return (fake_embedder.server_env(root) if fake
            else {"PYTHONPATH": pythonpath(event_kinds.site(root))})


def hook(server: Server, counter: Counter, path: str, events: list[str]) -> None:
    r = server.post("/v1/webhooks", {"url": counter.url(path), "events": events})
    if r.status != 201:
        raise SystemExit(f"cannot subscribe: {r.body[:300]}")
    counter.secrets[path] = r.json["secret"]


def write_events(home: Path, kind: str, n: int) -> None:
    """``n`` events appended to the server's log from this process, 100 per transaction."""
    from kernel.events import EventLog
    from kernel.storage import Database
    log = EventLog(Database(home / "kernel.db"), lambda event: None)
    for start in range(0, n, 100):
        log.hold()
        for i in range(start, min(n, start + 100)):
            log.append(kind, None, "bench", {"n": i, "title": f"decision {i}"}, None)
        log.release()


def bare_posts(counter: Counter, prefix: str, hooks: int, n: int) -> float:
    """Deliveries/s of a bare sender: per hook, a loop POSTing signed bodies one at a time."""
    body = json.dumps({"id": 1, "kind": "bench.event", "data": {"n": 0}}).encode()

    def loop(h: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", counter.port, timeout=10)
        for _ in range(n):
            ts = str(int(time.time()))
            conn.request("POST", f"{prefix}{h}", body=body, headers={
                "Content-Type": "application/json", "NeuralMind-Timestamp": ts,
                "NeuralMind-Signature": webhook_signature("whsec_bare", ts, body)})
            conn.getresponse().read()
        conn.close()

    loops = [threading.Thread(target=loop, args=(h,)) for h in range(hooks)]
    start = time.perf_counter()
    for t in loops:
        t.start()
    for t in loops:
        t.join()
    return hooks * n / (time.perf_counter() - start)


def throughput(root: Path, counter: Counter, events: int, workers: int) -> list[dict]:
    rows = []
    server = Server(root / "home-throughput", plugins=["auth", "webhooks", event_kinds.PLUGIN],
                    workers=workers, config=FAST, env=server_env(root)).start()
    try:
        for run, hooks in enumerate((1, 5)):
            prefix = f"/t{run}/"
            for h in range(hooks):
                hook(server, counter, f"{prefix}{h}", [f"bench{run}.*"])
            start = time.perf_counter()
            write_events(server.home, f"bench{run}.event", events)
            done = counter.wait(prefix, hooks * events)
            ours = hooks * events / (done - start)
            bare = bare_posts(counter, f"/bare{run}/", hooks, events)
            rows.append({"hooks": hooks, "events": events, "ours": ours, "bare": bare})
            print(f"{hooks} hook(s) × {events} events: {ours:,.0f} deliveries/s; bare POST "
                  f"loop{'s' if hooks > 1 else ''} {bare:,.0f}/s ({ours / bare:.2f}×)")
    finally:
        server.stop()
    return rows


def record(rng: random.Random, i: int) -> dict:
    words = " ".join(rng.choice(("cache", "queue", "retry", "index", "token", "vector"))
                     + str(rng.randrange(10_000)) for _ in range(8))
    return {"title": f"Decision {i} {words}", "rationale": f"Because {words}. " * 5}


def creates(server: Server, pid: str, rng: random.Random, n: int, start: int,
            pace_s: float = 0.0) -> list[float]:
    """Seconds each of ``n`` single creates took, from one keep-alive client, ``pace_s``
    apart (0: back to back)."""
    client = KeepAlive(server.port, server.token)
    base = f"/v1/projects/{pid}/memories"
    took = []
    for i in range(n):
        t = time.perf_counter()
        status, body = client.call("POST", base, record(rng, start + i))
        took.append(time.perf_counter() - t)
        if status != 201:
            raise SystemExit(f"create failed: {status} {body[:200]}")
        if pace_s:
            time.sleep(pace_s)
    return took


def server_cpu(server: Server) -> float:
    """CPU seconds (user + system) the server's workers have used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as fh:
        pids = fh.read().split()
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


def wrk_rate(server: Server, pid: str, seconds: int = 4) -> float | None:
    """Creates/s from wrk with 8 connections (bench/memory.py's run), or None without wrk."""
    got = singles_wrk(server.port, server.token, f"/v1/projects/{pid}/memories", seconds)
    if got is not None and got[1]:
        raise SystemExit(f"{got[1]} creates under wrk were not 201")
    return None if got is None else got[0]


def count_events(home: Path, kind: str) -> int:
    conn = sqlite3.connect(home / "kernel.db")
    try:
        return conn.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0]
    finally:
        conn.close()


MEASURES = ("paced", "back_to_back", "cpu_ms", "wrk")


def create_cost(root: Path, counter: Counter, n: int, rounds: int, workers: int,
                pace_s: float) -> dict:
    """Per round and server: p50 of ``n`` creates paced ``pace_s`` apart, p50 of ``n`` back
    to back, the workers' CPU per create over those, and wrk's creates/s."""
    servers = {}
    for name, extra in (("off", []), ("on", ["webhooks"])):
        repo = root / f"repo-{name}"
        repo.mkdir()
        server = Server(root / f"home-{name}", plugins=["auth", "memory", "fake_embedder", *extra],
                        workers=workers, config=FAST, env=server_env(root, fake=True)).start()
        servers[name] = (server, server.register(repo))
    on_server = servers["on"][0]
    for h in range(5):
        hook(on_server, counter, f"/c/{h}", ["memory.*"])
    rng = random.Random(7)
    got: dict[str, dict[str, list[float]]] = {m: {"off": [], "on": []} for m in MEASURES}
    try:
        for name in ("off", "on"):  # warm both the same way
            creates(*servers[name], rng, 20, 0)
        for r in range(rounds):
            for name in ("off", "on"):
                server, pid = servers[name]
                base = 1_000_000 * (r + 1)
                cpu = server_cpu(server)
                paced = creates(server, pid, rng, n, base, pace_s)
                solid = creates(server, pid, rng, n, base + n)
                time.sleep(0.5)  # the deliveries of those creates are part of their cost
                got["cpu_ms"][name].append((server_cpu(server) - cpu) / (2 * n) * 1e3)
                got["paced"][name].append(statistics.median(paced) * 1e3)
                got["back_to_back"][name].append(statistics.median(solid) * 1e3)
                rate = wrk_rate(server, pid)
                if rate is not None:
                    got["wrk"][name].append(rate)
                print(f"round {r + 1} webhooks {name:3}: create p50 "
                      f"{got['paced'][name][-1]:.2f} ms paced, "
                      f"{got['back_to_back'][name][-1]:.2f} ms back to back; workers' CPU "
                      f"{got['cpu_ms'][name][-1]:.2f} ms per create"
                      + (f"; wrk {rate:,.0f} creates/s" if rate is not None else ""))
        time.sleep(1.0)  # wrk leaves requests in flight when it stops
        created = count_events(on_server.home, "memory.created")
        counter.wait("/c/", 5 * created, timeout=300)  # none lost
    finally:
        for server, _ in servers.values():
            server.stop()
    out = {"created": created, "delivered": counter.total("/c/"),
           "repeated": counter.repeated("/c/")}
    for measure, values in got.items():
        if values["on"]:
            # each round's pair ran back to back: their ratio cancels drift between rounds
            out[measure] = {"off": statistics.median(values["off"]),
                            "on": statistics.median(values["on"]),
                            "ratio": statistics.median(b / a for a, b in zip(values["off"],
                                                                             values["on"]))}
    return out


def in_process(root: Path, counter: Counter, n: int) -> dict[str, float]:
    """The plugin's own CPU, in this process (so nothing else's is counted): per delivery
    to one hook on its kept connection, and per take-in of one event for 5 hooks."""
    from neuralmind import Actor
    from tests.support import make_kernel
    from plugins.webhooks.models import WebhookIn
    (root / "inproc.toml").write_text(FAST.replace("poll_s = 0.05", "poll_s = 60"))
    kernel = make_kernel(root / "home-inproc", plugins=["auth", "webhooks"],
                         config=root / "inproc.toml", extra_plugins=[event_kinds])
    service = kernel.state("webhooks")
    try:
        service.sender.stop()  # tries and take-ins run here, on this thread, to be timed
        local = Actor("local", role="admin", kind="loopback")  # the loopback token's caller
        for h in range(5):  # hook 0 takes the one-hook events too
            made = service.create(local, WebhookIn(url=counter.url(f"/p/{h}"), events=[
                "five.*", *(["one.*"] if h == 0 else [])]), None)
            counter.secrets[f"/p/{h}"] = made["secret"]
        for i in range(n):
            kernel.events.append("one.event", None, "bench", {"n": i}, None)
        service.take_in()
        start = time.process_time()
        while rows := service.store.due(service.clock()):
            for row in rows:
                service.attempt(row)
        per_delivery = (time.process_time() - start) / n
        appended = time.process_time()
        for i in range(500):
            kernel.events.append("five.event", None, "bench", {"n": i}, None)
        append = (time.process_time() - appended) / 500
        taking = time.process_time()
        for i in range(500):
            kernel.events.append("five.event", None, "bench", {"n": i}, None)
            service.take_in()
        take_in = (time.process_time() - taking) / 500 - append
    finally:
        kernel.shutdown()
    print(f"in one process: {per_delivery * 1e3:.2f} ms CPU per delivery (1 hook, kept "
          f"connection); {take_in * 1e3:.2f} ms per take-in of one event for 5 hooks")
    return {"delivery_ms": per_delivery * 1e3, "take_in_ms": take_in * 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=positive_int, default=2000)
    ap.add_argument("--creates", type=positive_int, default=200,
                    help="creates per round and measure")
    ap.add_argument("--pace-ms", type=positive_int, default=10,
                    help="pause between the paced creates (default 10 ms)")
    ap.add_argument("--rounds", type=positive_int, default=4)
    ap.add_argument("--workers", type=positive_int, default=2)
    ap.add_argument("--receive", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.receive:
        return receive()
    wrk_note("webhooks.py", "the creates/s under wrk (8 connections) are left out")
    counter = Counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            alone = in_process(root, counter, args.events)
            rows = throughput(root, counter, args.events, args.workers)
            cost = create_cost(root, counter, args.creates, args.rounds, args.workers,
                               args.pace_ms / 1e3)
        bad = counter.unsigned()
    finally:
        counter.stop()
    if bad:
        raise SystemExit(f"deliveries to {', '.join(bad)} failed their signature check")
    paced, solid, cpu = cost["paced"], cost["back_to_back"], cost["cpu_ms"]
    print(f"a create with 5 hooks ÷ without (medians of per-round ratios): p50 latency "
          f"{paced['ratio']:.3f}× paced {args.pace_ms:g} ms apart ({paced['on']:.2f} vs "
          f"{paced['off']:.2f} ms), {solid['ratio']:.3f}× back to back ({solid['on']:.2f} vs "
          f"{solid['off']:.2f} ms); workers' CPU per create {cpu['on']:.2f} vs {cpu['off']:.2f} ms"
          + (f"; wrk {cost['wrk']['ratio']:.2f}× ({cost['wrk']['on']:,.0f} vs "
             f"{cost['wrk']['off']:,.0f} creates/s)" if "wrk" in cost else ""))
    print(f"every one of the {cost['created']} creates reached all 5 hooks: {cost['delivered']} "
          f"deliveries, {cost['repeated']} of them repeats")
    load = os.getloadavg()[0]
    print(f"workers {args.workers}, load average {load:.1f}, shared 2-core machine")
    one, five = rows
    verdict = "meets" if paced["ratio"] <= 1.05 else "MISSES"
    print(f"SUMMARY webhooks: {one['ours']:,.0f} deliveries/s to 1 hook "
          f"({one['ours'] / one['bare']:.2f}× a bare POST loop), {five['ours']:,.0f}/s to 5 hooks "
          f"({five['ours'] / five['bare']:.2f}×), {alone['delivery_ms']:.2f} ms CPU each; a "
          f"single memory create with 5 hooks "
          f"{paced['ratio']:.3f}× the p50 latency without — {verdict} the ≤ 1.05× target "
          f"({solid['ratio']:.2f}× back to back, CPU {cpu['on'] / cpu['off']:.2f}×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
