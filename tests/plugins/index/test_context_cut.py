"""Where the query context cuts a snippet the budget cannot hold whole: at a line break, its
fence closed, within the budget. It was cut mid-token (``    initi …``) with no closing fence,
so half a name read as code and the fence stayed open over whatever followed (C-agent #8).
A snippet holding its own fence (a README's ```` ```bash ```` block) is wrapped in a longer one,
and fences are read as CommonMark reads them, ``~~~`` too: the inner fence closed the wrapper
early, or left it open after a cut (E2 #4).
Also here, the byte-order mark's two other traces in the index: a ``.gitignore`` opening with
one lost its first rule, and an index built before a BOM was dropped re-parses at its next
build (``chunker.PARSE`` 4) rather than keep a Python file's bare file node until it changes."""

from __future__ import annotations

import re
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuralmind import estimate_tokens
from plugins.index import chunker
from plugins.index.context import SNIPPET_MAX, _cut, _open_fence, snippets
from tests.plugins.index.conftest import build, built

CLOSE = re.compile(r"\n(`{3,}|~{3,})\Z")  # a cut's closing fence
LEDGER = ["def settle_refund_ledger(ledger):",
          '    """Settle every refund the ledger holds, one entry at a time."""',
          "    total = 0",
          *(f"    total += ledger.entry_{i}.amount  # refund entry {i} of the ledger"
            for i in range(150)),
          "    return total"]  # ~2,600 tokens: past SNIPPET_MAX too
FILES = {"ledger.py": "\n".join(LEDGER) + "\n",
         "README.md": "# Ledger\n\nSettles refunds.\n"}
QUESTION = "how is the refund ledger settled?"


@pytest.fixture(scope="module")
def ledger(server, tmp_path_factory):
    return built(server, tmp_path_factory.mktemp("ledger") / "repo", FILES)


def query(server, pid: str, budget: int) -> dict:
    r = server.post(f"/v1/projects/{pid}/query", {"question": QUESTION, "context_budget": budget})
    assert r.status == 200, r.body
    out = r.json
    assert out["tokens"]["total"] <= budget and estimate_tokens(out["context"]) <= budget
    assert _open_fence(out["context"]) == ""
    return out


def ledger_snippet(context: str) -> list[str]:
    """The code lines of the ledger function's L3 item, checked to be cut as it should."""
    start = context.index("\n### ledger.py:1 settle_refund_ledger (function)\n") + 1
    end = context.find("\n\n### ", start)
    lines = context[start:end if end > 0 else len(context)].rstrip("\n").split("\n")
    assert lines[1] == "```python" and lines[-2:] == ["…", "```"], lines[-3:]
    return lines[2:-2]


@pytest.mark.parametrize("budget", [256, 300, 400])
def test_a_snippet_the_budget_cuts_ends_on_a_whole_line_and_closes_its_fence(server, ledger,
                                                                              budget):
    out = query(server, ledger, budget)
    assert out["layers_used"][-1] == "L3" and out["context"].endswith("\n…\n```\n")
    code = ledger_snippet(out["context"])
    assert len(code) >= 3 and code == LEDGER[:len(code)]  # whole lines, from the first on
    assert out["tokens"]["total"] > budget - 20  # and as many as the budget holds


def test_a_snippet_longer_than_its_cap_is_cut_the_same_way(server, ledger):
    out = query(server, ledger, 8000)
    code = ledger_snippet(out["context"])
    assert 30 < len(code) < len(LEDGER) and code == LEDGER[:len(code)]
    item = "\n".join(["```python", *code, "…", "```"])
    assert SNIPPET_MAX - 20 < estimate_tokens(item) <= SNIPPET_MAX


def test_a_first_line_too_long_to_fit_is_cut_within_and_the_fence_closed():
    text = "### a.py:1 banner (function)\n```python\n" + "BANNER = " + "'x' + " * 200 + "\n```"
    cut = _cut(text, 40)
    assert estimate_tokens(cut) <= 40 and cut.endswith(" …\n```")
    assert text.startswith(cut.removesuffix(" …\n```")) and "'x' + 'x'" in cut


def test_text_around_a_fence_is_cut_as_prose_before_it_and_the_fence_closed_inside_it():
    memory = "Keep the WAL.\n\n```sql\nPRAGMA journal_mode = wal;\nPRAGMA synchronous = 1;\n```" \
             "\n\nWe tried a rollback journal first and it deadlocked under load."
    assert _cut(memory, 4) == "Keep the WAL. …"  # before the fence: as before
    assert _cut(memory, 14) == "Keep the WAL.\n\n```sql\nPRAGMA journal_mode = wal;\n…\n```"
    assert _cut(memory, 12) == "Keep the WAL.\n\n```sql\nPRAGMA journal_mode …\n```"
    after = _cut(memory, 30)  # past the fence: prose again
    assert after.endswith("\n```\n\nWe tried a rollback journal first and it …")


LINES = st.sampled_from(["```py", "```", "   ```", "    ```", "", "code = 1", "  return x",
                         "x" * 150, "prose, a sentence of it", "````", "````md", "`````",
                         "~~~", "~~~py", "~~~~", "  ~~~", "``` `x`", "```  ", "~~~ ```"])


@given(lines=st.lists(st.one_of(LINES, st.text("ab `~\n", max_size=12)), max_size=40),
       max_tokens=st.integers(min_value=1, max_value=200))
def test_a_cut_keeps_to_its_tokens_starts_the_text_and_leaves_no_fence_open(lines, max_tokens):
    text = "\n".join(lines)
    cut = _cut(text, max_tokens)
    if estimate_tokens(text) <= max_tokens:
        assert cut == text
        return
    assert estimate_tokens(cut) <= max_tokens and _open_fence(cut) == ""
    close = CLOSE.search(cut)
    kept = cut[:close.start()] if close else cut
    if close:  # the fence open at the cut, closed by its own run
        assert _open_fence(kept) == close.group(1)
    whole = kept.endswith("\n…")  # cut inside a fence: at a line break
    kept = kept.removesuffix("…").removesuffix("\n").removesuffix(" ")
    assert text.startswith(kept)
    if whole and kept:
        assert text[len(kept)] in " \n"


@pytest.mark.parametrize("text, fence", [
    ("```\ncode", "```"),
    ("```\ncode\n```", ""),
    ("```\n```bash\npip install x", "```"),  # a fence with an info string closes nothing
    ("````\n```\ncode", "````"),  # nor does a shorter one
    ("````\n```\n`````", ""),  # a longer one does
    ("~~~\n```\ncode", "~~~"),  # nor does the other character
    ("~~~py\ncode\n  ~~~~", ""),
    ("``` `x`\ncode", ""),  # a backtick in the info string: no fence
    ("    ```\ncode", ""),  # indented four: code, no fence
    ("```\n``` x\ncode", "```"),  # something after the run: no close
])
def test_fences_are_read_as_commonmark_reads_them(text, fence):
    assert _open_fence(text) == fence


def test_a_cut_inside_a_fence_of_tildes_or_a_longer_run_closes_it_with_the_same():
    tildes = "~~~py\n" + "line of code here\n" * 40 + "~~~"
    assert _cut(tildes, 20) == "~~~py\n" + "line of code here\n" * 3 + "…\n~~~"
    inner = "````md\nRun this:\n```bash\n" + "pip install neuralmind\n" * 40 + "```\n````"
    assert _cut(inner, 30) == ("````md\nRun this:\n```bash\n" + "pip install neuralmind\n" * 3
                               + "…\n````")


def row(text: str, file_type: str = "doc") -> dict:
    return {"language": "markdown" if file_type == "doc" else "python", "file_type": file_type,
            "text": text, "path": "README.md", "line": 3, "qualname": "Install",
            "kind": "section"}


def test_a_snippet_holding_a_fence_is_wrapped_in_a_longer_one():
    doc = "Run this:\n\n```bash\npip install x\n```\n\nDone."
    assert snippets([row(doc)]) == [f"### README.md:3 Install (section)\n````\n{doc}\n````"]
    four = "Quote:\n\n````md\n```py\nx = 1\n```\n````"
    assert snippets([row(four)])[0].split("\n")[1] == "`````"
    plain = "def f():\n    return '~~~'\n"  # no backticks opening a line: three, as before
    assert snippets([row(plain, "code")]) == [
        f"### README.md:3 Install (section)\n```python\n{plain}\n```"]


def test_a_snippet_holding_a_fence_cut_past_its_cap_ends_closed_within_it():
    doc = "## Install\n\nRun this:\n\n```bash\n" + "pip install neuralmind\n" * 200 + \
          "```\n\nThen done.\n"
    code = snippets([row(doc)])[0].split("\n", 1)[1]
    assert code.startswith("````\n## Install\n\nRun this:\n\n```bash\npip install neuralmind\n")
    assert code.endswith("\npip install neuralmind\n…\n````") and _open_fence(code) == ""
    assert SNIPPET_MAX - 10 < estimate_tokens(code) <= SNIPPET_MAX


DOCS = {"README.md": "# Deploy\n\nDeploying the refund service.\n\n## Install the refund service"
                     "\n\nRun this to install the refund service:\n\n```bash\n"
                     + "pip install refund-service  # the refund service\n" * 24 + "```\n\n"
                     "The refund service is then installed.\n",
        "docs/refunds.md": "# Refunds\n\nHow the refund service settles a refund: one ledger "
                           "entry at a time.\n"}


INSTALL = "### README.md:5 Deploy > Install the refund service (section)\n"


@pytest.fixture(scope="module")
def readme(server, tmp_path_factory):
    return built(server, tmp_path_factory.mktemp("readme") / "repo", DOCS)


def doc_query(server, pid: str, budget: int) -> dict:
    r = server.post(f"/v1/projects/{pid}/query", {"question": "how do I install the refund "
                    "service?", "context_budget": budget, "query_type": "docs"})
    assert r.status == 200, r.body
    assert r.json["tokens"]["total"] <= budget and estimate_tokens(r.json["context"]) <= budget
    return r.json


def test_a_readme_section_with_a_code_block_keeps_the_context_after_it_out_of_code(server,
                                                                                    readme):
    out = doc_query(server, readme, 4000)
    context = out["context"]
    start = context.index(INSTALL)
    item = context[start:context.index("\n\n### ", start)]
    assert "\n````\n" in item and item.endswith("\nThe refund service is then installed.\n````")
    assert "\n```bash\n" in item and "\n```\n" in item  # its own block, whole, inside
    after = context.index("\n\n### ", start) + 2
    assert _open_fence(context[:after]) == ""  # the next hit's header is Markdown again
    assert "### docs/refunds.md:" in context[after:] and _open_fence(context) == ""


@pytest.mark.parametrize("budget", [256, 320])
def test_a_readme_section_cut_inside_its_code_block_closes_the_wrapper(server, readme, budget):
    out = doc_query(server, readme, budget)
    context = out["context"]
    assert out["layers_used"][-1] == "L3" and context.endswith("\n…\n````\n")
    block = context[context.index(INSTALL):].split("\n```bash\n", 1)[1].split("\n")
    assert block[-3:] == ["…", "````", ""] and len(block) > 3  # whole lines of it, then closed
    assert set(block[:-3]) == {"pip install refund-service  # the refund service"}
    assert _open_fence(context) == "" and out["tokens"]["total"] > budget - 20


# -- the byte-order mark ------------------------------------------------------------------

BOM = "\ufeff"


def test_a_gitignore_opening_with_a_bom_keeps_its_first_rule(server, tmp_path):
    """Read as ``\\ufeff*.log``, the first rule matched nothing: logs were indexed."""
    pid = built(server, tmp_path / "repo", {".gitignore": BOM + "*.log\nbuild/\n",
                                            "web/.gitignore": BOM + "generated.js\n",
                                            "app.py": "def serve():\n    return 1\n",
                                            "debug.log": "def logged_by_mistake(): pass\n",
                                            "web/generated.js": "function made() {}\n"})
    for path, rule, where in (("debug.log", "*.log", ".gitignore"),
                              ("web/generated.js", "generated.js", "web/.gitignore")):
        r = server.post(f"/v1/projects/{pid}/ignore-rules/test", {"path": path})
        assert r.status == 200, r.body
        assert r.json["ignored"] is True
        assert (r.json["matched_rule"]["value"], r.json["matched_rule"]["reason"]) == (rule, where)
        assert server.get(f"/v1/projects/{pid}/documents?path={path}").status == 404
    files = server.get(f"/v1/projects/{pid}/stats").json
    assert files["files"] == 3  # app.py and the two .gitignore files


def test_an_index_from_before_the_bom_was_dropped_is_re_parsed_at_its_next_build(server,
                                                                                 tmp_path):
    """What a build before PARSE 4 left of a Python file opening with a BOM: no symbol (the
    parse failed on U+FEFF), its stamp 3. The next build re-parses every file, embeds the
    text of the symbol it gains alone and reuses every other vector."""
    root = tmp_path / "repo"
    files = {"bom.py": BOM + '"""Money helpers."""\n\n\ndef bom_function():\n    return 5\n',
             "other.py": "def other_function():\n    return 6\n"}
    pid = built(server, root, files)
    db = sqlite3.connect(root / ".neuralmind" / "index.db")
    with db:
        db.execute("PRAGMA foreign_keys = ON")
        nid, digest = db.execute("SELECT nid, embed_hash FROM nodes WHERE path = 'bom.py' "
                                 "AND kind = 'function'").fetchone()
        db.execute("DELETE FROM nodes_fts WHERE rowid = ?", (nid,))
        db.execute("DELETE FROM nodes WHERE nid = ?", (nid,))
        db.execute("DELETE FROM vectors WHERE hash = ?", (digest,))
        db.execute("UPDATE meta SET value = '3' WHERE key = 'parse'")
    db.close()

    def labels():
        r = server.get(f"/v1/projects/{pid}/documents?path=bom.py")
        assert r.status == 200, r.body
        return [n["label"] for n in r.json["nodes"]]

    assert labels() == ["bom"]
    result = build(server, pid)
    assert (result["files_changed"], result["files_reindexed"], result["reindex_reason"],
            result["chunks_embedded"]) == (0, 2, "layout", 1)
    assert result["vectors_reused"] >= 2
    assert labels() == ["bom", "bom_function"]
    db = sqlite3.connect(root / ".neuralmind" / "index.db")
    assert db.execute("SELECT value FROM meta WHERE key = 'parse'").fetchone() == (
        str(chunker.PARSE),) == ("4",)
    db.close()
    again = build(server, pid)
    assert (again["files_reindexed"], again["chunks_embedded"]) == (0, 0)
