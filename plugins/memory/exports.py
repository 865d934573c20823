"""Export formats (spec 000 G8): ``ndjson`` (what import reads back), ``json`` (one array of
the same objects) and ``md`` (Markdown, one section per record, for a code review). Each is
streamed, record by record, from :meth:`MemoryStore.export`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

MEDIA_TYPES = {"ndjson": "application/x-ndjson", "json": "application/json",
               "md": "text/markdown; charset=utf-8"}
Row = tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]


def line(rec: dict[str, Any], history: list[dict[str, Any]], links: list[dict[str, Any]],
         contradictions: list[dict[str, Any]]) -> str:
    return json.dumps({"memory": rec, "history": history, "links": links,
                       "contradictions": contradictions}, ensure_ascii=False)


def render(rows: Iterable[Row], fmt: str) -> Iterator[bytes]:
    if fmt == "ndjson":
        return ((line(*row) + "\n").encode() for row in rows)
    if fmt == "json":
        return _array(rows)
    return _markdown(rows)


def _array(rows: Iterable[Row]) -> Iterator[bytes]:
    yield b"["
    for n, row in enumerate(rows):
        yield ((",\n" if n else "\n") + line(*row)).encode()
    yield b"\n]\n"


def _items(title: str, items: list[str]) -> list[str]:
    return [f"**{title}**", "", *(f"- {item}" for item in items), ""] if items else []


def section(rec: dict[str, Any], history: list[dict[str, Any]],
            links: list[dict[str, Any]], contradictions: list[dict[str, Any]]) -> str:
    """One record as Markdown: a heading, its facts on one line, its text, lists, history."""
    facts = [f"`{rec['id']}`", rec["kind"], rec["status"], rec["decision_type"],
             f"confidence {rec['confidence']}", f"importance {rec['importance']}"]
    if rec["pinned"]:
        facts.append("pinned")
    out = [f"## {rec['title']}", "", " · ".join(facts), ""]
    where = []
    if rec["files_affected"]:
        where.append("Files: " + ", ".join(f"`{f}`" for f in rec["files_affected"]))
    if rec["tags"]:
        where.append("Tags: " + ", ".join(rec["tags"]))
    if rec["review_by"]:
        where.append(f"Review by: {rec['review_by']}")
    if where:
        out += [" — ".join(where), ""]
    out += [rec["rationale"], ""]
    out += _items("Evidence", rec["evidence"])
    out += _items("Rejected alternatives", rec["rejected_alternatives"])
    out += _items("Dependency constraints", rec["dependency_constraints"])
    out += _items("Links", [f"{lk['type']} `{lk['target']}`" for lk in links])
    out += _items("Contradictions", [f"{c['status']} with `{c['a']}`: {c['explanation']}"
                                     for c in contradictions])
    out += _items("History", [f"{e['at']} {e['kind']}" + (f" by {e['actor']}" if e["actor"] else "")
                              + (f" — {e['note']}" if e["note"] else "") for e in history])
    who = rec["author"] or rec["agent"]
    out.append(f"_Created {rec['created_at']}{' by ' + who if who else ''}, "
               f"updated {rec['updated_at']}"
               + (f", commit `{rec['commit_sha'][:12]}`" if rec["commit_sha"] else "") + "._")
    return "\n".join(out) + "\n\n"


def _markdown(rows: Iterable[Row]) -> Iterator[bytes]:
    yield b"# Memories\n\n"
    for row in rows:
        yield section(*row).encode()
