"""A build whose texts span many embedding chunks, in-process with the real model: chunks
are embedded on a background thread while parsing goes on, each distinct text once."""

from __future__ import annotations

import sqlite3

import pytest

from tests.plugins.index.conftest import FILES
from tests.support import make_kernel


@pytest.fixture
def service(tmp_path):
    from plugins.index import plugin
    kernel = make_kernel(tmp_path / "home", plugins=["index"])
    svc = plugin._service(kernel)
    svc.settings = svc.settings.model_copy(update={"embed_batch": 2})
    yield kernel, svc
    kernel.shutdown()


def test_chunks_overlap_parsing_and_every_text_gets_one_vector(service, tmp_path):
    kernel, svc = service
    root = tmp_path / "repo"
    for rel, text in FILES.items():
        if rel.endswith(".py"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    (root / "copy").mkdir()
    (root / "copy" / "prices.py").write_text(FILES["shop/prices.py"])  # the same texts again
    project, _ = kernel.projects.register(str(root))
    first = svc.run_build(project, trigger="test")
    db = sqlite3.connect(svc.db_path(project))
    distinct = db.execute("SELECT COUNT(DISTINCT embed_hash) FROM nodes").fetchone()[0]
    assert first["chunks_embedded"] == distinct > 4  # several chunks of 2, duplicates once
    assert db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] == distinct
    assert db.execute("SELECT COUNT(*) FROM nodes WHERE embed_hash IS NOT NULL AND embed_hash "
                      "NOT IN (SELECT hash FROM vectors)").fetchone()[0] == 0
    hits = svc.search(project, "tax owed on an amount", 3, "semantic", None)[0]
    assert hits[0]["label"] == "compute_sales_tax"
    again = svc.run_build(project, full=True, trigger="test")
    assert (again["chunks_embedded"], again["vectors_reused"]) == (0, distinct)
