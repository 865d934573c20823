"""Files → symbol nodes and edges. Nodes are symbols (module, class, function, method,
Markdown section), not fixed windows, so a search hit names something a reader can open.

Python goes through the standard ``ast``; JavaScript/TypeScript, Go, Rust and Java through
tree-sitter grammars from their installed wheels; Markdown headings become sections; every
other text file is one whole-file node.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

LANGUAGES = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".md": "markdown", ".markdown": "markdown",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
    ".rb": "ruby", ".php": "php", ".kt": "kotlin", ".swift": "swift", ".scala": "scala",
    ".sh": "shell", ".bash": "shell", ".sql": "sql", ".html": "html", ".css": "css",
    ".rst": "rst", ".txt": "text", ".json": "json", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".ini": "ini", ".cfg": "ini", ".xml": "xml",
    # source without a parser here: one whole-file node, but typed code, not docs (a docs
    # query quoted Cython)
    ".pyx": "cython", ".pxd": "cython", ".pxi": "cython", ".cxx": "cpp", ".hh": "cpp",
    ".hxx": "cpp", ".lua": "lua", ".pl": "perl", ".pm": "perl", ".zsh": "shell",
    ".ps1": "powershell", ".r": "r", ".dart": "dart", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml", ".clj": "clojure",
    ".groovy": "groovy", ".jl": "julia", ".zig": "zig", ".vue": "vue", ".svelte": "svelte",
}
DOCS = {"markdown", "rst", "text"}
CONFIG = {"json", "yaml", "toml", "ini", "xml"}
# text files that are settings, not prose, whatever their extension: a lock file (`uv.lock`,
# `Cargo.lock`, `yarn.lock`, `poetry.lock`, `Gemfile.lock`, `go.sum`) and a dot-file
# (`.gitignore`, `.editorconfig`, `.npmrc`, `.env.example`); a question about the docs never
# wants them (`package-lock.json` or `pnpm-lock.yaml` are `config` by their extension already)
LOCK_FILES = ("go.sum", "py.typed")  # settings by their name alone (py.typed: PEP 561's marker)
TEST_FILE = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_test\.(py|go)$"
                       r"|(^|/)conftest\.py$|\.(test|spec)\.[cm]?[jt]sx?$")
# embed_text's revision: a change to what it makes of the same node re-parses every index
LAYOUT = 2
# the parse's revision (its edges, the file types): a change re-parses every index at its
# next build too, whose texts keep their vectors (1: indexes that hold no such stamp; 3:
# source without a parser, `.pyx` …, typed code; 4: a file opening with a byte-order mark
# read without it, its symbols and first heading kept)
PARSE = 4
MAX_NODE_CHARS = 20_000  # what one node keeps for snippets and the keyword index
# the comment block a file opens with (licence, copyright, shebang): `#`, `//` or `/* */`
LEADING_COMMENTS = re.compile(r"\A(?:\s*(?:(?:#|//)[^\n]*|/\*.*?\*/))+\s*", re.S)
# a Python docstring: the string a module, or the body after a header, opens with (comments
# aside), triple-quoted or on one line in single quotes
DOCSTRING = re.compile(r"\A(?:\s*#[^\n]*\n)*\s*[rRuUbB]*(?:\"\"\".*?\"\"\"|'''.*?'''"
                       r"|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')[ \t]*\n?", re.S)
# a line's trailing comment: a `#` outside any quotes
COMMENT = re.compile(r"\A((?:[^#'\"]|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")*)#.*\Z")
NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@dataclass
class Node:
    kind: str  # module | class | function | method | section | file
    name: str
    qualname: str
    line: int
    end_line: int
    signature: str = ""
    docstring: str = ""
    text: str = ""
    parent: int | None = None  # index of the enclosing node in the same file
    whole: bool = False  # the text is the full span, not the residual around child nodes


@dataclass
class Edge:
    """What a node refers to. ``target`` is the bare name (the query context's callers and
    callees match on it); ``ref`` says where to look for it, and ``plugins/index/graph.py``
    resolves it to a node after the build:

    * calls and bases: a dotted path, ``self.`` / ``super.`` for the enclosing class, ``?.``
      for a receiver the parser cannot name (``make().save`` → ``?.save``);
    * imports: the module as the language spells it (Python absolute dotted, JS ``./a``, Go
      ``example.com/x/util``, Rust ``crate::a``, Java ``com.x.util``), ``#member`` when the
      import names a member (``shop.prices#round_money``, ``#*`` for a wildcard), and
      ``alias``, the local name it binds (``""`` when it binds none)."""

    src: int  # index of the node the edge leaves
    kind: str  # contains | imports | calls | inherits
    target: str  # the bare name it points at
    ref: str = ""
    alias: str = ""
    dst: int | None = None  # index of the node it points at, when the parser knows (contains)


@dataclass
class Parsed:
    language: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)

    def add(self, node: Node) -> int:
        self.nodes.append(node)
        index = len(self.nodes) - 1
        if node.parent is not None:
            self.edges.append(Edge(node.parent, "contains", node.qualname, dst=index))
        return index


def language_of(path: str) -> str:
    name = os.path.basename(path).lower()
    if name in ("dockerfile", "makefile"):
        return name
    return LANGUAGES.get(os.path.splitext(name)[1], "text")


def file_type_of(language: str, path: str = "") -> str:
    """``code``, ``docs`` or ``config`` by the language, except that a lock file (``*.lock``,
    ``go.sum``), a marker (``py.typed``) or a dot-file (``.gitignore``) the language would call
    ``docs`` is ``config``: settings, not prose."""
    if language in DOCS:
        name = os.path.basename(path).lower()
        settings = name.startswith(".") or name.endswith(".lock") or name in LOCK_FILES
        return "config" if settings else "docs"
    if language in CONFIG:
        return "config"
    return "code"


def is_test(path: str) -> bool:
    """Test code by where it lives or how it is named (Python, Go, JavaScript/TypeScript)."""
    return bool(TEST_FILE.search(path))


def module_name(path: str) -> str:
    """``pkg/sub/mod.py`` → ``pkg.sub.mod``; a package's ``__init__`` is the package."""
    stem = os.path.splitext(path)[0].replace("\\", "/")
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".") or path


def parse(path: str, source: str) -> Parsed:
    """Nodes and edges of one file; a file its parser cannot read becomes one whole-file node."""
    language = language_of(path)
    parsed = None
    if language == "python":
        from plugins.index.parse_python import parse_python
        parsed = parse_python(source, module_name(path),
                              os.path.basename(path) in ("__init__.py", "__init__.pyi"))
    elif language == "markdown":
        from plugins.index.parse_markdown import parse_markdown
        parsed = parse_markdown(source, path)
    else:
        from plugins.index import parse_treesitter
        if language in parse_treesitter.SPECS:
            parsed = parse_treesitter.parse(language, source, module_name(path))
    if parsed is None:
        parsed = Parsed(language)
        lines = source.count("\n") + 1
        parsed.add(Node("file", os.path.basename(path), path, 1, lines, whole=True))
    fill_text(parsed, source.splitlines())
    return parsed


def fill_text(parsed: Parsed, lines: list[str]) -> None:
    """Each node's text: functions keep their whole span; a module, class or section keeps
    what its children do not cover, with each child folded to its first line, so the class
    reads as header + docstring + method signatures and no code is indexed twice."""
    children: dict[int, list[Node]] = {}
    for node in parsed.nodes:
        if node.parent is not None:
            children.setdefault(node.parent, []).append(node)
    for index, node in enumerate(parsed.nodes):
        span = range(node.line - 1, min(node.end_line, len(lines)))
        node.whole = node.whole or index not in children
        if node.whole:
            text = "\n".join(lines[i] for i in span)
        else:
            folded: dict[int, int] = {}
            for child in children[index]:
                folded[child.line - 1] = child.end_line - 1
            out, i = [], span.start
            while i < span.stop:
                out.append(lines[i])
                i = folded[i] + 1 if i in folded and folded[i] > i else i + 1
            text = "\n".join(out)
        node.text = text[:MAX_NODE_CHARS]


def name_words(qualname: str) -> str:
    """``pkg.parseConfig_file`` → ``pkg parse config file``: a name as the words a question uses."""
    return " ".join(part.lower() for word in re.findall(r"[A-Za-z0-9]+", qualname)
                    for part in NAME_PART.findall(word))


def embed_text(kind: str, qualname: str, text: str, docstring: str, whole: bool,
               max_chars: int, signature: str = "", mode: str = "docfirst") -> str | None:
    """What a node's vector is made of, cut at ``max_chars``.

    ``docfirst`` (default): the name as words, the docstring, then the code without its
    docstring — what the node is for comes before the cut, its code fills the rest (CoSQA
    dev, docs/index.md). ``code``: kind, name and the code as written. ``metadata``: kind,
    name, signature and docstring only (faster, weaker; kept to measure the difference).
    The file path is left out of a symbol's text, so a renamed file re-embeds none of its
    functions, classes or sections; a module's or a file node's text opens with its name
    (the path as words: what says what it is about), so that one vector is embedded again.
    A module without a docstring that has child nodes adds nothing its children do not say,
    so it gets no vector; a module's opening comment block is left out.
    """
    if kind == "module" and not docstring and not whole:
        return None
    if mode == "metadata":
        return f"{kind} {qualname} {signature} {docstring}".strip()[:max_chars]
    body = text.strip()
    if kind == "module":  # a licence header would fill the cut and say nothing of the module
        body = LEADING_COMMENTS.sub("", body)
    if not body:
        return None
    if mode == "code":
        return f"{kind} {qualname}\n{body}"[:max_chars]
    if docstring:
        body = without_docstring(kind, body)
    return f"{name_words(qualname)}\n{docstring}\n{body}"[:max_chars]


def without_docstring(kind: str, body: str) -> str:
    """The code without the docstring it opens with: a module's first string, else the
    string after the header line (the first line ending with a colon, comments aside)."""
    if kind == "module":
        return DOCSTRING.sub("", body, count=1)
    lines = body.split("\n")
    for i, line in enumerate(lines):
        if COMMENT.sub(r"\1", line).rstrip().endswith(":"):
            rest = DOCSTRING.sub("", "\n".join(lines[i + 1:]), count=1)
            return "\n".join([*lines[:i + 1], rest])
    return body
