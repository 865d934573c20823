"""A query that is one identifier finds the definitions of that name first, in keyword and
hybrid search: the keyword leg splits the name into its words and BM25 favours whatever
repeats them — tests, short helpers — over a long class, so `url_for` listed its own
definitions 19th and 45th on flask, and `class Flask` not in the top 50."""

from __future__ import annotations

import pytest

from tests.plugins.index.conftest import built

TESTS = "".join(f"def test_url_for_{i}(app):\n    assert app.url_for('x{i}') == url_for('x{i}')\n"
                f"    assert url_for('y') != url_for('z')\n\n\n" for i in range(12))
FILES = {
    "src/shop/helpers.py": 'def url_for(endpoint, **values):\n    """Build a URL."""\n'
                           "    return '/' + endpoint\n",
    "src/shop/app.py": "class App:\n" + "".join(
        f"    def handler_{i}(self):\n        '''Serve page {i} of the shop.'''\n"
        f"        return self.render({i})\n\n" for i in range(30))
        + "    def url_for(self, endpoint):\n        return '/app/' + endpoint\n",
    "src/shop/config.py": "class Config(dict):\n    '''Settings.'''\n" + "".join(
        f"    def setting_{i}(self):\n        return self.get('s{i}')\n\n" for i in range(30)),
    "tests/test_urls.py": "from shop.helpers import url_for\n\n\n" + TESTS,
    "tests/test_config.py": "".join(f"def test_config_{i}(config):\n    config.config = "
                                    f"config.config_of(config)\n\n\n" for i in range(12)),
}


@pytest.fixture(scope="module")
def shop(server, tmp_path_factory):
    return built(server, tmp_path_factory.mktemp("shop"), FILES)


def labels(server, pid: str, query: str, mode: str, n: int = 5) -> list[str]:
    r = server.post(f"/v1/projects/{pid}/search", {"query": query, "mode": mode, "n": n})
    assert r.status == 200, r.body
    scores = [h["score"] for h in r.json["results"]]
    assert scores == sorted(scores, reverse=True)  # the lifted ones above, in order
    return [h["label"] for h in r.json["results"]]


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_the_definitions_of_a_name_come_first(server, shop, mode):
    assert sorted(labels(server, shop, "url_for", mode)[:2]) == ["App.url_for", "url_for"]
    assert labels(server, shop, "App.url_for", mode)[0] == "App.url_for"  # under the rest
    assert labels(server, shop, " Config ", mode)[0] == "Config"  # a long class
    assert labels(server, shop, "config", mode)[0] == "src.shop.config"  # its module, as written
    assert sorted(labels(server, shop, "URL_FOR", mode)[:2]) == ["App.url_for", "url_for"]


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
@pytest.mark.parametrize("query, first", [
    ("Config()", ["Config"]), ("`Config`", ["Config"]), ("Config:", ["Config"]),
    ("class Config", ["Config"]), ("class Config(dict):", ["Config"]),
    ("`Config()`", ["Config"]), ("def url_for", ["App.url_for", "url_for"]),
    ("async def App.url_for(self, endpoint):", ["App.url_for"]),
    ("shop.config.Config()", ["Config"])])  # a module path: every definition of its last part
def test_a_name_wrapped_as_code_names_it(server, shop, mode, query, first):
    """`CompiledRouter()`, backticks, a colon or `class `/`def ` before it took the name out
    of the lookup: on falcon its class fell from first to 16th."""
    r = server.post(f"/v1/projects/{shop}/search", {"query": query, "mode": mode, "n": 5})
    top = r.json["results"]
    assert sorted(h["label"] for h in top[:len(first)]) == first
    if mode == "hybrid":  # lifted above every blended score
        assert all(h["score"] > 1 for h in top[:len(first)])


def test_a_query_in_words_and_semantic_search_are_ranked_as_before(server, shop):
    """Words are not a name, and semantic search stays the model's alone."""
    r = server.post(f"/v1/projects/{shop}/search", {"query": "url_for", "mode": "semantic"})
    assert all(h["score"] <= 1 for h in r.json["results"])
    r = server.post(f"/v1/projects/{shop}/search", {"query": "url for", "mode": "hybrid"})
    assert all(h["score"] <= 1 for h in r.json["results"])
