"""The L0–L3 context a query answers with, packed into a token budget.

L0 identity (name, README description, languages, size) · L1 summary (the main modules and
what they hold) · L2 on demand (the hits' enclosing classes, callers, callees, and what other
plugins add through ``query_context``) · L3 search (the best snippets with file:line).
Layers are filled in that order, so when the budget runs out L3 is cut first, then L2, then
L1; L0 is small by construction and always present. The best hit's snippet is held back
from the start, though: the code a question is about goes last, after the layout."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

from neuralmind import VersionedCache, estimate_tokens, one_line
from plugins.index.chunker import is_test
from plugins.index.parse_markdown import fence_after
from plugins.index.walker import contained

L0_MAX = 160
L1_MAX = 600
L2_MAX = 1200
SNIPPET_MAX = 700  # tokens per L3 snippet
MIN_PIECE = 24  # a cut shorter than this is dropped rather than shown
HEADERS = {"L0": "## Project", "L1": "## Layout", "L2": "## Related", "L3": "## Search results"}
LINE_RUN = re.compile(r"^ {0,3}(`+)", re.MULTILINE)  # backticks opening a line


@dataclass
class Layer:
    name: str
    cap: int
    items: list[str] = field(default_factory=list)
    sep: str = "\n\n"  # between items
    hold_first: bool = False  # the layers before it leave room for its header and first item

    def held(self) -> int:
        if not (self.hold_first and self.items):
            return 0
        return estimate_tokens(HEADERS[self.name] + "\n") + estimate_tokens(self.items[0] + self.sep)


def _cut(text: str, max_tokens: int) -> str:
    """``text`` shortened to at most ``max_tokens`` (the estimate's 4 characters each), `` …``
    marking the cut. A cut inside a code fence (a snippet's, one in a memory's text) keeps the
    lines that fit whole, then ``…`` and the fence closed by its own opening run (```` ```` ````
    or ``~~~``), all within ``max_tokens``: half a token reads as code that is not there, and
    a fence left open makes all that follows it code. Only a line too long to fit the fence
    at all is cut within."""
    if estimate_tokens(text) <= max_tokens:
        return text
    room = max_tokens * 4
    head = text[: max(0, room - 2)].rstrip() + " …"
    if not _open_fence(head):  # (a closing fence line cut there would close no more)
        return head
    # the last line break whose lines fit with ``…`` and the close of the fence open there
    kept, fence, opened = 0, "", False
    at, open_ = 0, ""
    for line in text.split("\n")[:-1]:
        at, was = at + len(line) + 1, open_
        open_ = fence_after(line, open_)
        if at + len("…" + _closing(open_)) > room:
            break  # no later break fits: the line closing a fence is as long as its close
        kept, fence, opened = at, open_, bool(open_) and not was
    lines = text[:kept]
    if not fence:  # the line opening the fence did not fit: what came before it
        return lines + "…"
    close = _closing(fence)
    first = text[kept: room - len(" …" + close)].rstrip()
    if first and opened:  # nor did the fence's first line
        return lines + first + " …" + close
    return lines.rstrip() + "\n…" + close  # (blank lines before the cut dropped)


def _closing(fence: str) -> str:
    """The line closing ``fence`` (its opening run; nothing when none is open)."""
    return "\n" + fence if fence else ""


def _open_fence(text: str) -> str:
    """The opening run of the code fence open at the end of ``text``, ``""`` when none is."""
    fence = ""
    for line in text.split("\n"):
        fence = fence_after(line, fence)
    return fence


def pack(layers: list[Layer], budget: int) -> tuple[str, dict[str, int], list[str]]:
    """Join the layers within ``budget``: whole items while they fit, the first that does not
    cut to what is left, the rest dropped. Each layer's count includes its header and the
    blank line after it (one more line break after a layer of lines, whose ``sep`` is one),
    so the layer counts add up to the total exactly. What a later layer holds back
    (``hold_first``) the layers before it leave free, all but the first (L0)."""
    remaining, parts, counts, used = budget, [], {}, []
    held = sum(layer.held() for layer in layers[1:])
    for i, layer in enumerate(layers):
        if i:
            held -= layer.held()
        room = min(layer.cap, remaining - (held if i else 0))
        header = HEADERS[layer.name] + "\n"
        blank = "" if layer.sep.endswith("\n\n") else "\n"  # before the next layer's header
        spent, pieces = estimate_tokens(header) + estimate_tokens(blank), []
        for item in layer.items:
            piece = item + layer.sep
            cost = estimate_tokens(piece)
            if spent + cost > room:
                left = room - spent - 1
                if left >= MIN_PIECE or (layer.name == "L0" and left > 0):
                    piece = _cut(item, left) + layer.sep
                    pieces.append(piece)
                    spent += estimate_tokens(piece)
                break
            pieces.append(piece)
            spent += cost
        if not pieces:
            counts[layer.name.lower()] = 0
            continue
        text = header + "".join(pieces) + blank
        counts[layer.name.lower()] = estimate_tokens(text)
        remaining -= counts[layer.name.lower()]
        parts.append(text)
        used.append(layer.name)
    return "".join(parts).rstrip() + "\n", counts, used


# -- L0 and L1, cached per index version --------------------------------------------------


def readme_intro(root: str) -> tuple[str, str]:
    """The README's title and first prose paragraph (badges, HTML and rules skipped)."""
    for name in ("README.md", "README.rst", "README.txt", "README", "readme.md"):
        full = contained(root, name)  # a README that is a symlink out is never read
        if full is None:
            continue
        try:
            # utf-8-sig: a byte-order mark before the title is not part of its ``#``
            text = open(full, encoding="utf-8-sig", errors="replace").read(20_000)
        except OSError:
            continue
        title, para = "", []
        for line in text.splitlines():
            s = line.strip()
            if not s:
                if para:
                    break
                continue
            if s.startswith("#") and not title and not para:
                title = s.lstrip("#").strip()
                continue
            if s.startswith(("#", "![", "[![", "<", "=", "-", "..", ":")):
                if para:
                    break
                continue
            para.append(s)
        return title[:80], " ".join(para)[:300]
    return "", ""


def identity(project, store) -> list[str]:
    files = store.files()
    langs = Counter()
    for f in files:
        langs[f["language"]] += f["lines"]
    size = sum(f["tokens"] for f in files)
    nodes = sum(v["nodes"] for v in store.stats()["languages"].values())
    title, about = readme_intro(str(project.path))
    name = f"{project.name} ({title})" if title and title != project.name else project.name
    lines = [f"{name}: {about or 'no README description'}",
             "Languages: " + ", ".join(f"{lang} ({n:,} lines)" for lang, n in langs.most_common(6)),
             f"Size: {len(files):,} files, {nodes:,} symbols, ~{size:,} tokens"]
    return ["\n".join(lines)]


def summary(store) -> list[str]:
    """One line per module, the most imported and largest first: what each one holds.
    Importers are the files whose imports the graph resolved into the module, so a fixture
    named ``flask.py`` or a ``typing.py`` gains nothing from ``import flask`` or the standard
    library's ``typing``."""
    imported = store.importers()
    rows = store.nodes_by_kind(("module", "class", "function"))
    modules: dict[str, dict] = {}
    held: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r["kind"] == "module":
            modules[r["path"]] = r
        elif "." not in r["qualname"]:
            held[r["path"]].append(r["qualname"])

    def weight(path: str) -> float:
        return imported.get(path, 0) * 3 + len(held[path]) / 5

    items = []
    for path in sorted(modules, key=lambda p: (-weight(p), p)):
        doc = (modules[path]["docstring"] or "").strip().split("\n")[0][:120]
        names = held[path][:8]
        line = f"- {one_line(path)}" + (f": {doc}" if doc else "")
        if names:
            more = len(held[path]) - len(names)
            line += f" [{', '.join(names)}{f', +{more}' if more > 0 else ''}]"
        items.append(line)
    return items


def static_layers(project, store, key: Hashable, layers: VersionedCache
                  ) -> tuple[list[str], list[str], int]:
    """L0, L1 and the project's indexed tokens, computed once per index version."""
    def load():
        version = store.version()
        size = sum(f["tokens"] for f in store.files())
        return version, (identity(project, store), summary(store), size)

    return layers.get(key, store.version, load)


# -- L2 and L3 ------------------------------------------------------------------------------

def _where(row) -> str:
    return f"{one_line(row['path'])}:{row['line']}"


def neighbourhood(store, hit_rows: list, limit: int = 3) -> list[str]:
    """For the top hits: the enclosing class, who calls it, what it calls — the call edges
    the graph resolved, as ``neighbors`` lists them: an agent reads them as fact, and bare
    names made every ``super().__init__`` a caller of any ``__init__``."""
    items, seen = [], set()
    for row in hit_rows[:limit]:
        parts = []
        if row["parent"] is not None:
            parent = store.nodes([row["parent"]]).get(row["parent"])
            if parent is not None and parent["kind"] == "class":
                doc = parent["docstring"].split("\n")[0][:160]
                parts.append(f"in {one_line(parent['signature'] or parent['qualname'])} "
                             f"({_where(parent)})"
                             + (f": {doc}" if doc else ""))
        callers = [c for c in store.callers(row["nid"]) if c["nid"] != row["nid"]]
        if callers:
            parts.append("called by: " + _linked(callers, 5, ", ",
                                                 lambda c: one_line(c["qualname"])))
        callees = [c for c in store.callees(row["nid"]) if c["nid"] != row["nid"]]
        if callees:
            parts.append("calls: " + _linked(callees, 6, "; ",
                                             lambda c: one_line(c["signature"] or c["qualname"])))
        if parts and row["nid"] not in seen:
            seen.add(row["nid"])
            items.append(f"{one_line(row['qualname'])} ({_where(row)})\n  " + "\n  ".join(parts))
    return items


def _linked(rows: list, limit: int, sep: str, label) -> str:
    """The first ``limit`` of ``rows``, the project's own code before its tests and exact
    edges before guesses (which stay marked: a guess is the one definition of that name, not
    what the language found), and how many more there are."""
    rows = sorted(rows, key=lambda r: (is_test(r["path"]), r["guessed"], r["path"], r["line"]))
    shown = [f"{label(r)} ({_where(r)}{', guessed' if r['guessed'] else ''})"
             for r in rows[:limit]]
    more = len(rows) - limit
    return sep.join(shown) + (f"{sep}+{more} more" if more > 0 else "")


def snippets(hit_rows: list) -> list[str]:
    out = []
    for row in hit_rows:
        lang = row["language"] if row["file_type"] == "code" else ""
        fence = _wrapper(row["text"])
        code = _cut(f"{fence}{lang}\n{row['text']}\n{fence}", SNIPPET_MAX)
        out.append(f"### {_where(row)} {one_line(row['qualname'])} ({row['kind']})\n{code}")
    return out


def _wrapper(text: str) -> str:
    """A backtick fence no line of ``text`` can close: longer than any run opening one (a
    README's own ```` ```bash ```` block then stays inside the snippet, CommonMark's rule)."""
    longest = max((len(run) for run in LINE_RUN.findall(text)), default=0)
    return "`" * max(3, longest + 1)
