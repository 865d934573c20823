"""Learned links are shared across gunicorn workers: each worker buffers what its searches
co-activate and writes it to the project's usage.db, so every worker reads the sum."""

from __future__ import annotations

import time

from tests.plugins.index.test_graph import write
from tests.plugins.index.test_learning import FILES


def test_two_workers_learn_into_one_store(make_server, tmp_path):
    empty = tmp_path / "no-model"  # keyword search is enough, and the workers start at once
    empty.mkdir()
    server = make_server(serving=True, workers=2, plugins=["auth", "index"],
                         env={"NEURALMIND_MODEL_DIR": str(empty)})
    pid = server.register(write(tmp_path / "repo", FILES))
    assert server.post(f"/v1/projects/{pid}/build", {"wait": True}).status == 200
    for _ in range(12):  # a fresh connection each: the kernel hands them to either worker
        r = server.post(f"/v1/projects/{pid}/search", {"query": "round money total",
                                                       "mode": "keyword", "n": 5})
        assert {"shop/cart.py", "shop/prices.py"} <= {h["source_file"] for h in r.json["results"]}
    deadline = time.monotonic() + 15
    counts = set()
    while time.monotonic() < deadline:
        counts = set()
        for _ in range(6):
            links = server.get(f"/v1/projects/{pid}/neighbors/synaptic?file=shop/cart.py").json
            found = {n["file"]: n["count"] for n in links["neighbors"]}
            counts.add(found.get("shop/prices.py", 0))
        if counts == {12}:
            break
        time.sleep(0.3)
    assert counts == {12}  # every worker reads all twelve, whichever worker served them
    stats = server.get(f"/v1/projects/{pid}/savings").json
    assert stats["by_kind"]["search"]["calls"] == 12
