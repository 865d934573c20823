"""Search through HTTP with the packaged model: modes, paraphrase, filters, views, ranking."""

from __future__ import annotations

import pytest

from tests.plugins.memory.conftest import Api


@pytest.fixture(scope="module")
def corpus(server, tmp_path_factory):
    """A project with a WAL decision that shares no word with 'sqlite concurrency', among others."""
    api = Api(server, tmp_path_factory.mktemp("search-proj"))
    wal = api.create(title="Write-ahead logging for the synapse store",
                     rationale="Hooks, the watcher and the MCP server all write at the same time; "
                               "journal mode WAL lets readers proceed while one writer commits.",
                     files_affected=["neuralmind/synapses.py"], tags=["storage"],
                     decision_type="ARCHITECTURE")
    others = [api.create(title=t, rationale=r, files_affected=f, tags=g, decision_type=d,
                         author=a)
              for t, r, f, g, d, a in [
                  ("Pin numpy below 3", "numpy 3 changes the dtype promotion rules we rely on.",
                   ["pyproject.toml"], ["deps"], "DEPENDENCY", "ana"),
                  ("Retry flaky network tests three times",
                   "CI runners drop connections; a retry keeps the signal honest.",
                   ["tests/conftest.py"], ["ci"], "TEST", "bo"),
                  ("Split the parser into lexer and grammar modules",
                   "The single parser module grew past two thousand lines.",
                   ["neuralmind/parser.py"], ["refactor"], "REFACTOR", "ana"),
                  ("Escape HTML in rendered templates",
                   "Unescaped user names produced a cross-site scripting hole.",
                   ["neuralmind/render.py"], ["security"], "BUGFIX", "bo")]]
    return api, wal, others


def ids(result) -> list[str]:
    return [r["id"] for r in result["results"]]


def test_paraphrase_found_by_semantic_and_hybrid_not_keyword(corpus):
    api, wal, _ = corpus
    assert api.search("sqlite concurrency", mode="keyword")["results"] == []
    semantic = api.search("sqlite concurrency", mode="semantic")
    assert ids(semantic)[0] == wal["id"]
    hybrid = api.search("sqlite concurrency")
    assert hybrid["mode"] == "hybrid" and ids(hybrid)[0] == wal["id"]
    assert hybrid.get("notice") is None
    assert all(isinstance(r["score"], float) for r in hybrid["results"])


def test_keyword_uses_stemming_and_prefixes(corpus):
    api, wal, others = corpus
    assert ids(api.search("committing writers", mode="keyword"))[0] == wal["id"]
    assert ids(api.search("tmpl escap", mode="keyword")) == [others[3]["id"]]
    assert ids(api.search("the and of", mode="keyword")) != []  # all stopwords: kept


def test_semantic_floor_drops_unanswerable_questions(corpus):
    api, _, _ = corpus
    assert api.search("recipe for banana bread with walnuts", mode="semantic")["results"] == []


def test_search_filters_and_compact_view(corpus):
    api, wal, others = corpus
    r = api.search("module", type="refactor", view="compact")
    assert ids(r) == [others[2]["id"]]
    assert set(r["results"][0]) == {"id", "title", "status", "kind", "score", "files_affected",
                                    "linked_from"}
    assert ids(api.search("numpy tests parser", mode="keyword", author="bo")) == [others[1]["id"]]
    assert ids(api.search("storage", file=["neuralmind/synapses.py"])) == [wal["id"]]
    assert ids(api.search("XSS vulnerability in web pages", tag=["security", "ci"], mode="semantic")) == [others[3]["id"]]
    assert api.search("storage", min_confidence=1.0, status="invalidated")["results"] == []
    r = api.server.post(api.url(tail="search"), {"query": "x", "limit": 26})
    assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["body", "limit"]
    for bad in ({"query": ""}, {"query": "x", "mode": "fuzzy"}, {"query": "x", "view": "tiny"},
                {"query": "x", "status": "GONE"}):
        assert api.server.post(api.url(tail="search"), bad).status == 422, bad


def test_invalidated_records_leave_default_search(corpus, server, tmp_path):
    api = Api(server, tmp_path)
    mid = api.create(title="Vendor the tokenizer", rationale="Offline installs")["id"]
    assert ids(api.search("tokenizer vendor", mode="semantic")) == [mid]
    api.server.post(api.url(mid, "invalidate"), {"reason": "packaged now"})
    assert api.search("tokenizer vendor")["results"] == []
    assert ids(api.search("tokenizer vendor", status="ALL")) == [mid]
    assert ids(api.search("tokenizer vendor", status="invalidated", mode="keyword")) == [mid]


def test_feedback_moves_hybrid_ranking(server, tmp_path):
    api = Api(server, tmp_path)
    a = api.create(title="Cache compiled regular expressions", rationale="Hot path in the lexer")
    b = api.create(title="Cache compiled regular expressions", rationale="Hot path in the lexer")
    before = api.search("cache compiled regular expressions")
    assert set(ids(before)[:2]) == {a["id"], b["id"]}
    first = ids(before)[0]
    for _ in range(5):
        api.server.post(api.url(first, "feedback"), {"helpful": False})
    after = api.search("cache compiled regular expressions")
    assert ids(after)[0] != first and first in ids(after)
