"""The semantic leg on the ANN index (plugins/memory/ann.py), with the packaged model, on a
project above a low ``ann_min_records``: the same hits as the exact scan (of a second server
with the index off, on the same files), filters held, an index grown after writes, kept
across a restart and shared by two kernels on one home (as two gunicorn workers share it)."""

from __future__ import annotations

import random

import pytest

from neuralmind import today
from plugins.memory.ann import CandidateLeg, folder
from plugins.memory.plugin import memories
from tests.plugins.memory.conftest import Api, start

pytestmark = pytest.mark.sqlite_only("the ANN files are one machine's; PostgreSQL keeps the exact "
                                     "scan (test_exact_search_on_postgresql)")

ANN = {"decay_sweep_hours": 0, "ann_min_records": 150, "ann_rebuild_rows": 40}
TOPICS = {
    "storage": ("SQLite write-ahead log", "checkpoint the journal", "vacuum the database file",
                "index the created_at column", "busy timeout for writers"),
    "network": ("retry the HTTP client", "keep-alive connections", "TLS certificates",
                "timeouts on slow proxies", "rate limit per token"),
    "parsing": ("split the lexer from the grammar", "tree-sitter node kinds",
                "error recovery in the parser", "tokenise camelCase identifiers",
                "unicode in source files"),
    "testing": ("flaky tests on CI runners", "property-based tests with hypothesis",
                "fixtures per module", "a real PostgreSQL in tests", "coverage of the CLI"),
    "security": ("escape HTML in templates", "hash the API tokens", "Host header checks",
                 "audit log with a hash chain", "roles for team servers"),
}
QUERIES = ["how do we keep writers from blocking readers in the database",
           "connections drop behind a proxy", "parsing identifiers written in camel case",
           "tests that fail at random on the build machines", "cross-site scripting",
           "which certificates does the server use", "hash chain for the audit trail"]


def records(n: int, seed: int) -> list[dict]:
    rng, out = random.Random(seed), []
    for i in range(n):
        topic = rng.choice(sorted(TOPICS))
        a, b = rng.sample(TOPICS[topic], 2)
        out.append({"title": f"{a.capitalize()} ({i})",
                    "rationale": f"We chose to {a} because {b} mattered in case {i}.",
                    "tags": [topic] + (["rare"] if i % 60 == 0 else []),
                    "kind": "fact" if i % 4 == 0 else "decision",
                    "confidence": 0.5 if i % 3 == 0 else 1.0,
                    "status": "ARCHIVED" if i % 7 == 0 else "ACTIVE"})
    return out


def batch(api: Api, recs: list[dict]) -> None:
    r = api.server.post(api.url(tail="batch"), {"items": [{"op": "create", **r} for r in recs]})
    assert r.status == 200, r.body


def ids(result) -> list[str]:
    return [r["id"] for r in result["results"]]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two kernels with the index on and one with it off, all on one home and project.
    Decay is off: with it, every search's hits gain strength when its recalls are written, a
    moment later from a thread of the kernel that searched, and a hybrid ranking compared
    across kernels would depend on whether that write landed between the two searches."""
    home, project = tmp_path_factory.mktemp("ann-home"), tmp_path_factory.mktemp("ann-proj")
    on, other = start(home, memory=ANN), start(home, memory=ANN)
    off = start(home, memory={**ANN, "ann": False})
    apis = [Api(s, project) for s in (on, other, off)]
    r = on.request("PUT", apis[0].url(tail="decay-policy"), json_body={"enabled": False})
    assert r.status == 200 and r.json["enabled"] is False, r.body
    batch(apis[0], records(300, seed=1))
    apis[2].embedded()
    # the first search past the threshold starts a build and scans meanwhile
    unbuilt = {q: ids(apis[0].search(q, mode="semantic")) for q in QUERIES[:3]}
    built(on)
    apis[0].unbuilt = unbuilt
    yield apis
    for s in (on, other, off):
        s.stop()


def built(server):
    service = memories(server.kernel)
    service.searcher.ann.wait()
    return service


def state(api: Api):
    service = memories(api.server.kernel)
    store = service.store(api.server.kernel.projects.get(api.pid))
    return service, store, service.kernel.embedder


def generations(api: Api) -> list[str]:
    _, store, embedder = state(api)
    root = folder(store, embedder.model_id)
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def legs(api_on: Api, api_off: Api, query: str, filters: dict, n: int = 10):
    out = []
    for api in (api_on, api_off):
        service, store, _ = state(api)
        out.append(service.searcher.semantic(store, query, filters, today(), n))
    return out


@pytest.mark.parametrize("query", QUERIES)
def test_ann_leg_finds_the_exact_scans_hits(servers, query):
    on, _, off = servers
    ann, exact = legs(on, off, query, {"status": "ACTIVE"}, n=40)
    assert isinstance(ann, CandidateLeg) and not isinstance(exact, CandidateLeg)
    assert [h[0] for h in ann.hits[:10]] == [h[0] for h in exact.hits[:10]]
    assert ann.hits[0][1] == pytest.approx(exact.hits[0][1], abs=1e-5)
    for mode in ("semantic", "hybrid"):
        assert ids(on.search(query, mode=mode)) == ids(off.search(query, mode=mode)), mode


def test_before_the_first_build_a_scan_finds_the_same_hits(servers):
    on, _, off = servers
    assert on.unbuilt and all(on.unbuilt[q] == ids(off.search(q, mode="semantic"))
                              for q in on.unbuilt)


@pytest.mark.parametrize("filters", [
    {"status": "ARCHIVED"}, {"status": "ALL", "kind": ["fact"]},
    {"status": "ACTIVE", "min_confidence": 0.9}, {"status": "ALL", "tag": ["network"]},
    {"status": "ALL", "tag": ["rare"]},  # 5 records: the graph is asked for more
])
def test_filters_hold_on_the_ann_path(servers, filters):
    on, _, off = servers
    query = "how should the service handle its storage and its connections"
    ann, exact = legs(on, off, query, filters)
    assert isinstance(ann, CandidateLeg)
    assert [h[0] for h in ann.hits] == [h[0] for h in exact.hits] and ann.hits
    _, store, _ = state(on)
    allowed = store.filter_ids(filters, today())
    assert {h[0] for h in ann.hits} <= allowed
    body = {k: v for k, v in filters.items() if k != "status"} | {"status": filters["status"]}
    assert ids(on.search(query, mode="semantic", **body)) == ids(
        off.search(query, mode="semantic", **body))


def test_writes_are_found_at_once_and_grow_the_index(servers):
    on, _, off = servers
    before = generations(on)
    new = on.create(title="Quantum annealing schedules for the job queue",
                    rationale="A simulated annealer orders the background jobs by cost.",
                    tags=["scheduling"])
    batch(on, records(50, seed=2))  # past ann_rebuild_rows: the next search calls a build
    off.embedded()
    assert ids(on.search("annealing the order of queued jobs", mode="semantic"))[0] == new["id"]
    service = built(on.server)
    after = generations(on)
    assert after != before and len(after) <= 2  # a new generation; older ones pruned
    service, store, embedder = state(on)
    snap = service.searcher.ann.snapshot(store, embedder.model_id)
    assert snap.meta["appended"] > 0 and snap.meta["records"] >= 351  # incremental
    assert new["id"].encode() in set(snap.ids.tolist())
    ann = service.searcher.semantic(store, "annealing the order of queued jobs",
                                    {"status": "ACTIVE"}, today(), 10)
    assert isinstance(ann, CandidateLeg) and ann.hits[0][0] == new["id"]
    assert on.server.delete(on.url(new["id"])).status in (200, 204)
    assert new["id"] not in ids(on.search("annealing the order of queued jobs", mode="semantic"))


def test_two_kernels_share_one_index_and_a_restart_keeps_it(servers, tmp_path):
    on, other, _ = servers
    query = QUERIES[0]
    expected = ids(on.search(query, mode="hybrid"))
    assert ids(other.search(query, mode="hybrid")) == expected
    mine, theirs = (state(a) for a in (on, other))
    snaps = [s.searcher.ann.snapshot(st, e.model_id) for s, st, e in (mine, theirs)]
    assert snaps[0].path == snaps[1].path  # one generation on disk, mapped by both
    home, kept = on.server.home, generations(on)
    again = start(home, memory=ANN)
    try:
        api = Api(again, on.dir)
        assert ids(api.search(query, mode="hybrid")) == expected
        service, store, embedder = state(api)
        assert service.searcher.ann.snapshot(store, embedder.model_id).path == snaps[0].path
        service.searcher.ann.wait()
        assert generations(api) == kept  # it opened the index; it built nothing
    finally:
        again.stop()


def test_onnxruntime_still_loads_after_the_index_library():
    """Importing onnxruntime after usearch segfaults; the module imports them in the safe
    order, so a worker that builds before it first embeds can still embed."""
    import subprocess
    import sys
    code = "from plugins.memory.ann import usearch_index; usearch_index(); import onnxruntime"
    done = subprocess.run([sys.executable, "-c", code + "; print('loaded')"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "loaded" in done.stdout, done.stderr[-500:]
