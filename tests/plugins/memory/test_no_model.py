"""Without an embedding model: writes work, hybrid falls back to keyword with a notice,
semantic answers 503 ``semantic_unavailable``."""

from __future__ import annotations

from tests.plugins.memory.conftest import Api, start


def test_search_without_a_model(tmp_path):
    srv = start(tmp_path / "home", config=f'[embeddings]\nmodel_dir = "{tmp_path / "no-model"}"\n')
    try:
        project = tmp_path / "proj"
        project.mkdir()
        api = Api(srv, project)
        mid = api.create(title="Retry uploads with backoff", rationale="Flaky storage API")["id"]
        hybrid = api.search("retry uploads")
        assert [r["id"] for r in hybrid["results"]] == [mid]
        assert "semantic search is unavailable" in hybrid["notice"]
        r = srv.post(api.url(tail="search"), {"query": "retry", "mode": "semantic"})
        assert r.status == 503 and r.error["code"] == "semantic_unavailable"
        r = srv.post(api.base + "?duplicates=hybrid", {"title": "Retry uploads", "rationale": "x"})
        assert r.status == 201 and [d["id"] for d in r.json["possible_duplicates"]] == [mid]
    finally:
        srv.stop()
