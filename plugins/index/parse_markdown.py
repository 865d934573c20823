"""Markdown: each ATX heading starts a section node nested under the heading above it;
headings inside fenced code blocks are text, not structure."""

from __future__ import annotations

import os
import re

from plugins.index.chunker import Node, Parsed

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")  # a fence line: its run, then the rest


def fence_after(line: str, fence: str) -> str:
    """The fence open after ``line`` when ``fence`` was before it (``""``: none), as
    CommonMark reads them: a run of three or more ``` ` ``` or ``~`` opens one (a backtick
    fence's info string holds no backtick); only a run of the same character at least as long,
    with nothing else on its line, closes it: inside, any other fence line is code."""
    m = FENCE.fullmatch(line)
    if not m:
        return fence
    run, rest = m.groups()
    if fence:
        closes = run[0] == fence[0] and len(run) >= len(fence) and not rest.strip()
        return "" if closes else fence
    return "" if run[0] == "`" and "`" in rest else run


def parse_markdown(source: str, path: str) -> Parsed:
    out = Parsed("markdown")
    lines = source.splitlines()
    root = out.add(Node("file", os.path.basename(path), path, 1, max(len(lines), 1)))
    stack: list[tuple[int, int]] = []  # (level, node index)
    fence = ""
    for number, line in enumerate(lines, start=1):
        if fence or FENCE.fullmatch(line):
            fence = fence_after(line, fence)
            continue
        match = _HEADING.match(line)
        if not match:
            continue
        level, title = len(match.group(1)), match.group(2).strip()
        while stack and stack[-1][0] >= level:
            _, done = stack.pop()
            out.nodes[done].end_line = number - 1
        parent = stack[-1][1] if stack else root
        path_names = [out.nodes[i].name for _, i in stack] + [title]
        idx = out.add(Node("section", title, " > ".join(path_names), number, len(lines),
                           signature=line.strip(), parent=parent))
        stack.append((level, idx))
    return out
