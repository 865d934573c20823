"""Search through HTTP with the packaged model: modes, paraphrase, filters, views, ranking."""

from __future__ import annotations

import pytest

from tests.plugins.memory.conftest import Api


@pytest.fixture(scope="module")
def corpus(server, tmp_path_factory):
    """A project of five decisions; the XSS one shares no word with 'XSS vulnerability in web
    pages' (cosine ~0.5 with the packaged model)."""
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


def test_paraphrase_without_shared_words_found_by_semantic_and_hybrid(corpus):
    api, _, others = corpus
    xss = others[3]["id"]
    assert api.search("XSS vulnerability in web pages", mode="keyword")["results"] == []
    semantic = api.search("XSS vulnerability in web pages", mode="semantic")
    assert ids(semantic)[0] == xss and 0.35 <= semantic["results"][0]["score"] <= 1.0
    hybrid = api.search("XSS vulnerability in web pages")
    assert hybrid["mode"] == "hybrid" and ids(hybrid)[0] == xss
    assert hybrid.get("notice") is None
    assert all(0.0 < r["score"] <= 1.0 for r in hybrid["results"])


NOTHING_RELEVANT = ("nothing relevant found: no record is close enough to the query in "
                    "meaning or words")


def test_nothing_found_in_every_mode_while_a_real_match_is_kept(corpus):
    """'lexer' is a word of the parser decision, but the rest of the question is about
    nothing here: the floor answers nothing in every mode (keyword mode asks the semantic
    leg for the best cosine, since the hit holds a small share of the query), and its notice
    says so (it was null, while the docs said it tells that nothing relevant was found) — or
    that there was nothing to search, when no record passes the filters."""
    api, _, others = corpus
    for mode in ("keyword", "semantic", "hybrid"):
        for query in ("holiday plans in the lexer mountains", "recipe for banana bread with walnuts"):
            found = api.search(query, mode=mode)
            assert (found["results"], found["notice"]) == ([], NOTHING_RELEVANT), (mode, query)
        found = api.search("lexer and grammar modules", mode=mode)
        assert ids(found)[0] == others[2]["id"] and found["notice"] is None, mode
        found = api.search("lexer and grammar modules", mode=mode, status="invalidated")
        assert (found["results"], found["notice"]) == ([], "nothing to search: no record "
                                                           "matches the filters (status "
                                                           "INVALIDATED)"), mode


def test_scores_read_on_a_scale_per_mode(corpus, server, tmp_path):
    api, _, others = corpus
    keyword = api.search("Pin numpy below 3", mode="keyword")["results"]
    assert keyword[0]["id"] == others[0]["id"] and keyword[0]["score"] == 1.0
    half = api.search("numpy grammar", mode="keyword")["results"]
    assert {r["id"] for r in half} == {others[0]["id"], others[2]["id"]}
    assert all(0.3 < r["score"] < 0.7 for r in half)  # each holds one of two rare words
    hybrid = api.search("pin numpy below version 3")["results"]
    assert hybrid[0]["id"] == others[0]["id"] and 0.4 < hybrid[0]["score"] < 1.0  # probability × 0.94 (fresh)
    dup = Api(server, tmp_path)
    first = dup.create(title="Vendor the tokenizer for offline installs", rationale="No hub")
    again = dup.create(title="Vendor the tokenizer for offline installs", rationale="Again")
    assert again["possible_duplicates"][0] == {"id": first["id"], "title": first["title"],
                                               "status": "ACTIVE", "score": 1.0}
    r = dup.server.post(dup.url() + "?duplicates=hybrid",
                        {"title": "Vendor the tokenizer for offline installs", "rationale": "x"})
    assert r.status == 201 and 0.0 < r.json["possible_duplicates"][0]["score"] <= 1.0


def test_keyword_uses_stemming_and_prefixes(corpus):
    api, wal, others = corpus
    assert ids(api.search("committing writers", mode="keyword"))[0] == wal["id"]
    assert ids(api.search("templ escap", mode="keyword")) == [others[3]["id"]]
    assert wal["id"] in ids(api.search("the and", mode="keyword"))  # all stopwords: kept


def test_semantic_floor_drops_unanswerable_questions(corpus):
    api, _, _ = corpus
    assert api.search("recipe for banana bread with walnuts", mode="semantic")["results"] == []


def test_search_filters_and_compact_view(corpus):
    api, wal, others = corpus
    r = api.search("module", type="refactor", view="compact")
    assert ids(r) == [others[2]["id"]]
    assert set(r["results"][0]) == {"id", "title", "status", "kind", "score", "files_affected",
                                    "linked_from"}
    assert ids(api.search("retry flaky tests parser", mode="keyword", author="bo")) == [others[1]["id"]]
    assert ids(api.search("storage", file=["neuralmind/synapses.py"])) == [wal["id"]]
    assert ids(api.search("XSS vulnerability in web pages", tag=["security", "ci"], mode="semantic")) == [others[3]["id"]]
    assert api.search("storage", min_confidence=1.0, status="invalidated")["results"] == []
    r = api.server.post(api.url(tail="search"), {"query": "x", "limit": 26})
    assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["body", "limit"]
    for bad in ({"query": ""}, {"query": "x", "mode": "fuzzy"}, {"query": "x", "view": "tiny"},
                {"query": "x", "status": "GONE"}):
        assert api.server.post(api.url(tail="search"), bad).status == 422, bad
    # the query: 1–2,000 characters once trimmed, not blank (docs/memory.md)
    for query in (" \n\t ", "x" * 2_001):
        r = api.server.post(api.url(tail="search"), {"query": query})
        assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["body", "query"]
    assert api.search(" " + "x" * 2_000 + " ")["query"] == "x" * 2_000


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


@pytest.fixture(scope="module")
def names(server, tmp_path_factory):
    """Records naming code: a dotted name whose last part is a stopword, its first part in
    other records, single letters."""
    api = Api(server, tmp_path_factory.mktemp("names-proj"))
    made = {key: api.create(title=t, rationale=r)["id"] for key, t, r in [
        ("hooks", "Hooks via @falcon.before decorator",
         "@falcon.before(validate_token) runs before the responder; @falcon.after for "
         "post-processing. Prefer middleware for cross-cutting concerns."),
        ("alias", "Deprecated: falcon.API alias",
         "falcon.API was renamed falcon.App in 3.0 and removed in 4.0; replace every "
         "falcon.API() call."),
        ("pin", "Pin falcon to v4.0.2", "Version 4.0.2 fixed the multipart parser regression; "
         "test on Python 3.11 before an upgrade."),
        ("abc", "a.b.c dotted config keys",
         "Settings use dotted keys like server.http.port (a.b.c); nested tables map to them."),
        ("self", "Use self.x attributes sparingly in resources",
         "Resources are shared between requests; per-request state on self.x races."),
        ("testing", "Testing with falcon.testing.TestClient",
         "Use TestClient(app).simulate_get('/path') instead of a server; "
         "simulate_request handles headers and bodies.")]}
    return api, made


@pytest.mark.parametrize("query", ["falcon.before", "@falcon.before", "@falcon.after"])
def test_a_dotted_name_keeps_its_stopword_and_ranks_the_record_holding_it(names, query):
    """`before`, `after` are stopwords of prose, not of `falcon.before`: dropped, the query was
    `falcon`, every falcon record tied at 1.0 in keyword mode and hybrid ranked the alias
    first. The name counts as written, so the one record holding it wins."""
    api, made = names
    keyword = api.search(query, mode="keyword")["results"]
    assert keyword[0]["id"] == made["hooks"] and keyword[0]["score"] == 1.0
    assert all(r["score"] < 1.0 for r in keyword[1:]) and len(keyword) > 1
    assert ids(api.search(query))[0] == made["hooks"]


def test_single_letters_are_words_not_prefixes(names):
    """A single letter prefix-matched nearly every record, each at 1.0 (never floored), and
    made `a.b.c`'s own record rank third; hybrid's floor read it so too."""
    api, made = names
    assert ids(api.search("a.b.c", mode="keyword"))[0] == made["abc"]
    assert ids(api.search("x", mode="keyword")) == [made["self"]]  # self.x
    for mode in ("keyword", "hybrid"):  # "e": no record's word, so the floor answers nothing
        assert api.search("é", mode=mode)["results"] == [], mode
    assert ids(api.search("self.x", mode="keyword"))[0] == made["self"]


@pytest.mark.parametrize("name", ["author", "agent", "session_id"])
def test_an_empty_filter_matches_the_empty_value_in_every_mode(server, tmp_path, name):
    """"" is a value a record holds (create keeps it); semantic mode (and hybrid's semantic
    leg) dropped it and brought back the records that have none."""
    api = Api(server, tmp_path)
    blank = api.create(title="Wombat cache policy", rationale="Evict wombats hourly.",
                       **{name: ""})["id"]
    api.create(title="Wombat cache policy", rationale="Evict wombats hourly, too.")
    api.create(title="Wombat cache policy", rationale="Evict wombats daily.", **{name: "ana"})
    for mode in ("keyword", "semantic", "hybrid"):
        assert ids(api.search("wombat cache", mode=mode, **{name: ""})) == [blank], mode
    listed = api.server.get(api.url() + f"?{name}=").json["items"]
    assert [r["id"] for r in listed] == [blank]


def test_kind_and_kinds_both_filter_search_and_are_published(server, tmp_path):
    """The docs name `kind`; the OpenAPI document published only `kinds`, so MCP's recall and
    the Python client, which read it, refused `kind`. Both are fields now."""
    api = Api(server, tmp_path)
    decision = api.create(title="Write-ahead logging", rationale="journal mode WAL")["id"]
    fact = api.create(title="Write-ahead logging is on", rationale="journal mode WAL",
                      kind="fact")["id"]
    for body in ({"kind": ["fact"]}, {"kinds": ["fact"]}, {"kind": ["fact"], "kinds": ["fact"]}):
        assert ids(api.search("write-ahead logging", mode="keyword", **body)) == [fact], body
    both = api.search("write-ahead logging", mode="keyword", kind=["fact"], kinds=["decision"])
    assert set(ids(both)) == {fact, decision}
    schema = api.server.get("/v1/openapi.json").json["components"]["schemas"]["SearchIn"]
    assert {"kind", "kinds"} <= set(schema["properties"])
