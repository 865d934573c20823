"""Without a usable model: the build indexes keywords only, semantic search is 503
``semantic_unavailable``, hybrid falls back to keyword results with a notice, and query
still answers."""

from __future__ import annotations

from tests.plugins.index.conftest import build, write_repo
from tests.support import LocalServer


def test_keyword_only_without_a_model(tmp_path, monkeypatch):
    root = write_repo(tmp_path / "repo", tmp_path / "outside")
    empty = tmp_path / "no-model"
    empty.mkdir()
    monkeypatch.setenv("NEURALMIND_MODEL_DIR", str(empty))
    with LocalServer(tmp_path / "home", plugins=["auth", "index"]) as server:
        pid = server.register(root)
        result = build(server, pid)
        assert result["semantic"] is False and result["chunks_embedded"] == 0
        assert result["nodes"] > 10
        r = server.post(f"/v1/projects/{pid}/search", {"query": "sales tax", "mode": "semantic"})
        assert r.status == 503 and r.error["code"] == "semantic_unavailable"
        r = server.post(f"/v1/projects/{pid}/search", {"query": "sales tax", "mode": "hybrid"})
        assert r.status == 200 and r.json["notice"].startswith("keyword results only")
        assert r.json["results"][0]["label"] == "compute_sales_tax"
        # a name alone: the fallback answers what keyword search answers, definitions lifted
        named = [server.post(f"/v1/projects/{pid}/search", {"query": "round_money", "mode": mode})
                 .json["results"] for mode in ("hybrid", "keyword")]
        assert named[0] == named[1] and named[0][0]["label"] == "round_money"
        q = server.post(f"/v1/projects/{pid}/query", {"question": "sales tax", "trace": True}).json
        assert q["layers_used"][0] == "L0" and "compute_sales_tax" in q["context"]
        assert q["trace"]["notice"].startswith("keyword results only")
        assert server.get(f"/v1/projects/{pid}/stats").json["vectors"] == 0
