"""Index plugin figures on a real mid-size tree, next to baselines measured in the same run.

The tree is falcon's source from site-packages (copied to a temp folder; no network). On a
real 1-worker gunicorn server with the packaged model:
  * cold build (POST /build, wait=true): wall time, files/s, nodes/s, the worker's peak RSS,
  * the bare embedder on the same texts in this process (same model, same threads): the
    build's wall time ÷ the bare embedding time shows whether the build is embedding-bound
    (target: bare ÷ build ≥ 0.8),
  * a no-change rebuild and a one-file rebuild,
  * query and search p50 over HTTP (keep-alive, after a warm-up),
  * with ``--peer /tmp/nm4venv`` (a venv holding PyPI neuralmind==4.22.1): the older
    NeuralMind's cold build (wall and CPU), peak RSS, rebuilds on a copy of the same tree,
    and its daemon's /search and /query, timed request by request alternating with ours,
  * ``impact`` p50 over HTTP at depth 3 (target ≤ 20 ms), from the best hit of each question
    and from whole files, beside ``GET /v1/health`` (the HTTP floor) in the same rounds,
  * the cost of learning on ``query``: the same questions through the index service in this
    process (on the server's index), learning on and off taking turns (target ≤ 5%).
The machine is shared with other work: compare ratios within one run; CPU seconds are the
load-independent figure for builds.

    python bench/index.py [--tree DIR] [--peer /tmp/nm4venv] [--queries 40] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import model_cache, positive_int  # noqa: E402
from tests.support import EVERY_QUERY_EMBEDDED, KeepAlive, Server  # noqa: E402

QUESTIONS = ["how are middleware components called for each request",
             "where is the request body parsed as JSON", "add a route to the app",
             "how are cookies set on the response", "error handler for HTTP errors",
             "websocket connection accept", "parse query string parameters",
             "CORS headers", "serve static files from a directory", "media type handlers"]


MAXRSS = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], "
          "stdout=subprocess.DEVNULL); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
          "print(u.ru_maxrss, u.ru_utime + u.ru_stime); sys.exit(r.returncode)")



PEER_HOWTO = ("make it with: python -m venv /tmp/nm4venv && /tmp/nm4venv/bin/pip install "
              "neuralmind==4.22.1 (docs/performance-index.md)")
TOUCHED_MIN_BYTES = 4000  # the one-file rebuild appends to a .py file at least this large


def default_tree() -> Path:
    import falcon
    return Path(falcon.__file__).parent


def source_tree(text: str) -> Path:
    """An argparse type: a folder holding a .py file the one-file rebuild can touch (a
    missing or empty tree would end in a traceback after the model and the server start)."""
    tree = Path(text)
    if not tree.is_dir():
        raise argparse.ArgumentTypeError(f"takes a source folder; {text} is not one")
    if touched(tree) is None:
        raise argparse.ArgumentTypeError(
            f"takes a source folder with a .py file of {TOUCHED_MIN_BYTES}+ bytes (the "
            f"one-file rebuild touches one); {text} has none")
    return tree


def peer_venv(text: str) -> Path:
    """An argparse type: a venv holding neuralmind 4.22.1's CLI, so a missing peer is said
    at once rather than its figures silently left out."""
    venv = Path(text)
    if not (venv / "bin" / "neuralmind").exists():
        raise argparse.ArgumentTypeError(f"no neuralmind in {venv}/bin: {PEER_HOWTO}")
    return venv


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    return dst


def worker_peak_rss_mib(server: Server) -> float:
    """VmHWM of the server's processes (gunicorn master's children hold the index work)."""
    peak = 0
    for pid in [server.proc.pid, *_children(server.proc.pid)]:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
    return peak / 1024


def server_cpu_s(server: Server) -> float:
    """User + system CPU seconds of the server's processes so far (load-independent)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in [server.proc.pid, *_children(server.proc.pid)]:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / ticks


def _children(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(c) for c in open(f"/proc/{pid}/task/{tid}/children").read().split()]
        except OSError:
            pass
    return out + [g for c in out for g in _children(c)]


def bare_embedding_s(tree: Path) -> tuple[float, float, int]:
    """The same texts the build embeds, through the bare embedder, in this process."""
    from kernel.embeddings import OnnxEmbedder
    from plugins.index.build import file_row, read_text
    from plugins.index.ignore import RuleSet, system_rules
    from plugins.index.models import IndexSettings
    from plugins.index.walker import walk
    settings, texts = IndexSettings(), {}
    for entry in walk(str(tree), RuleSet(system_rules(settings.max_file_bytes))):
        content = read_text(str(tree / entry.path))
        if content:
            file_row(entry, content[0], content[1], settings, texts)
    with model_cache() as cache:  # the int8 form derived here is removed with it
        embedder = OnnxEmbedder(remember=0, cache_dir=Path(cache))  # every text through it
        return timed_embedding(embedder, sorted(texts.values(), key=len), settings.embed_batch)


def timed_embedding(embedder, ordered: list[str], batch: int) -> tuple[float, float, int]:
    """Wall and CPU seconds ``embedder`` takes over ``ordered`` in ``batch``-sized calls,
    after a warm-up (the model's load is not the build's to pay)."""
    embedder.embed(["warm up"])
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(ordered), batch):
        embedder.embed(ordered[i:i + batch])
    return time.perf_counter() - started, time.process_time() - cpu, len(ordered)


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def wait_model(server: Server, timeout: float = 120) -> float:
    """Seconds until the server reports its model loaded (warm-up, incl. the int8 derivation)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        status = server.get("/v1/embeddings/status").json
        if status.get("loaded"):
            return time.perf_counter() - started
        time.sleep(0.1)
    raise RuntimeError(f"the model did not load in {timeout} s: {status}")


def build_ours(server: Server, client: KeepAlive, tree: Path) -> dict:
    project = json.loads(client.call("POST", "/v1/projects", {"path": str(tree)})[1])
    build = f"/v1/projects/{project['id']}/build"
    cpu, started = server_cpu_s(server), time.perf_counter()
    out = json.loads(client.call("POST", build, {"wait": True})[1])
    cold, cold_cpu = time.perf_counter() - started, server_cpu_s(server) - cpu
    result = out["job"]["result"]
    rss = worker_peak_rss_mib(server)
    nochange = timed(lambda: client.call("POST", build, {"wait": True})) / 1000
    touch_one(tree)
    one: dict = {}
    onefile = timed(lambda: one.update(json.loads(client.call("POST", build, {"wait": True})[1]))) / 1000
    return {"pid": project["id"], "cold_s": cold, "cold_cpu_s": cold_cpu,
            "files": result["files"], "nodes": result["nodes"],
            "chunks_embedded": result["chunks_embedded"], "peak_rss_mib": rss,
            "nochange_s": nochange, "onefile_s": onefile,
            "onefile_embedded": one["job"]["result"]["chunks_embedded"]}


def touched(tree: Path) -> Path | None:
    """The file the one-file rebuild changes: the first .py file of 4000+ bytes."""
    return next((p for p in sorted(tree.rglob("*.py")) if p.stat().st_size > TOUCHED_MIN_BYTES),
                None)


def touch_one(tree: Path) -> None:
    target = touched(tree)
    target.write_text(target.read_text() + "\n\ndef bench_added(x):\n    return x + 1\n")


class Peer:
    """The older NeuralMind (its own venv) on a copy of the same tree: CLI builds, daemon."""

    def __init__(self, venv: Path, tree: Path, work: Path):
        from kernel.embeddings import locate_model
        self.venv, self.tree, self.proc, self.port = venv, tree, None, None
        files = locate_model(None)
        model_dir = work / "peer-model"
        model_dir.mkdir(exist_ok=True)
        for src, name in ((files.model, "model.onnx"), (files.tokenizer, "tokenizer.json")):
            os.symlink(src, model_dir / name)
        self.env = {**os.environ, "NEURALMIND_ONNX_MODEL_DIR": str(model_dir),
                    "HF_HUB_OFFLINE": "1", "HOME": str(work / "peer-home"),
                    "NEURALMIND_HOME": str(work / "peer-home")}

    def run(self, *args) -> tuple[float, int, float]:
        """Wall s, peak RSS KiB and CPU s of one CLI command, measured by a fresh parent so
        this process's other children (our server) do not count."""
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", MAXRSS, str(self.venv / "bin" / "neuralmind"),
                               *args], cwd=self.tree, env=self.env, capture_output=True, text=True)
        took = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"peer {' '.join(args)} failed: {proc.stderr[-500:]}")
        rss, cpu = proc.stdout.strip().splitlines()[-1].split()
        return took, int(rss), float(cpu)

    def builds(self) -> dict:
        cold, rss, cpu = self.run("build", str(self.tree))
        nochange = self.run("build", str(self.tree))[0]
        touch_one(self.tree)
        onefile = self.run("build", str(self.tree))[0]
        return {"cold_s": cold, "cold_cpu_s": cpu, "peak_rss_mib": rss / 1024,
                "nochange_s": nochange, "onefile_s": onefile}

    def start_daemon(self) -> float:
        """Start the daemon; the first /query's time (it loads lazily)."""
        from tests.support import free_port
        self.port = free_port()
        self.proc = subprocess.Popen([str(self.venv / "bin" / "neuralmind-daemon"), "--port",
                                      str(self.port), "--no-auth"], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                return timed(lambda: self.post("/query", {"question": QUESTIONS[0]}))
            except (OSError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def post(self, route: str, body: dict) -> None:
        """One request on a fresh connection (the peer's server closes each one)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("POST", route, json.dumps({"project": str(self.tree), **body}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        conn.close()
        if r.status != 200:
            raise RuntimeError(f"peer {route}: HTTP {r.status}")

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)


def interleaved_p50(client: KeepAlive, pid: str, peer: Peer | None, rounds: int) -> dict:
    """Search and query p50, ours and the peer's request by request, so both see the same
    load on this shared machine. The order rotates each round, so neither side's requests
    always follow the other's (the peer lets onnxruntime's threads spin after a run)."""
    calls = {
        "search": lambda q: client.call("POST", f"/v1/projects/{pid}/search",
                                        {"query": q, "mode": "hybrid"}),
        "query": lambda q: client.call("POST", f"/v1/projects/{pid}/query", {"question": q}),
    }
    if peer is not None:
        calls["peer_search"] = lambda q: peer.post("/search", {"query": q})
        calls["peer_query"] = lambda q: peer.post("/query", {"question": q})
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for i in range(rounds + 3):
        for name in names[i % len(names):] + names[:i % len(names)]:
            call = calls[name]
            took = timed(lambda: call(QUESTIONS[i % len(QUESTIONS)]))
            if i >= 3:  # the first three are warm-up
                times[name].append(took)
    return {f"{name}_p50_ms": statistics.median(t) for name, t in times.items()}


def impact_p50(client: KeepAlive, pid: str, rounds: int) -> dict:
    """``POST …/impact`` at depth 3 from nodes (each question's best hit) and from files,
    taking turns with ``GET /v1/health``; p50 of each."""
    seeds = []
    for q in QUESTIONS:
        hits = json.loads(client.call("POST", f"/v1/projects/{pid}/search",
                                      {"query": q, "mode": "keyword", "n": 1})[1])["results"]
        seeds += [{"nodes": [h["id"]]} for h in hits]
        seeds += [{"files": [h["source_file"]]} for h in hits]
    times: dict[str, list[float]] = {"impact_node": [], "impact_file": [], "health": []}
    sizes = []
    for i in range(rounds + 3):
        body = seeds[i % len(seeds)]
        kind = "impact_node" if "nodes" in body else "impact_file"
        status, raw = 0, b""

        def call():
            nonlocal status, raw
            status, raw = client.call("POST", f"/v1/projects/{pid}/impact", {**body, "depth": 3})
        took = timed(call)
        health = timed(lambda: client.call("GET", "/v1/health"))
        if status != 200:
            raise RuntimeError(f"impact answered {status}: {raw[:300]}")
        if i >= 3:
            times[kind].append(took)
            times["health"].append(health)
            sizes.append(len(json.loads(raw)["impacted"]))
    return {f"{k}_p50_ms": statistics.median(v) for k, v in times.items()} | {
        "impacted_median": statistics.median(sizes)}


def learning_cost(tree: Path, work: Path, rounds: int) -> dict:
    """``query`` with learning on and off, taking turns, through the index service in this
    process, on the index the server built (the same SQLite files). The learning it measures
    is the request path's share: the co-activation buffered in memory (and the savings tally);
    the writer thread flushes every second meanwhile, as it does in a server."""
    from neuralmind import Kernel, load_settings
    from plugins.index import plugin
    settings = load_settings(kernel={"home": str(work / "learn-home")},
                             embeddings={"warm": False})
    kernel = Kernel(settings, plugins=["index"], load_entrypoints=False)
    try:
        service = plugin._service(kernel)
        project, _ = kernel.projects.register(str(tree))
        on = service.settings
        off = on.model_copy(update={"learning": False})
        service.query(project, QUESTIONS[0], "auto", None, False)  # the model loads
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(2 * rounds + 4):
            learn = i % 2 == (i // 2) % 2  # on/off, off/on, …: neither always goes first
            service.learning.settings = on if learn else off
            took = timed(lambda: service.query(project, QUESTIONS[i % len(QUESTIONS)], "auto",
                                               None, False))
            if i >= 4:
                times[learn].append(took)
        service.learning.settings = on
        started = time.perf_counter()
        for _ in range(10_000):
            service.learning.observe(project, "query", ["a.py", "b.py", "c.py"], 100, 1000)
        observe_us = (time.perf_counter() - started) * 100
        flush_ms = timed(lambda: service.learning.flush(project))
    finally:
        kernel.shutdown()
    p_on, p_off = statistics.median(times[True]), statistics.median(times[False])
    return {"query_learning_on_p50_ms": p_on, "query_learning_off_p50_ms": p_off,
            "learning_cost": p_on / p_off - 1, "observe_us": observe_us,
            "flush_10k_ms": flush_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=source_tree,
                        help="source tree to index (default: falcon from site-packages)")
    parser.add_argument("--peer", type=peer_venv,
                        help="venv with PyPI neuralmind==4.22.1 for the side-by-side")
    parser.add_argument("--queries", type=positive_int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    src = args.tree or default_tree()
    with tempfile.TemporaryDirectory(prefix="nm-bench-index-") as tmp:
        work = Path(tmp)
        bare_s, bare_cpu, texts = bare_embedding_s(copy_tree(src, work / "bare"))
        # the model is loaded before the cold build, as the daemon's warm-up does at start-up
        # (its int8 form is derived once per home: ~2.6 s here, reported as model_ready_s)
        server = Server(work / "home", plugins=["auth", "index"], workers=1,
                        config=EVERY_QUERY_EMBEDDED,
                        env={"NEURALMIND_EMBEDDINGS_WARM": "1"}).start()
        model_ready_s = wait_model(server)
        peer = Peer(args.peer, copy_tree(src, work / "peer"), work) if args.peer else None
        try:
            client = KeepAlive(server.port, server.token, timeout=600)
            mine = build_ours(server, client, copy_tree(src, work / "ours"))
            theirs = peer.builds() if peer else None
            if peer:
                theirs["first_query_ms"] = peer.start_daemon()
            p50 = interleaved_p50(client, mine["pid"], peer, args.queries)
            intel = impact_p50(client, mine["pid"], args.queries * 2)
            intel.update(learning_cost(work / "ours", work, args.queries * 10))
        finally:
            server.stop()
            if peer:
                peer.stop()
    mine.update(model_ready_s=model_ready_s,
                search_p50_ms=p50["search_p50_ms"], query_p50_ms=p50["query_p50_ms"],
                bare_embed_s=bare_s, bare_embed_cpu_s=bare_cpu, bare_texts=texts,
                embed_bound=bare_s / mine["cold_s"], embed_bound_cpu=bare_cpu / mine["cold_cpu_s"])
    if theirs:
        theirs.update(search_p50_ms=p50["peer_search_p50_ms"], query_p50_ms=p50["peer_query_p50_ms"])
    mine.update(intel)
    report = {"tree": str(src), "ours": mine, "peer": theirs}
    if args.json:
        print(json.dumps(report))
        return 0
    m = mine
    print(f"tree: {src} — {m['files']} files, {m['nodes']} nodes, {m['chunks_embedded']} texts embedded")
    print(f"cold build        {m['cold_s']:7.2f} s ({m['cold_cpu_s']:.1f} s CPU) "
          f"{m['files'] / m['cold_s']:7.1f} files/s "
          f"{m['nodes'] / m['cold_s']:7.1f} nodes/s   peak RSS {m['peak_rss_mib']:.0f} MiB")
    print(f"model ready       {m['model_ready_s']:7.2f} s after start-up (warm-up, before the build)")
    print(f"bare embedder     {bare_s:7.2f} s   on the same {texts} texts → bare ÷ build "
          f"{m['embed_bound']:.2f} wall, {m['embed_bound_cpu']:.2f} CPU ({bare_cpu:.1f} s ÷ "
          f"{m['cold_cpu_s']:.1f} s) (target ≥ 0.8)")
    print(f"no-change rebuild {m['nochange_s']:7.2f} s   one-file rebuild {m['onefile_s']:.2f} s "
          f"({m['onefile_embedded']} texts re-embedded)")
    print(f"search p50 {m['search_p50_ms']:.1f} ms   query p50 {m['query_p50_ms']:.1f} ms "
          "(HTTP, keep-alive" + ("; interleaved with the peer's requests)" if theirs else
                                 "; no peer: --peer /tmp/nm4venv adds neuralmind 4.22.1's)"))
    print(f"impact p50 at depth 3: from a node {m['impact_node_p50_ms']:.1f} ms, from a file "
          f"{m['impact_file_p50_ms']:.1f} ms (median {m['impacted_median']:.0f} impacted; "
          f"GET /v1/health {m['health_p50_ms']:.2f} ms in the same rounds) (target ≤ 20 ms)")
    print(f"learning on query: p50 {m['query_learning_on_p50_ms']:.2f} ms on vs "
          f"{m['query_learning_off_p50_ms']:.2f} ms off → {m['learning_cost'] * 100:+.1f}% "
          f"(target ≤ 5%); observe {m['observe_us']:.1f} µs, a flush of 10,000 buffered "
          f"queries {m['flush_10k_ms']:.0f} ms")
    if theirs:
        t = theirs
        print(f"neuralmind 4.22.1: cold {t['cold_s']:.2f} s ({t['cold_cpu_s']:.1f} s CPU), "
              f"peak RSS {t['peak_rss_mib']:.0f} MiB, "
              f"no-change {t['nochange_s']:.2f} s, one-file {t['onefile_s']:.2f} s, daemon "
              f"search p50 {t['search_p50_ms']:.1f} ms, query p50 {t['query_p50_ms']:.1f} ms "
              f"(first query {t['first_query_ms']:.0f} ms)")
        print("ratios ours ÷ theirs: " + ", ".join(
            f"{k} {m[k] / t[k]:.2f}" for k in ("cold_s", "cold_cpu_s", "peak_rss_mib",
                                              "nochange_s", "onefile_s", "search_p50_ms",
                                              "query_p50_ms")))
    summary = (f"SUMMARY index: cold {m['cold_s']:.1f}s ({m['nodes'] / m['cold_s']:.0f} nodes/s, "
               f"bare/build {m['embed_bound']:.2f} wall {m['embed_bound_cpu']:.2f} CPU), RSS {m['peak_rss_mib']:.0f}MiB, one-file "
               f"{m['onefile_s']:.2f}s, search p50 {m['search_p50_ms']:.1f}ms, query p50 "
               f"{m['query_p50_ms']:.1f}ms, impact p50 {m['impact_node_p50_ms']:.1f}/"
               f"{m['impact_file_p50_ms']:.1f}ms (node/file, depth 3), learning on query "
               f"{m['learning_cost'] * 100:+.1f}%")
    if theirs:
        summary += (f"; peer cold {theirs['cold_s']:.1f}s ({theirs['cold_cpu_s']:.0f}s CPU) RSS "
                    f"{theirs['peak_rss_mib']:.0f}MiB search p50 {theirs['search_p50_ms']:.1f}ms "
                    f"query p50 {theirs['query_p50_ms']:.1f}ms")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
