"""Learned links between files through the routes: activity, query and search learning,
feedback, decay, next with its reasons, synapse stats and savings — and the rules of the
learning itself on a kernel in this process (batched writes, half-life, the file cap)."""

from __future__ import annotations

import subprocess
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.index.conftest import build
from tests.plugins.index.test_graph import write
from tests.support import LocalServer, make_kernel, run_cli

FILES = {
    "shop/cart.py": "from shop.prices import round_money\n\n\ndef total(items):\n"
                    "    return round_money(sum(items))\n",
    "shop/prices.py": "def round_money(value):\n    return round(value, 2)\n",
    "shop/tax.py": 'def sales_tax(amount):\n    """Tax owed on an amount."""\n'
                   '    return amount * 0.2\n',
    "docs/pricing.md": "# Pricing\n\nHow carts are priced.\n",
    "README.md": "# Shop\n\nA shop.\n",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("learning")
    with LocalServer(base / "home", plugins=["auth", "index", "memory"]) as server:
        pid = server.register(write(base / "repo", FILES))
        build(server, pid)
        yield server, pid


def synaptic(server, pid, path):
    r = server.get(f"/v1/projects/{pid}/neighbors/synaptic?file={urllib.parse.quote(path)}")
    assert r.status == 200, r.body
    return {n["file"]: n for n in r.json["neighbors"]}


def test_activity_links_files_and_a_session_links_calls(served):
    server, pid = served
    base = f"/v1/projects/{pid}"
    r = server.post(base + "/activity", {"files": ["shop/tax.py", "docs/pricing.md"],
                                         "kind": "edit", "session": "s1"})
    assert r.status == 200, r.body
    assert r.json == {"project_id": pid, "kind": "edit", "files": 2, "pairs": 1,
                      "session": "s1", "learning": True, "not_indexed": []}
    links = synaptic(server, pid, "shop/tax.py")
    assert links["docs/pricing.md"]["weight"] == pytest.approx(0.2, abs=1e-3)  # edit rate
    assert links["docs/pricing.md"]["count"] == 1 and links["docs/pricing.md"]["indexed"]
    # a later call of the same session links its file with the session's earlier ones
    r = server.post(base + "/activity", {"files": ["README.md"], "kind": "read", "session": "s1"})
    assert r.json["pairs"] == 2
    read = synaptic(server, pid, "README.md")["shop/tax.py"]["weight"]
    assert read == pytest.approx(0.05, abs=1e-3)
    # another session does not
    r = server.post(base + "/activity", {"files": ["shop/cart.py"], "kind": "read",
                                         "session": "s2"})
    assert r.json["pairs"] == 0


def test_a_session_or_task_holding_nul_is_refused(served):
    server, pid = served
    base = f"/v1/projects/{pid}"
    for route, body in (("activity", {"files": ["README.md"], "kind": "read", "session": "\x00"}),
                        ("next", {"files_open": ["README.md"], "task": "ship\x00it"})):
        r = server.post(f"{base}/{route}", body)
        assert r.status == 422 and r.error["details"]["errors"][0]["msg"] == \
            "text cannot contain a NUL character", route


def test_a_blank_task_is_refused_as_blank(served):
    """Whitespace was searched for, as if the agent had said what it was doing."""
    server, pid = served
    r = server.post(f"/v1/projects/{pid}/next", {"files_open": ["README.md"], "task": "   "})
    assert r.status == 422 and r.error["details"]["errors"][0]["msg"] == \
        "is blank: it holds only whitespace"


def test_files_the_index_does_not_hold_are_left_out_and_named(served):
    server, pid = served
    base = f"/v1/projects/{pid}"
    r = server.post(base + "/activity", {"files": ["shop/prices.py", "nope/x.py", "README.md"],
                                         "kind": "read", "session": "unknown"})
    assert r.status == 200, r.body
    assert (r.json["files"], r.json["pairs"], r.json["not_indexed"]) == (2, 1, ["nope/x.py"])
    r = server.post(base + "/activity", {"files": ["gone.py"], "kind": "edit",
                                         "session": "unknown"})
    assert (r.json["files"], r.json["pairs"], r.json["not_indexed"]) == (0, 0, ["gone.py"])
    r = server.post(base + "/feedback", {"file": "shop/prices.py", "signal": "helpful",
                                         "related": ["README.md", "nope/y.py"]})
    assert (r.json["related"], r.json["not_indexed"]) == (["README.md"], ["nope/y.py"])
    r = server.post(base + "/feedback", {"file": "nope/z.py", "signal": "helpful",
                                         "related": ["README.md"]})
    assert (r.json["pairs"], r.json["related"], r.json["not_indexed"]) == (0, [], ["nope/z.py"])
    assert not {"nope/x.py", "gone.py", "nope/y.py"} & set(synaptic(server, pid, "README.md"))
    checks = server.post(base + "/validate", {}).json["checks"]
    assert next(c for c in checks if c["name"] == "learned")["ok"], checks


def test_query_and_search_learn_and_count_savings(served):
    server, pid = served
    base = f"/v1/projects/{pid}"
    before = server.get(base + "/savings").json["total"]
    r = server.post(base + "/search", {"query": "round money total", "mode": "keyword", "n": 5})
    hits = {h["source_file"] for h in r.json["results"]}
    assert {"shop/cart.py", "shop/prices.py"} <= hits
    assert "shop/prices.py" in synaptic(server, pid, "shop/cart.py")  # a read learns (P7)
    server.post(base + "/query", {"question": "how is a cart total rounded?"})
    out = server.get(base + "/savings?days=7").json
    assert out["total"]["calls"] == before["calls"] + 2
    assert set(out["by_kind"]) == {"query", "search"}
    day = out["per_day"][-1]
    assert day["tokens_served"] > 0 and day["tokens_whole"] > 0
    assert day["tokens_saved"] == max(0, day["tokens_whole"] - day["tokens_served"])
    assert out["days"] == 7
    assert server.get(base + "/savings?days=0").status == 422


def test_feedback_strengthens_or_weakens_what_came_together(served):
    server, pid = served
    base = f"/v1/projects/{pid}"
    server.post(base + "/activity", {"files": ["shop/prices.py", "shop/tax.py"], "kind": "test",
                                     "session": "fb"})
    before = synaptic(server, pid, "shop/prices.py")["shop/tax.py"]["weight"]
    r = server.post(base + "/feedback", {"file": "shop/tax.py", "signal": "unhelpful",
                                         "related": ["shop/prices.py"]})
    assert r.status == 200 and r.json["pairs"] == 1 and r.json["related"] == ["shop/prices.py"]
    after = synaptic(server, pid, "shop/prices.py")["shop/tax.py"]["weight"]
    assert after == pytest.approx(before * 0.5, rel=0.01)  # unhelpful rate 0.5
    doc = server.get(base + "/documents?path=shop/tax.py").json
    r = server.post(base + "/feedback", {"node": doc["nodes"][1]["id"], "signal": "helpful"})
    assert r.json["file"] == "shop/tax.py" and r.json["pairs"] >= 1  # its last activation
    assert synaptic(server, pid, "shop/prices.py")["shop/tax.py"]["weight"] > after
    for body in ({"signal": "helpful"}, {"file": "a", "node": "b", "signal": "helpful"},
                 {"file": "shop/tax.py", "signal": "meh"}):
        assert server.post(base + "/feedback", body).status == 422, body
    r = server.post(base + "/feedback", {"node": "n_nothing", "signal": "helpful"})
    assert r.status == 404 and r.error["code"] == "node_not_found"


def test_next_gives_each_file_its_reasons(served):
    server, pid = served
    base = f"/v1/projects/{pid}"
    server.post(base + "/memories", {"title": "Tax follows the cart total",
                                     "rationale": "rounding first", "files_affected":
                                         ["shop/cart.py", "docs/pricing.md"]})
    server.post(base + "/activity", {"files": ["shop/cart.py", "README.md"], "kind": "edit"})
    r = server.post(base + "/next", {"files_open": ["shop/cart.py"], "task": "sales tax owed",
                                     "limit": 10})
    assert r.status == 200, r.body
    files = {f["path"]: {w["kind"] for w in f["why"]} for f in r.json["files"]}
    assert "shop/cart.py" not in files
    assert "structural" in files["shop/prices.py"]
    assert "learned" in files["README.md"]
    assert "decision" in files["docs/pricing.md"]
    assert "task" in files["shop/tax.py"]
    scores = [f["score"] for f in r.json["files"]]
    assert scores == sorted(scores, reverse=True)
    why = next(f for f in r.json["files"] if f["path"] == "shop/prices.py")["why"]
    assert "round_money" in next(w["detail"] for w in why if w["kind"] == "structural")
    # every task weight is a share of the best match's score, whatever the scores' sign
    r = server.post(base + "/next", {"files_open": ["shop/cart.py"], "limit": 10,
                                     "task": "zebra migration across the quantum savanna"})
    weights = [w["weight"] for f in r.json["files"] for w in f["why"] if w["kind"] == "task"]
    assert all(0 < w <= 1 for w in weights)
    assert server.post(base + "/next", {"files_open": []}).status == 422
    r = server.post(base + "/next", {"files_open": ["/etc/passwd"]})
    assert r.status == 422 and r.error["details"]["errors"][0]["type"] == "path_outside_project"


def test_synapse_stats(served):
    server, pid = served
    out = server.get(f"/v1/projects/{pid}/synapses/stats").json
    assert out["learning"] and out["half_life_days"] == 365
    assert out["rates"]["edit"] == 0.2 and out["synapses"] >= 3 and out["files"] >= 3
    assert out["strongest"][0]["weight"] >= out["strongest"][-1]["weight"]
    assert out["activations_7d"]["edit"] >= 1 and out["counters"]["pairs_strengthened"] >= 1


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(["activity", "feedback", "next"]),
       body=st.dictionaries(st.sampled_from(["files", "kind", "session", "node", "file",
                                             "signal", "related", "files_open", "task", "limit"]),
                            st.one_of(st.none(), st.integers(-3, 100), st.text(max_size=20),
                                      st.sampled_from(["edit", "helpful", "README.md"]),
                                      st.lists(st.text(max_size=30), max_size=3))))
def test_learning_routes_never_answer_500(served, route, body):
    server, pid = served
    r = server.post(f"/v1/projects/{pid}/{route}", body)
    assert r.status in (200, 404, 422), (route, body, r.body)


# -- the learning itself, on a kernel in this process ---------------------------------------

@pytest.fixture
def learner(tmp_path):
    kernel = make_kernel(tmp_path / "home", plugins=["index"],
                         index={"learn_flush_s": 60, "learn_max_files": 3})
    from plugins.index import plugin
    service = plugin._service(kernel)
    project, _ = kernel.projects.register(str(write(tmp_path / "repo", FILES)))
    yield service.learning, project
    kernel.shutdown()


def test_a_link_halves_each_half_life_and_saturates(learner):
    learning, project = learner
    day = 86_400.0
    learning.activity(project, ["a.py", "b.py"], "edit", "s", at=0.0)
    [(_, _, w, _, _)] = learning.linked(project, ["a.py"], 5, at=365 * day)
    assert w == pytest.approx(0.1, rel=1e-6)  # 0.2 halved after 365 days
    learning.activity(project, ["a.py", "b.py"], "edit", "t", at=365 * day)
    [(_, _, w, count, _)] = learning.linked(project, ["a.py"], 5, at=365 * day)
    assert w == pytest.approx(0.1 + 0.2 * 0.9) and count == 2  # d + rate · (1 − d)
    for i in range(60):
        learning.activity(project, ["a.py", "b.py"], "edit", f"u{i}", at=365 * day)
    assert learning.linked(project, ["a.py"], 5, at=365 * day)[0][2] < 1.0


def test_query_learning_is_buffered_until_a_flush(learner):
    learning, project = learner
    store = learning.store(project)
    learning.observe(project, "query", ["a.py", "b.py"], 10, 100)
    assert store.linked(["a.py"], 0, 1e9, 0.0, 5) == []  # nothing written on the request path
    assert learning.linked(project, ["a.py"], 5)[0][1] == "b.py"  # a read flushes first


def test_a_sweeping_change_links_nothing(learner):
    learning, project = learner
    out = learning.activity(project, ["a.py", "b.py", "c.py", "d.py"], "edit", "s")
    assert out["pairs"] == 0 and learning.linked(project, ["a.py"], 5) == []


def test_learning_can_be_switched_off(tmp_path):
    with LocalServer(tmp_path / "home", plugins=["auth", "index"],
                     index={"learning": False}) as server:
        pid = server.register(write(tmp_path / "repo", FILES))
        build(server, pid)
        r = server.post(f"/v1/projects/{pid}/activity", {"files": ["README.md", "shop/tax.py"],
                                                         "kind": "edit"})
        assert r.json["pairs"] == 0 and r.json["learning"] is False
        server.post(f"/v1/projects/{pid}/search", {"query": "tax", "mode": "keyword"})
        assert synaptic(server, pid, "shop/tax.py") == {}
        assert server.get(f"/v1/projects/{pid}/savings").json["total"]["calls"] == 1


def test_eval_next_replays_a_history(tmp_path):
    repo = tmp_path / "hist"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
                            "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})

    git("init", "-q")
    pairs = [("a.py", "a_test.py"), ("b.py", "b_test.py")] * 6
    for i, (code, test) in enumerate(pairs):
        for name in (code, test):
            (repo / name).write_text(f"def f{i}_{name[0]}(): return {i}\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"c{i}", "--date", f"2024-01-{i + 1:02d}T00:00:00")
    (repo / "a.py").write_text("def renamed(): return 0\n")
    git("mv", "a.py", "alpha.py")
    git("mv", "a_test.py", "alpha_test.py")
    git("commit", "-q", "-am", "rename")
    code, out, err = run_cli("eval", "next", str(repo), "--json")
    assert code == 0, err
    import json
    report = json.loads(out)
    assert report["train_sessions"] >= 4 and report["turns"] >= 4
    learned = report["methods"]["next (learning on)"]
    assert learned["frozen"] == 1.0 and report["methods"]["co-change baseline"]["frozen"] == 1.0
    code, _, err = run_cli("eval", "next", str(tmp_path / "nothing"))
    assert code == 2 and "cannot read the history" in err
    pwned = tmp_path / "pwned.txt"  # a revision git would read as an option writes nothing
    code, _, err = run_cli("eval", "next", str(repo), f"--rev=--output={pwned}")
    assert code == 2 and "is not a revision" in err and not pwned.exists()
    code, _, err = run_cli("eval", "next", str(repo), "--rev", "nosuchrev")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "at nosuchrev: ambiguous argument 'nosuchrev'" in err
