"""A code source from a file whose name holds a line break or a tab: the index writes such a
path escaped in the context's L3 headings (``one_line``), and ask, which finds each hit's
snippet by its heading, once rebuilt the heading from the raw path — the hit lost its
snippet, and when it was the best hit no code source was found at all."""

from __future__ import annotations

import pytest

from tests.support import LocalServer

NEWLINE = "refund\nrules.py"
TAB = "refund\trates.py"
FILES = {
    NEWLINE: 'def refund_to_card(order):\n    """Refunds go back to the card that paid, '
             'within five working days."""\n    return order.card.credit(order.total)\n',
    TAB: 'def refund_rate(order):\n    """The share of a refund kept as a fee: none."""\n'
         "    return 0\n",
    "plain.py": 'def refund_window():\n    """How many days a refund may take: five."""\n'
                "    return 5\n",
}


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    root = tmp_path_factory.mktemp("ask-odd")
    repo = root / "repo"
    repo.mkdir()
    for name, text in FILES.items():
        (repo / name).write_text(text)
    with LocalServer(root / "home", plugins=["auth", "memory", "index", "ask"]) as server:
        server.pid = server.register(repo)
        r = server.post(f"/v1/projects/{server.pid}/build", {"wait": True})
        assert r.status == 200 and r.json["job"]["result"]["files"] == 3, r.body
        yield server


def code_sources(server, question: str) -> list[dict]:
    r = server.post(f"/v1/projects/{server.pid}/ask", {"question": question,
                                                         "sources": ["code"]})
    assert r.status == 200, r.body
    return r.json


def test_a_file_named_with_a_line_break_is_a_cited_source_with_its_code(odd):
    out = code_sources(odd, "do refunds go back to the card that paid?")
    first = out["sources"][0]  # the best hit: once, no code source at all
    assert (first["path"], first["line"], first["title"]) == (NEWLINE, 1, "refund_to_card")
    assert first["cite"] == "refund\\nrules.py:1"  # one line, as the context writes it
    assert first["text"] == FILES[NEWLINE].rstrip("\n")
    assert out["cited"][0] == first["n"] and f"[{first['n']}]" in out["answer"]
    assert "refund\\nrules.py:1" in out["answer"] and NEWLINE not in out["answer"]


def test_every_hit_keeps_its_snippet_around_odd_names(odd):
    """The snippets after an odd name's are found too: each function is its own file's code,
    and a module named by its file (``refund\\nrules``) is titled on one line."""
    out = code_sources(odd, "refund card fee days")
    functions = {s["path"]: s for s in out["sources"] if s["title"].startswith("refund_")}
    assert set(functions) == set(FILES)
    for name, source in functions.items():
        assert source["text"] == FILES[name].rstrip("\n")
    assert functions[TAB]["cite"] == "refund\\trates.py:1"
    modules = {s["title"] for s in out["sources"]} - {s["title"] for s in functions.values()}
    assert modules == {"refund\\nrules", "refund\\trates", "plain"}
