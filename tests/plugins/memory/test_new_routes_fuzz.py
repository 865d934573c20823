"""Property-based bodies and queries on the memory model v2 routes: bad input is a 4xx in the
error envelope, never a 500, and a refused request changes nothing."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.memory.conftest import Api

junk = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False),
                 st.text(max_size=12), st.lists(st.text(max_size=6), max_size=3),
                 st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=2))
words = st.sampled_from(["supersedes", "relates_to", "keep_newest", "manual", "fact", "episode",
                         "ALL", "open", "x", "", "decision", "0.5", "true"])
field = st.one_of(junk, words)


def bodies(*names: str):
    return st.fixed_dictionaries({}, optional={n: field for n in names})


ROUTES = [  # (method, path under the project, body fields or None for a query)
    ("POST", "memories/{a}/links", bodies("target", "type", "note")),
    ("PUT", "memories/decay-policy", bodies("enabled", "half_life_days", "access_boost",
                                            "archive_threshold")),
    ("POST", "memories/decay?wait=true", bodies("dry_run")),
    ("POST", "memories/consolidate?wait=true", bodies("dry_run", "kinds", "threshold")),
    ("PUT", "contradictions/config", bodies("check_on_store", "threshold", "auto_resolve")),
    ("POST", "contradictions/c_none/resolve", bodies("strategy", "title", "rationale")),
    ("PUT", "collections/{name}", bodies("filters", "description")),
    ("POST", "memories/{a}/tags", bodies("tags")),
    ("POST", "memories/{a}/feedback", bodies("signal", "helpful", "note")),
    ("POST", "memories/search", bodies("query", "kinds", "expand", "collection", "mode")),
    ("POST", "memories/batch", bodies("items", "atomic")),
    ("GET", "memories/{a}/graph", None),
    ("DELETE", "memories/{a}/links", None),
    ("GET", "contradictions", None),
    ("GET", "memories/tags", None),
    ("GET", "memories/export", None),
]
QUERY_NAMES = {"memories/{a}/graph": ("depth",), "memories/{a}/links": ("target", "type"),
               "contradictions": ("status", "memory_id", "limit", "cursor"),
               "memories/tags": ("status",), "memories/export": ("format",)}


@pytest.fixture(scope="module")
def project(server, tmp_path_factory):
    api = Api(server, tmp_path_factory.mktemp("fuzz"))
    a = api.create(title="Fuzz target A")
    b = api.create(title="Fuzz target B", id="x")
    return api, a["id"], b["id"]


@pytest.mark.parametrize("method, path, strategy", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_random_input_never_500s(project, method, path, strategy):
    api, a, _ = project
    template = f"/v1/projects/{api.pid}/{path}"
    names = QUERY_NAMES.get(path, ())

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy if strategy is not None else st.fixed_dictionaries(
        {}, optional={n: st.one_of(st.text(max_size=8), words) for n in names}),
        st.text(max_size=10))
    def check(data, name):
        url = template.format(a=a, name=urllib.parse.quote(name or "n", safe=""))
        if strategy is None:
            url += "?" + urllib.parse.urlencode(data)
            r = api.server.request(method, url)
        else:
            r = api.server.request(method, url, json_body=data)
        assert r.status < 500, (url, data, r.body)
        if r.status >= 400:
            assert set(r.error) == {"code", "message", "status", "request_id", "details"}

    check()
    assert api.server.get(api.url(a)).status == 200
