"""Odd text in a repository and in the paths sent about it: a file opening with a UTF-8
byte-order mark (an editor on Windows writes one) kept every symbol and heading — the BOM
was once read as text, and a Python file lost every symbol, a Markdown file its first
heading, a README its title; a file named with a line break cannot add lines to the context
an agent reads; and a path holding NUL is refused on both backends (PostgreSQL's text
cannot hold it: ``next`` was a 500 there, a 200 on SQLite)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.plugins.index.conftest import build
from tests.support import LocalServer

BOM = b"\xef\xbb\xbf"
PYTHON = b'"""Money helpers."""\n\n\ndef bom_function():\n    return 5\n'
MARKDOWN = b"# BOM Heading\n\nWhat the guide is about.\n\n## Second\n\nMore.\n"
README = b"# Bom Readme\n\nA project whose README opens with a byte-order mark.\n"


def write_bytes(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def document(server, pid: str, path: str) -> dict:
    r = server.get(f"/v1/projects/{pid}/documents?path={quote(path)}")
    assert r.status == 200, r.body
    return r.json


def shape(doc: dict) -> list[tuple]:
    """What a file's nodes say, its name aside: kind, line span, signature, docstring."""
    return [(n["kind"], n["line"], n["end_line"], n["signature"], n["docstring"])
            for n in doc["nodes"]]


@pytest.fixture(scope="module")
def bom_repo(server, tmp_path_factory):
    root = write_bytes(tmp_path_factory.mktemp("bom") / "repo", {
        "bom/money.py": BOM + PYTHON, "plain/money.py": PYTHON,
        "bom/guide.md": BOM + MARKDOWN, "plain/guide.md": MARKDOWN,
        "README.md": BOM + README})
    pid = server.register(root)
    result = build(server, pid)
    return pid, root, result


def test_a_python_file_opening_with_a_bom_keeps_its_symbols_and_lines(server, bom_repo):
    pid, _, result = bom_repo
    assert result["files_skipped"] == 0
    bom, plain = document(server, pid, "bom/money.py"), document(server, pid, "plain/money.py")
    assert [(n["kind"], n["label"], n["line"]) for n in bom["nodes"]] == [
        ("module", "bom.money", 1), ("function", "bom_function", 4)]
    assert shape(bom) == shape(plain) and bom["nodes"][0]["docstring"] == "Money helpers."
    assert (bom["language"], bom["lines"], bom["size"]) == ("python", plain["lines"],
                                                            plain["size"] + 3)
    assert bom["text"] == "\ufeff" + PYTHON.decode()  # the file as it is on disk
    assert bom["stale"] is False  # its hash is of the bytes on disk
    r = server.post(f"/v1/projects/{pid}/search", {"query": "bom_function", "mode": "keyword"})
    assert ("bom_function", "bom/money.py", 4) in [
        (h["label"], h["source_file"], h["line"]) for h in r.json["results"]]


def test_a_markdown_file_opening_with_a_bom_keeps_its_first_heading(server, bom_repo):
    pid = bom_repo[0]
    bom, plain = document(server, pid, "bom/guide.md"), document(server, pid, "plain/guide.md")
    assert [(n["kind"], n["label"], n["line"]) for n in bom["nodes"]] == [
        ("file", "bom/guide.md", 1), ("section", "BOM Heading", 1),
        ("section", "BOM Heading > Second", 5)]
    assert shape(bom) == shape(plain)


def test_a_readme_opening_with_a_bom_gives_the_context_its_title(server, bom_repo):
    pid, root, _ = bom_repo
    r = server.post(f"/v1/projects/{pid}/query", {"question": "money helpers"})
    assert r.status == 200, r.body
    project = server.get(f"/v1/projects/{pid}").json["name"]
    assert f"{project} (Bom Readme): A project whose README opens with a byte-order mark." \
        in r.json["context"].splitlines()


def test_a_bom_file_is_rebuilt_only_when_its_bytes_change(server, bom_repo):
    pid, root, _ = bom_repo
    again = build(server, pid)
    assert (again["files_changed"], again["files_reindexed"]) == (0, 0)
    path = root / "bom" / "money.py"
    path.write_bytes(BOM + PYTHON)  # the same bytes, a new mtime: compared by hash
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert build(server, pid)["files_changed"] == 0
    path.write_bytes(BOM + PYTHON + b"\n\ndef second_function():\n    return 6\n")
    assert build(server, pid)["files_changed"] == 1
    assert [(n["label"], n["line"]) for n in document(server, pid, "bom/money.py")["nodes"]] == [
        ("bom.money", 1), ("bom_function", 4), ("second_function", 8)]


NAMED = "new\nline.py"
CODE = ('def newline_in_name():\n    """Named with a line break."""\n    return 1\n\n\n'
        'def uses_newline_in_name():\n    return newline_in_name()\n')


def test_a_file_named_with_a_line_break_cannot_add_lines_to_the_context(server, tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / NAMED).write_text(CODE)
    (root / "tab\tand\rcr.py").write_text("def tabbed_name_helper():\n    return 2\n")
    pid = server.register(root)
    build(server, pid)
    r = server.post(f"/v1/projects/{pid}/query", {"question": "newline in name"})
    assert r.status == 200, r.body
    context = r.json["context"]
    lines = context.splitlines()
    assert "\r" not in context and "\t" not in context
    assert "new\nline" not in context  # the name's own break is never a line break
    assert "- new\\nline.py: " not in lines  # no module docstring: the layout line is the path
    assert [line for line in lines if line.startswith("- ")] == [
        "- new\\nline.py [newline_in_name, uses_newline_in_name]",
        "- tab\\tand\\rcr.py [tabbed_name_helper]"]
    assert "### new\\nline.py:1 newline_in_name (function)" in lines
    assert "newline_in_name (new\\nline.py:1)" in lines
    assert "  called by: uses_newline_in_name (new\\nline.py:6)" in lines
    assert not [line for line in lines if line.startswith("line.py")]
    # the routes still name the file as it is on disk
    hits = server.post(f"/v1/projects/{pid}/search",
                       {"query": "newline_in_name", "mode": "keyword"}).json["results"]
    assert NAMED in {h["source_file"] for h in hits}


# -- NUL in a path: the same 422 on both backends ------------------------------------------

@pytest.fixture(scope="module")
def learning(backend, tmp_path_factory):
    """The index with the memory plugin, whose store ``next`` asks about the open files."""
    base = tmp_path_factory.mktemp(f"nul-{backend}")
    root = write_bytes(base / "repo", {"app.py": b"def main():\n    return 1\n",
                                       "util.py": b"def helper():\n    return 2\n"})
    with LocalServer(base / "home", plugins=["auth", "index", "memory"]) as server:
        pid = server.register(root)
        build(server, pid)
        yield server, pid


@pytest.mark.parametrize("method, route, body, loc", [
    ("POST", "next", {"files_open": ["a\x00"]}, ["body", "files_open", 0]),
    ("POST", "next", {"files_open": ["app.py", "app.py\x00"]}, ["body", "files_open", 1]),
    ("POST", "impact", {"files": ["app.py\x00"]}, ["body", "files", 0]),
    ("POST", "activity", {"files": ["app.py", "util.py\x00"], "kind": "edit"},
     ["body", "files", 1]),
    ("POST", "feedback", {"file": "app.py\x00", "signal": "helpful"}, ["body", "file"]),
    ("POST", "feedback", {"file": "app.py", "signal": "helpful", "related": ["util.py\x00"]},
     ["body", "related", 0]),
    ("GET", "neighbors/synaptic?file=app.py%00", None, ["query", "file"]),
    ("GET", "neighbors/structural?file=app.py%00", None, ["query", "file"]),
], ids=["next", "next-second", "impact", "activity", "feedback", "feedback-related",
        "synaptic", "structural"])
def test_a_path_holding_nul_is_refused_on_both_backends(learning, method, route, body, loc):
    server, pid = learning
    base = f"/v1/projects/{pid}"
    before = server.get(f"{base}/neighbors/synaptic?file=app.py").json["neighbors"]
    r = server.request(method, f"{base}/{route}", json_body=body)
    assert r.status == 422, r.body
    assert r.error["code"] == "validation_error"
    assert [(e["loc"], e["msg"]) for e in r.error["details"]["errors"]] == [
        (loc, "text cannot contain a NUL character")]
    assert server.get(f"{base}/neighbors/synaptic?file=app.py").json["neighbors"] == before
    ok = server.post(f"{base}/next", {"files_open": ["app.py"]})  # the same, without the NUL
    assert ok.status == 200 and ok.json["not_indexed"] == [], ok.body
