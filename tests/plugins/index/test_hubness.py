"""Hubness: each vector's mean cosine to its nearest others, measured by the build, taken off
the cosine of semantic and hybrid search (``[index] hub_weight``)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from plugins.index.search import HUB_NEIGHBOURS, hubness
from tests.plugins.index.conftest import build


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_a_vector_near_many_others_is_a_hub_and_an_isolated_one_is_not():
    rng = np.random.default_rng(1)
    centre = rng.normal(size=16)
    cluster = unit(centre + 0.3 * rng.normal(size=(HUB_NEIGHBOURS + 4, 16)))
    alone = unit(np.eye(16)[None, 0] - 0.99 * unit(centre[None, :]))
    reference = np.vstack([cluster, alone])
    hubs = hubness(reference, reference)
    assert hubs[:-1].min() > 0.7 and hubs[-1] < 0.1
    # the mean of the nearest others' cosines, the vector itself left out
    sims = reference[0] @ reference.T
    expected = np.sort(np.delete(sims, 0))[-HUB_NEIGHBOURS:].mean()
    assert hubs[0] == pytest.approx(expected, abs=1e-6)
    assert hubness(reference[:1], reference[:1]).tolist() == [0.0]  # nothing else to be near


def index_db(root) -> sqlite3.Connection:
    return sqlite3.connect(root / ".neuralmind" / "index.db")


def test_builds_measure_new_vectors_and_search_takes_hubness_off_the_cosine(server, project):
    pid, root = project
    build(server, pid)
    with index_db(root) as db:
        assert db.execute("SELECT COUNT(*) FROM vectors WHERE hub IS NULL").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] > 5
    query = "calculate how much tax is due on a purchase"
    r = server.post(f"/v1/projects/{pid}/search", {"query": query, "mode": "semantic", "n": 1})
    top = r.json["results"][0]
    with index_db(root) as db:
        vec, hub = db.execute("SELECT v.vec, v.hub FROM nodes n JOIN vectors v ON "
                              "v.hash = n.embed_hash WHERE n.id = ?", (top["id"],)).fetchone()
    cosine = float(np.frombuffer(vec, np.float32) @ server.kernel.embedder.embed([query])[0])
    assert 0 < hub < cosine and top["score"] == pytest.approx(cosine - 0.3 * hub, abs=2e-6)

    # an incremental build measures only the vectors it added; a full one measures all again
    with index_db(root) as db:
        db.execute("UPDATE vectors SET hub = 5.0")
    (root / "shop" / "fees.py").write_text('def late_fee(days):\n    """The fee for paying '
                                           'late."""\n    return 2 * days\n')
    build(server, pid)
    with index_db(root) as db:
        fresh = db.execute("SELECT v.hub FROM nodes n JOIN vectors v ON v.hash = n.embed_hash "
                           "WHERE n.path = 'shop/fees.py'").fetchall()
        assert fresh and all(0 < h < 1 for (h,) in fresh)
        assert db.execute("SELECT COUNT(*) FROM vectors WHERE hub = 5.0").fetchone()[0] > 5
    build(server, pid, full=True)
    with index_db(root) as db:
        assert db.execute("SELECT MAX(hub) FROM vectors").fetchone()[0] < 1


def test_a_file_edited_again_and_again_is_not_measured_against_its_old_versions(server, project):
    """The watcher's builds keep a changed file's earlier vectors until a whole build drops
    them; the reference sample leaves them out, so a file being edited keeps its hubness."""
    from plugins.index import plugin
    pid, root = project
    build(server, pid)
    service = plugin._service(server.kernel)
    handle = server.kernel.projects.get(pid)
    tax = root / "shop" / "cart.py"
    text = tax.read_text()

    def hub_of_tax() -> float:
        with index_db(root) as db:
            return db.execute("SELECT v.hub FROM nodes n JOIN vectors v ON v.hash = n.embed_hash "
                              "WHERE n.name = 'compute_sales_tax'").fetchone()[0]

    for i in range(4):
        tax.write_text(text.replace("at a percentage rate.", f"at a percentage rate, edit {i}."))
        service.run_build(handle, paths={"shop/cart.py"}, trigger="watch")
    edited = hub_of_tax()
    build(server, pid, full=True)
    assert edited == pytest.approx(hub_of_tax(), abs=0.02)


def test_a_changed_hubness_reaches_the_next_search_and_weight_zero_is_the_cosine(server, project):
    from plugins.index import plugin
    pid, root = project
    build(server, pid)
    query = {"query": "send an e-mail message to someone", "mode": "semantic", "n": 1}
    first = server.post(f"/v1/projects/{pid}/search", query).json["results"][0]
    service = plugin._service(server.kernel)
    store = service.store(server.kernel.projects.get(pid))
    with index_db(root) as db:
        digest, hub = db.execute("SELECT v.hash, v.hub FROM nodes n JOIN vectors v ON "
                                 "v.hash = n.embed_hash WHERE n.id = ?", (first["id"],)).fetchone()
    store.put_hubs([(hub - 0.5, digest)])  # a new version: every process reloads its vectors
    again = server.post(f"/v1/projects/{pid}/search", query).json["results"][0]
    assert again["id"] == first["id"]
    assert again["score"] == pytest.approx(first["score"] + 0.3 * 0.5, abs=2e-6)
    plain = service.settings.model_copy(update={"hub_weight": 0.0})
    service.settings, kept = plain, service.settings
    try:
        cosine = server.post(f"/v1/projects/{pid}/search", query).json["results"][0]["score"]
    finally:
        service.settings = kept
    assert cosine == pytest.approx(again["score"] + 0.3 * (hub - 0.5), abs=2e-6)


def test_validate_finds_vectors_no_build_measured_and_measures_them(server, project):
    """An index made before hubness (or a build the model failed during) scores those
    vectors as plain cosines: validate says so, and its repair measures them."""
    pid, root = project
    build(server, pid)
    with index_db(root) as db:
        db.execute("UPDATE vectors SET hub = NULL")
        total = db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    url = f"/v1/projects/{pid}/validate"
    check = next(c for c in server.post(url, {}).json["checks"] if c["name"] == "vectors")
    assert not check["ok"] and f"{total} without their hubness" in check["detail"]
    fixed = next(c for c in server.post(url, {"write": True}).json["checks"]
                 if c["name"] == "vectors")
    assert fixed["ok"] and fixed["repaired"]
    with index_db(root) as db:
        assert db.execute("SELECT COUNT(*) FROM vectors WHERE hub IS NULL").fetchone()[0] == 0
