"""Markdown: each ATX heading starts a section node nested under the heading above it;
headings inside fenced code blocks are text, not structure."""

from __future__ import annotations

import os
import re

from plugins.index.chunker import Node, Parsed

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def parse_markdown(source: str, path: str) -> Parsed:
    out = Parsed("markdown")
    lines = source.splitlines()
    root = out.add(Node("file", os.path.basename(path), path, 1, max(len(lines), 1)))
    stack: list[tuple[int, int]] = []  # (level, node index)
    fenced = False
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
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
