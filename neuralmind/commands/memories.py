"""``neuralmind memory …``: decisions about the code, mem0's verbs, through the daemon."""

from __future__ import annotations

import itertools
import json
import sys

from neuralmind.commands.common import emit, fields, project, project_flags

LIST_COLUMNS = ("id", "effective_status", "decision_type", "confidence", "title")
SEARCH_COLUMNS = ("id", "score", "effective_status", "title")
DETAIL = ("id", "title", "rationale", "decision_type", "status", "effective_status", "confidence",
          "files_affected", "tags", "commit_sha", "author", "agent", "session_id", "review_by",
          "evidence", "rejected_alternatives", "dependency_constraints", "created_at", "updated_at")


def _show(args, memory, note: str = "") -> int:
    return emit(args, memory.raw, text=fields(memory, DETAIL) + note)


def _filters(args) -> dict:
    return {k: v for k, v in {"status": args.status, "tag": args.tag, "file": args.file,
                              "type": args.type, "author": args.author, "agent": args.agent,
                              "session_id": args.session}.items() if v}


def cmd_add(args) -> int:
    body = {"files_affected": args.file or [], "tags": args.tag or [], "decision_type": args.type,
            "confidence": args.confidence, "review_by": args.review_by, "agent": args.agent,
            "session_id": args.session, "author": args.author, "id": args.id,
            "evidence": args.evidence or [], "rejected_alternatives": args.rejected or []}
    memory = project(args).memories.add(args.title, args.rationale,
                                        **{k: v for k, v in body.items() if v not in (None, [])})
    dupes = memory.possible_duplicates
    note = "" if not dupes else "\n\npossible duplicates:\n" + "\n".join(
        f"  {d['id']}  {d['title']}" for d in dupes)
    return _show(args, memory, note)


def cmd_show(args) -> int:
    return _show(args, project(args).memories.get(args.id))


def cmd_list(args) -> int:
    items = project(args).memories.list(**_filters(args))
    rows = [m.raw for m in itertools.islice(items, args.limit)] if args.limit else \
        [m.raw for m in items]
    return emit(args, rows, rows=rows, columns=LIST_COLUMNS)


def cmd_search(args) -> int:
    found = project(args).memories.search(args.query, mode=args.mode, limit=args.limit,
                                          **_filters(args))
    rows = [m.raw for m in found]
    return emit(args, rows, rows=rows, columns=SEARCH_COLUMNS)


def cmd_edit(args) -> int:
    changes = {"rationale": args.rationale, "confidence": args.confidence, "tags": args.tags,
               "files_affected": args.files, "review_by": args.review_by,
               "evidence_append": args.add_evidence, "rejected_append": args.add_rejected}
    changes = {k: v for k, v in changes.items() if v is not None}
    return _show(args, project(args).memories.update(args.id, if_match=args.if_match, **changes))


def cmd_invalidate(args) -> int:
    return _show(args, project(args).memories.invalidate(args.id, args.reason))


def cmd_restore(args) -> int:
    return _show(args, project(args).memories.restore(args.id, commit_sha=args.commit))


def cmd_delete(args) -> int:
    project(args).memories.delete(args.id)
    return emit(args, {"deleted": args.id}, text=f"deleted {args.id} (its history is kept)")


def cmd_history(args) -> int:
    rows = list(project(args).memories.history(args.id))
    table = [{**row, "changes": _changes(row.get("changes") or {})} for row in rows]
    return emit(args, rows, rows=table, columns=("at", "kind", "actor", "changes", "note"))


def _changes(changes: dict) -> str:
    """``status: ACTIVE → INVALIDATED; tags: db → db,sqlite`` from ``{field: [old, new]}``."""
    return "; ".join(f"{field}: {_was(v[0])} → {_was(v[1])}"
                     if isinstance(v, list) and len(v) == 2 else f"{field}: {_was(v)}"
                     for field, v in changes.items())


def _was(value) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "[]"
    return '""' if value in ("", None) else str(value)


def cmd_feedback(args) -> int:
    memory = project(args).memories.feedback(args.id, helpful=args.helpful, note=args.note)
    return emit(args, memory.raw, text=f"{memory.id}: confidence now {memory.confidence}")


def cmd_export(args) -> int:
    out = open(args.output, "w") if args.output else sys.stdout
    count = 0
    try:
        for line in project(args).memories.export():
            out.write(json.dumps(line) + "\n")
            count += 1
    finally:
        if args.output:
            out.close()
    if args.output:
        print(f"exported {count} memories to {args.output}", file=sys.stderr)
    return 0


def cmd_import(args) -> int:
    if args.file == "-":
        body = sys.stdin.buffer.read()
    else:
        with open(args.file, "rb") as fh:
            body = fh.read()
    result = project(args).memories.import_(body, mode=args.mode)
    return emit(args, result, text=", ".join(f"{k} {v}" for k, v in result.items()))


def _filter_flags(parser) -> None:
    parser.add_argument("--status", help="ACTIVE (default), STALE, INVALIDATED or ALL")
    parser.add_argument("--tag", action="append", help="any of these tags (repeatable)")
    parser.add_argument("--file", action="append", help="any of these files (repeatable)")
    parser.add_argument("--type", help="ARCHITECTURE, DEPENDENCY, TEST, REFACTOR, BUGFIX, CONFIG")
    parser.add_argument("--author")
    parser.add_argument("--agent")
    parser.add_argument("--session")


def add_commands(sub) -> None:
    from kernel.commands import command_group
    group = command_group(sub, "memory", "decisions about the code: add, search, history …")
    scoped = project_flags()

    def verb(name: str, func, help: str, with_id: bool = True):
        parser = group.add_parser(name, parents=[scoped], help=help)
        if with_id:
            parser.add_argument("id", help="the memory id")
        parser.set_defaults(func=func)
        return parser

    add = verb("add", cmd_add, "record a decision", with_id=False)
    add.add_argument("title")
    add.add_argument("--rationale", "-r", required=True)
    add.add_argument("--file", action="append", help="a file it is about (repeatable)")
    add.add_argument("--tag", action="append")
    add.add_argument("--type", help="ARCHITECTURE (default), DEPENDENCY, TEST, REFACTOR, BUGFIX, CONFIG")
    add.add_argument("--confidence", type=float)
    add.add_argument("--review-by", help="ISO date after which it reads as STALE")
    add.add_argument("--evidence", action="append")
    add.add_argument("--rejected", action="append", help="a rejected alternative (repeatable)")
    add.add_argument("--author")
    add.add_argument("--agent")
    add.add_argument("--session")
    add.add_argument("--id", help="a client-chosen id (409 when it exists)")
    verb("show", cmd_show, "one decision")
    lst = verb("list", cmd_list, "decisions, newest first", with_id=False)
    _filter_flags(lst)
    lst.add_argument("--limit", type=int, help="show at most this many")
    search = verb("search", cmd_search, "keyword, semantic or hybrid search", with_id=False)
    search.add_argument("query")
    search.add_argument("--mode", choices=["keyword", "semantic", "hybrid"])
    search.add_argument("--limit", type=int, default=10, help="at most 25")
    _filter_flags(search)
    edit = verb("edit", cmd_edit, "change fields (the history keeps the diff)")
    edit.add_argument("--rationale")
    edit.add_argument("--confidence", type=float)
    edit.add_argument("--tags", nargs="*", help="replace the tags")
    edit.add_argument("--files", nargs="*", help="replace files_affected")
    edit.add_argument("--review-by")
    edit.add_argument("--add-evidence", action="append")
    edit.add_argument("--add-rejected", action="append")
    edit.add_argument("--if-match", help="refuse (412) unless updated_at is still this")
    verb("invalidate", cmd_invalidate, "mark no longer true").add_argument(
        "--reason", required=True)
    verb("restore", cmd_restore, "make active again").add_argument(
        "--commit", help="the commit it holds at (default HEAD)")
    verb("delete", cmd_delete, "hard delete (the history is kept)")
    verb("history", cmd_history, "every change, oldest first")
    fb = verb("feedback", cmd_feedback, "was it useful? moves confidence")
    way = fb.add_mutually_exclusive_group(required=True)
    way.add_argument("--helpful", dest="helpful", action="store_true")
    way.add_argument("--unhelpful", dest="helpful", action="store_false")
    fb.add_argument("--note")
    exp = verb("export", cmd_export, "JSONL of records and their history", with_id=False)
    exp.add_argument("--output", "-o", help="a file (default stdout)")
    imp = verb("import", cmd_import, "load an export", with_id=False)
    imp.add_argument("file", help="a JSONL export, or - for stdin")
    imp.add_argument("--mode", choices=["skip", "overwrite"], default="skip")
