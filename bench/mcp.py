"""MCP figures: ``recall`` over MCP-HTTP and over stdio, against the same search over /v1,
in one run on the local daemon (one gunicorn worker with threads, as `neuralmind daemon`
runs it) holding 10,000 memories.

Three clients take turns query by query, so load on the shared machine falls on all three:
  * /v1: ``POST /v1/projects/{id}/memories/search`` on one keep-alive connection — the baseline,
  * MCP-HTTP: ``tools/call recall`` posted to ``/v1/mcp`` on one keep-alive connection, inside
    an initialized session (the JSON-RPC a Streamable HTTP client sends),
  * stdio: the same ``tools/call`` written to ``neuralmind mcp`` (the relay an agent
    launches) on its stdin, its answer read from its stdout.
Each client is plain (no SDK on the client side), so the ratios are our overhead: JSON-RPC,
the tool table, the internal request through the route and, for stdio, the relay's own hop.
Memories get random unit vectors (as bench/memory.py does above --embed-up-to): hybrid
latencies are real, its semantic results are not. Compare ratios, not absolute figures.

    python bench/mcp.py [--memories 10000] [--queries 200] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.memory import (fill_batches, pct, random_vectors, sentence,  # noqa: E402
                          sqlite_store, wait_embedded)
from bench.common import positive_int  # noqa: E402
from tests.support import EVERY_QUERY_EMBEDDED, KeepAlive, Server  # noqa: E402

VERSION = "2025-06-18"
INIT = {"protocolVersion": VERSION, "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}


class MCPHTTP:
    """JSON-RPC to /v1/mcp on one keep-alive connection, in a session."""

    def __init__(self, port: int, token: str, project: str):
        self.http, self.project = KeepAlive(port, token), project
        self.ids = itertools.count(1)
        self.session = None
        reply = self.post("initialize", INIT)
        assert reply["result"]["protocolVersion"] == VERSION

    def post(self, method: str, params: dict) -> dict:
        body = json.dumps({"jsonrpc": "2.0", "id": next(self.ids), "method": method,
                           "params": params}).encode()
        headers = {"Host": f"127.0.0.1:{self.http.port}", "Content-Type": "application/json",
                   "Authorization": f"Bearer {self.http.token}", "MCP-Protocol-Version": VERSION,
                   "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.http.conn.request("POST", "/v1/mcp", body=body, headers=headers)
        r = self.http.conn.getresponse()
        self.session = self.session or r.getheader("Mcp-Session-Id")
        data = r.read()
        assert r.status == 200, data[:300]
        return json.loads(data)

    def recall(self, query: str) -> dict:
        return self.post("tools/call", {"name": "recall", "arguments": {
            "project": self.project, "query": query, "mode": "hybrid", "limit": 10}})


class Stdio:
    """``neuralmind mcp`` as an agent launches it: JSON-RPC lines on its stdin and stdout."""

    def __init__(self, home: Path, project: str):
        env = {**os.environ, "NEURALMIND_HOME": str(home), "PYTHONPATH": str(ROOT)}
        env.pop("NEURALMIND_CONFIG", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "neuralmind.cli", "mcp", "--project",
                                      project], cwd=ROOT, env=env, text=True, bufsize=1,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.ids = itertools.count(1)
        assert self.post("initialize", INIT)["result"]["protocolVersion"] == VERSION
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0",
                                          "method": "notifications/initialized"}) + "\n")

    def post(self, method: str, params: dict) -> dict:
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next(self.ids),
                                          "method": method, "params": params}) + "\n")
        return json.loads(self.proc.stdout.readline())

    def recall(self, query: str) -> dict:
        return self.post("tools/call", {"name": "recall", "arguments": {
            "query": query, "mode": "hybrid", "limit": 10}})

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t0) * 1000, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=positive_int, default=10_000)
    ap.add_argument("--queries", type=positive_int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from kernel.config import load_settings
    from kernel.embeddings import default_embedder
    embedder = default_embedder(load_settings(embeddings={"remember": 0}))  # raw: the model
    rng = random.Random(7)
    queries = [sentence(rng, rng.randint(3, 6)) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(Path(tmp) / "home", plugins=["auth", "memory", "mcp"], daemon=True,
                     config=EVERY_QUERY_EMBEDDED, env={"NEURALMIND_EMBEDDINGS_WARM": "1"}).start()
        stdio = None
        try:
            project = Path(tmp) / "project"
            project.mkdir()
            pid = srv.register(project)
            base = f"/v1/projects/{pid}/memories"
            v1 = KeepAlive(srv.port, srv.token)
            fill_batches(v1, base, random.Random(args.memories), args.memories)
            store = sqlite_store(project / ".neuralmind" / "memory.db")
            random_vectors(store, embedder.model_id, embedder.dim)
            wait_embedded([store], embedder.model_id)
            # the relay first: its start-up (seconds on a loaded machine) would leave the MCP
            # session's connection idle past the server's 5 s keep-alive, and it is not retried
            stdio = Stdio(srv.home, pid)
            mcp = MCPHTTP(srv.port, srv.token, pid)

            def search(q):
                status, body = v1.call("POST", base + "/search",
                                       {"query": q, "mode": "hybrid", "limit": 10})
                assert status == 200, body[:300]
                return json.loads(body)

            clients = {"v1": search, "mcp_http": mcp.recall, "stdio": stdio.recall}
            for q in queries[:20]:  # warm: caches, the model, each connection
                for call in clients.values():
                    call(q)
            ms = {name: [] for name in clients}
            for i, q in enumerate(queries):
                order = list(clients.items())
                order = order[i % 3:] + order[:i % 3]  # who goes first rotates
                found = {}
                for name, call in order:
                    elapsed, out = timed(call, q)
                    ms[name].append(elapsed)
                    found[name] = out
                ids = [r["id"] for r in found["v1"]["results"]]
                for name in ("mcp_http", "stdio"):
                    result = found[name]["result"]
                    assert not result["isError"], result["content"]
                    assert [r["id"] for r in result["structuredContent"]["results"]] == ids
        finally:
            if stdio is not None:
                stdio.close()
            srv.stop()
    out = {"memories": args.memories, "queries": len(queries)}
    for name, values in ms.items():
        out[name] = {"p50_ms": round(statistics.median(values), 2),
                     "p95_ms": round(pct(values, 95), 2)}
    base_p50 = out["v1"]["p50_ms"]
    out["mcp_http_over_v1"] = round(out["mcp_http"]["p50_ms"] / base_p50, 2)
    out["stdio_over_v1"] = round(out["stdio"]["p50_ms"] / base_p50, 2)
    if args.json:
        print(json.dumps(out))
    else:
        for name, label in (("v1", "/v1 search"), ("mcp_http", "MCP-HTTP recall"),
                            ("stdio", "stdio recall")):
            print(f"{label:<16} p50 {out[name]['p50_ms']:>7.2f} ms  p95 {out[name]['p95_ms']:>7.2f} ms")
    print(f"mcp bench: {args.memories} memories, hybrid recall p50 — /v1 {base_p50} ms, MCP-HTTP "
          f"{out['mcp_http']['p50_ms']} ms ({out['mcp_http_over_v1']}×, target ≤ 1.2×), stdio "
          f"{out['stdio']['p50_ms']} ms ({out['stdio_over_v1']}×, target ≤ 2×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
