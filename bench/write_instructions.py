"""Creates counted in instructions: the server's work per record ÷ the store's own, under
valgrind's callgrind, so the ratio of issue 16 item 4 holds still on a shared machine.

Wall-clock and CPU-time ratios (``bench/memory.py --writes``) moved 0.68–0.90× between runs
of the same code here: the other core's load, the cache and the clock all weigh on them.
An instruction count does not move with any of those. Each side runs in a process of its
own under callgrind with instrumentation off until the measured part (``callgrind_control``
turns it on and off), after the same warm-up:

  * server: batches of 1,000 creates (the bench's records), then single creates, through the
    kernel's WSGI app in process (auth + memory plugins, a real SQLite file; routing, body
    validation, records built, the answer) — no socket, so gunicorn's share is left out;
  * store: the same number of records as ``bench/memory.py``'s store alone does them —
    ``apply_batch`` of 1,000 prepared records per transaction, and one create per
    transaction with its duplicate hint and contradiction check (:class:`StoreCreate`).

    python bench/write_instructions.py [--warm 3000] [--batches 3] [--singles 200] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.common import positive_int  # noqa: E402

NOW = "2026-01-01T00:00:00.000Z"


def _instrumented(on: bool) -> None:
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                   check=True, capture_output=True)


def _count(part: str, phase: str, args, folder: Path) -> None:
    """Under callgrind: warm ``part`` up, then instrument ``phase`` (batch or single) only."""
    import memory as bm
    rng = random.Random(1)
    if part == "server":
        import falcon.testing
        from tests.support import make_kernel
        home = folder / "home"
        home.mkdir()
        kernel = make_kernel(home, plugins=["auth", "memory"], memory={"backfill_delay_s": 60})
        client = falcon.testing.TestClient(kernel.app)
        headers = {"Authorization": f"Bearer {(home / 'token').read_text().strip()}",
                   "Host": "127.0.0.1:1", "Content-Type": "application/json"}
        project = folder / "project"
        project.mkdir()
        pid = client.simulate_post("/v1/projects", json={"path": str(project)},
                                   headers=headers).json["id"]
        url = f"/v1/projects/{pid}/memories"

        def batch(start: int) -> bytes:
            return json.dumps({"items": [{"op": "create", **bm.record(rng, i)}
                                         for i in range(start, start + 1000)]}).encode()

        def post(path: str, body: bytes) -> None:
            status = client.simulate_post(path, body=body, headers=headers).status_code
            assert status in (200, 201), status

        for start in range(0, args.warm, 1000):
            post(url + "/batch", batch(start))
        if phase == "batch":
            work = [(url + "/batch", batch(args.warm + 1000 * i)) for i in range(args.batches)]
        else:
            work = [(url, json.dumps(bm.record(rng, args.warm + i)).encode())
                    for i in range(args.singles)]
        run = [lambda p=p, b=b: post(p, b) for p, b in work]
    else:
        (folder / "raw").mkdir()
        backend = bm.Backend("sqlite", folder / "raw")
        store = backend.store("raw")
        for start in range(0, args.warm, 1000):
            store.apply_batch(bm.built_ops(rng, start, 1000, backend.folder), NOW)
        if phase == "batch":
            ops = [bm.built_ops(rng, args.warm + 1000 * i, 1000, backend.folder)
                   for i in range(args.batches)]
            run = [lambda o=o: store.apply_batch(o, NOW) for o in ops]
        else:
            create = bm.StoreCreate()
            ops = bm.built_ops(rng, args.warm, args.singles, backend.folder)
            run = [lambda op=op: create(store, op) for op in ops]
    gc.collect()
    gc.freeze()  # as a gunicorn worker does after start-up (kernel/serving.py)
    _instrumented(True)
    for step in run:
        step()
    _instrumented(False)


def _measure(part: str, phase: str, args) -> int:
    """Instructions ``part`` spent on ``phase``, from callgrind's own count."""
    folder = Path(tempfile.mkdtemp(prefix="nm-instructions-"))
    try:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={folder / 'callgrind.out'}", sys.executable, __file__,
             "--part", part, "--phase", phase, "--folder", str(folder / "work"),
             "--warm", str(args.warm), "--batches", str(args.batches),
             "--singles", str(args.singles)],
            capture_output=True, text=True, check=True)
        return int(re.search(r"Collected : (\d+)", out.stderr)[1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=positive_int, default=3000,
                    help="records written before counting (a multiple of 1,000)")
    ap.add_argument("--batches", type=positive_int, default=3,
                    help="1,000-record batches counted")
    ap.add_argument("--singles", type=positive_int, default=200, help="single creates counted")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--part", choices=("server", "store"), help=argparse.SUPPRESS)
    ap.add_argument("--phase", choices=("batch", "single"), help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.warm % 1000:
        ap.error(f"--warm {args.warm}: the warm-up is written in 1,000-record batches; "
                 "give a multiple of 1000")
    if args.part:  # the child callgrind runs
        folder = Path(args.folder)
        folder.mkdir()
        _count(args.part, args.phase, args, folder)
        return 0
    if not shutil.which("valgrind"):
        print("bench/write_instructions.py: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    records = {"batch": 1000 * args.batches, "single": args.singles}
    res = {}
    for phase, n in records.items():
        server, store = (_measure(part, phase, args) / n for part in ("server", "store"))
        res[phase] = {"records": n, "server_per_record": round(server),
                      "store_per_record": round(store), "store_over_server": round(store / server, 3)}
    if args.json:
        print(json.dumps(res))
    else:
        for phase, r in res.items():
            print(f"{phase:<7} creates ({r['records']} after {args.warm}): instructions per "
                  f"record server {r['server_per_record']:,}, store {r['store_per_record']:,}: "
                  f"store ÷ server {r['store_over_server']}×")
    print(f"write instructions: the store alone ÷ the server, per record — batch creates "
          f"{res['batch']['store_over_server']}× (target ≥ 0.8×), single creates "
          f"{res['single']['store_over_server']}× (target ≥ 0.6×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
