"""A code source whose code holds a fence of its own: the index wraps such a snippet in a
longer run of backticks, and ask, which strips the wrapper, once left a stray backtick at
the end of the text it quotes."""

from __future__ import annotations

from tests.support import LocalServer

CODE = ('def render_example():\n    """Show how to call the tool:\n\n    ```sh\n'
        '    neuralmind ask "why?"\n    ```\n    """\n    return "example"\n')


def test_a_snippet_holding_a_fence_is_quoted_whole_and_nothing_more(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "example.py").write_text(CODE)
    with LocalServer(tmp_path / "home", plugins=["auth", "memory", "index", "ask"]) as server:
        pid = server.register(repo)
        assert server.post(f"/v1/projects/{pid}/build", {"wait": True}).status == 200
        r = server.post(f"/v1/projects/{pid}/ask", {"question": "how to call the tool example",
                                                     "sources": ["code"]})
        assert r.status == 200, r.body
    [source] = [s for s in r.json["sources"] if s["title"] == "render_example"]
    assert source["text"] == CODE.rstrip("\n")
