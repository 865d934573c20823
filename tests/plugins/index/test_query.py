"""Search and query on a built repository: modes, budgets, layers, wakeup, stats."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuralmind.client import NeuralMindClient, ValidationFailed
from tests.plugins.index.conftest import build, write_repo


@pytest.fixture(scope="module")
def built(server, tmp_path_factory):
    base = tmp_path_factory.mktemp("q")
    root = write_repo(base / "repo", base / "outside")
    pid = server.register(root)
    build(server, pid)
    return pid, root


def search(server, pid, **body):
    r = server.post(f"/v1/projects/{pid}/search", body)
    assert r.status == 200, r.body
    return r.json


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_function_is_found_by_a_description_of_what_it_does(server, built, mode):
    pid, _ = built
    out = search(server, pid, query="calculate how much tax is due on a purchase", mode=mode, n=3)
    assert out["results"][0]["label"] == "compute_sales_tax"
    assert out["results"][0]["source_file"] == "shop/cart.py" and out["results"][0]["line"] == 16
    out = search(server, pid, query="send an e-mail message to someone", mode=mode, n=3)
    assert out["results"][0]["label"] == "sendEmail"


def test_keyword_splits_identifiers_and_stems(server, built):
    pid, _ = built
    out = search(server, pid, query="parse config", mode="keyword")
    assert out["results"][0]["label"] == "parseConfigFile"
    out = search(server, pid, query="rounding values", mode="keyword")
    assert out["results"][0]["label"] == "round_money"


def test_file_type_filter_and_result_shape(server, built):
    pid, _ = built
    out = search(server, pid, query="install the shop", mode="hybrid", file_type="docs", n=5)
    assert out["results"] and all(h["file_type"] == "docs" for h in out["results"])
    assert set(out["results"][0]) == {"id", "label", "kind", "file_type", "source_file", "line",
                                      "score", "source"}
    assert out["results"][0]["source"] == "repo"
    assert out["project_id"] == pid and out["query"] == "install the shop"


def test_bad_search_bodies_are_422(server, built):
    pid, _ = built
    for body in ({"query": ""}, {"query": "x", "n": 51}, {"query": "x", "mode": "fuzzy"},
                 {"query": "x", "file_type": "video"}, {"n": 3}):
        r = server.post(f"/v1/projects/{pid}/search", body)
        assert r.status == 422 and r.error["code"] == "validation_error", body


def test_a_blank_query_or_question_is_refused_as_blank(server, built):
    """Three spaces were answered `String should have at least 1 character` (the strip ran
    first): the field is named blank, over HTTP and in what the client (the CLI) prints."""
    pid, _ = built
    for route, field in (("search", "query"), ("query", "question")):
        r = server.post(f"/v1/projects/{pid}/{route}", {field: " \t\n "})
        assert r.status == 422 and r.error["details"]["errors"] == [
            {"loc": ["body", field], "msg": "is blank: it holds only whitespace",
             "type": "value_error"}], r.body
    project = NeuralMindClient(server.url, token=server.token).project(pid)
    for ask in (lambda: project.query("   "), lambda: project.search("   ")):
        with pytest.raises(ValidationFailed) as refused:
            ask()
        assert ": is blank: it holds only whitespace (422 validation_error" in str(refused.value)
    assert search(server, pid, query="  parse config ", mode="keyword")["query"] == "parse config"


def test_query_has_all_layers_and_stays_in_the_default_budget(server, built):
    pid, _ = built
    r = server.post(f"/v1/projects/{pid}/query", {"question": "how is sales tax computed?",
                                                  "trace": True})
    assert r.status == 200, r.body
    out = r.json
    assert out["layers_used"] == ["L0", "L1", "L2", "L3"]
    t = out["tokens"]
    assert t["total"] == t["l0"] + t["l1"] + t["l2"] + t["l3"] <= 8000
    assert (len(out["context"]) + 3) // 4 <= t["total"]
    assert "Demo shop" in out["context"] and "A small shop backend" in out["context"]
    assert "shop/cart.py:16 compute_sales_tax" in out["context"]
    assert "called by" in out["context"] or "calls:" in out["context"]
    assert out["search_hits"] > 0 and out["trace"]["hits"][0]["label"] == "compute_sales_tax"
    assert out["reduction_ratio"] > 0


def test_only_what_can_be_called_is_said_to_be_called(server, tmp_path):
    """Callers are looked up by name; a markdown heading named like a called function is not
    what the call reaches."""
    (tmp_path / "cart.py").write_text('def total(items):\n    """Sum the prices."""\n'
                                      "    return sum(items)\n\n\n"
                                      "def grand_total(items, tax):\n    return total(items) + tax\n")
    (tmp_path / "README.md").write_text("# total\n\nHow the total of a cart is summed.\n")
    pid = server.register(tmp_path)
    build(server, pid)
    r = server.post(f"/v1/projects/{pid}/query", {"question": "how is the total summed?"})
    assert r.status == 200, r.body
    lines = r.json["context"].splitlines()
    said = {line: lines[i + 1].strip() for i, line in enumerate(lines[:-1])}
    assert said["total (cart.py:1)"].startswith("called by: grand_total (cart.py:6)")
    assert not any(line.startswith("total (README.md") and after.startswith("called by")
                   for line, after in said.items())


def test_a_question_holding_nul_is_refused_as_every_text_field_is(server, built):
    """A question is a text field like any (kernel text()): a NUL character is a 422."""
    pid, _ = built
    r = server.post(f"/v1/projects/{pid}/query", {"question": "a\x00b"})
    assert r.status == 422 and r.error["details"]["errors"][0]["msg"] == \
        "text cannot contain a NUL character"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=256, max_value=3000),
       question=st.text(min_size=1, max_size=80).filter(
           lambda s: s.strip() and "\x00" not in s))
def test_a_query_never_exceeds_its_budget_and_always_has_l0(server, built, budget, question):
    pid, _ = built
    r = server.post(f"/v1/projects/{pid}/query", {"question": question,
                                                  "context_budget": budget})
    assert r.status == 200, r.body
    out = r.json
    assert out["tokens"]["total"] <= budget
    assert (len(out["context"]) + 3) // 4 <= budget
    assert out["layers_used"][0] == "L0" and out["tokens"]["l0"] > 0


def test_small_budgets_trim_l3_then_l2_then_l1_and_keep_the_best_snippet(server, built):
    pid, _ = built
    seen = []
    for budget in (8000, 700, 400, 256):
        out = server.post(f"/v1/projects/{pid}/query", {"question": "cart total",
                                                        "context_budget": budget}).json
        seen.append(out["layers_used"])
        assert out["tokens"]["total"] <= budget
        assert out["tokens"]["l3"] > 0  # the best hit's snippet, whatever else goes
    assert seen[0] == ["L0", "L1", "L2", "L3"]
    for used in seen:  # below the best snippet, a layer only goes after every layer below it
        order = ["L0", "L1", "L2"]
        assert used[-1] == "L3" and used[:-1] == order[:len(used) - 1]
    r = server.post(f"/v1/projects/{pid}/query", {"question": "x", "context_budget": 10})
    assert r.status == 422


@pytest.fixture(scope="module")
def big_layout(server, tmp_path_factory):
    """A project whose layout (L1) fills its 600 tokens: 60 small modules beside the shop."""
    base = tmp_path_factory.mktemp("layout")
    root = write_repo(base / "repo", base / "outside")
    (root / "pkg").mkdir()
    for i in range(60):
        (root / f"pkg/mod{i:02d}.py").write_text(
            f'"""Module {i} handles part {i} of the order pipeline."""\n\n'
            f'def step_{i}(order):\n    """Run step {i}."""\n    return order\n')
    pid = server.register(root)
    build(server, pid)
    return pid


@pytest.mark.parametrize("budget", [1200, 700, 400])
def test_a_small_budget_keeps_the_best_hits_snippet(server, big_layout, budget):
    """Issue 13 item 18: the layout took the budget and every snippet was dropped (L3 = 0);
    the best hit's code is what a question needs most, so it is kept whenever it fits."""
    out = server.post(f"/v1/projects/{big_layout}/query",
                      {"question": "how is sales tax computed?", "context_budget": budget,
                       "trace": True}).json
    assert out["trace"]["hits"][0]["label"] == "compute_sales_tax"
    assert out["tokens"]["l3"] > 0 and out["tokens"]["total"] <= budget
    assert "### shop/cart.py:16 compute_sales_tax (function)" in out["context"]
    assert "return round_money(amount * rate / 100)" in out["context"]
    assert out["layers_used"][0] == "L0" and out["tokens"]["l1"] > 0


def test_wakeup_is_l0_l1_and_warns_when_stale(server, built):
    pid, root = built
    out = server.get(f"/v1/projects/{pid}/wakeup").json
    assert out["layers_used"] == ["L0", "L1"] and out["warning"] is None
    assert out["tokens"]["l2"] == out["tokens"]["l3"] == 0
    assert "shop/cart.py" in out["context"]
    (root / "notes.txt").write_text("changed after the build\n")
    out = server.get(f"/v1/projects/{pid}/wakeup").json
    assert "1 indexed file(s) changed" in out["warning"]
    build(server, pid)
    assert server.get(f"/v1/projects/{pid}/wakeup").json["warning"] is None


def test_stats_shape(server, built):
    pid, _ = built
    s = server.get(f"/v1/projects/{pid}/stats").json
    assert s["files"] == sum(v["files"] for v in s["languages"].values())
    assert s["nodes"] > s["files"] and s["vectors"] > 0 and s["index_bytes"] > 0
    assert s["model_id"].startswith("all-MiniLM-L6-v2") and s["token_counter"]
