"""Export formats (spec 000 G8): ``ndjson`` (what import reads back), ``json`` (one array of
the same objects) and ``md`` (Markdown, one section per record, for a code review). Each is
streamed, record by record, from :meth:`MemoryStore.export`, and ends with its format's end —
ndjson's last newline, json's ``]``, md's closing line — only once every record is written:
an export cut short by an error after its status was sent ends without it."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from neuralmind import log_failure

log = logging.getLogger("neuralmind.memory")

MEDIA_TYPES = {"ndjson": "application/x-ndjson", "json": "application/json",
               "md": "text/markdown; charset=utf-8"}
Row = tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]


def line(rec: dict[str, Any], history: list[dict[str, Any]], links: list[dict[str, Any]],
         contradictions: list[dict[str, Any]]) -> str:
    return json.dumps({"memory": rec, "history": history, "links": links,
                       "contradictions": contradictions}, ensure_ascii=False)


def stream(rows: Iterator[Row], fmt: str, request_id: str | None) -> Iterator[bytes]:
    """The export of ``rows`` as ``fmt``. The first page is read now, in the responder: an
    error there is answered as any route's. One later (the status is sent) is logged and ends
    the body without its format's end, which tells the client the export is incomplete."""
    first = next(rows, None)
    return _cut_short(render(rows if first is None else itertools.chain([first], rows), fmt),
                      request_id)


def _cut_short(chunks: Iterator[bytes], request_id: str | None) -> Iterator[bytes]:
    try:
        yield from chunks
    except Exception as ex:
        log_failure(log, f"export of request {request_id} (cut short: its body ends without "
                         "the format's end)", ex)


def render(rows: Iterable[Row], fmt: str) -> Iterator[bytes]:
    if fmt == "ndjson":
        return _lines(rows)
    if fmt == "json":
        return _array(rows)
    return _markdown(rows)


def _lines(rows: Iterable[Row]) -> Iterator[bytes]:
    """One line per record; each line's newline goes out with the next line, the last one
    once every record is written."""
    sep = ""
    for row in rows:
        yield (sep + line(*row)).encode()
        sep = "\n"
    if sep:
        yield b"\n"


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
    count = 0
    for count, row in enumerate(rows, start=1):
        yield section(*row).encode()
    yield f"_End of the export: {count} records._\n".encode()
