"""``neuralmind memory …``: memories about the code, mem0's verbs, through the daemon."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import sys

from neuralmind.client import ValidationFailed
from neuralmind.commands.common import (CELL, CommandError, emit, fields, filled, in_project,
                                        note, path_id, plain, project, project_flags, ranged,
                                        refuse_misplaced, setting, whole_file)

KINDS = ("decision", "fact", "preference", "procedure", "episode")
LINK_TYPES = ("supersedes", "depends_on", "relates_to", "contradicts", "merged_into")
# the end of a link each type retires (plugins/memory/links.py): the others retire none
RETIRES = {"supersedes": "target", "merged_into": "source"}
STRATEGIES = ("keep_newest", "keep_oldest", "keep_important", "keep_both", "manual")
LIST_COLUMNS = ("id", "effective_status", "kind", "decision_type", "confidence", "title")
SEARCH_COLUMNS = ("id", "score", "effective_status", "kind", "title")
CONTRADICTION_COLUMNS = ("id", "status", "confidence", "a", "b", "explanation")
DETAIL = ("id", "title", "rationale", "kind", "decision_type", "status", "effective_status",
          "importance", "strength", "pinned", "confidence", "files_affected", "tags", "commit_sha",
          "author", "agent", "session_id", "review_by", "evidence", "rejected_alternatives",
          "dependency_constraints", "created_at", "updated_at", "last_accessed_at")


def _show(args, memory, note: str = "") -> int:
    return emit(args, memory.raw, text=fields(memory, DETAIL) + note)


def _filters(args, handle) -> dict:
    files = args.file and in_project(handle, args.file)
    return {k: v for k, v in {"status": args.status, "tag": args.tag, "file": files,
                              "kind": args.kind, "type": args.type, "author": args.author,
                              "agent": args.agent, "session_id": args.session,
                              "collection": args.collection}.items() if v}


memory_id = path_id("a memory id", "`neuralmind memory list`")


def _fraction(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to 1")
    return value


def _depth(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 4:
        raise argparse.ArgumentTypeError(f"{text!r} is not a depth from 1 to 4")
    return int(text)


def _half_life(text: str) -> tuple[str, float]:
    """``KIND=DAYS``."""
    kind, _, days = text.partition("=")
    try:
        value = float(days)
    except ValueError:
        value = 0.0
    if kind not in KINDS or not 1 <= value <= 36_500:
        raise argparse.ArgumentTypeError(f"{text!r} is not KIND=DAYS (a kind of {', '.join(KINDS)}"
                                         "; 1 to 36500 days)")
    return kind, value


_TAGS = setting("plugins.memory.models:TagsIn", "tags")


def _tag(text: str) -> str:
    """An argparse ``type``: a tag as the server takes one, so `memory tags ID --add good
    --remove ""` is refused before any request rather than after good was added."""
    _TAGS([filled(text)])
    return text


def _on_off(text: str) -> bool:
    if text.lower() not in ("on", "off", "true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not on or off")
    return text.lower() in ("on", "true")


def cmd_add(args) -> int:
    handle = project(args, register=True)
    body = {"files_affected": in_project(handle, args.file or ()), "tags": args.tag or [],
            "decision_type": args.type,
            "kind": args.kind, "importance": args.importance, "pinned": args.pinned or None,
            "confidence": args.confidence, "review_by": args.review_by, "agent": args.agent,
            "session_id": args.session, "author": args.author, "id": args.id,
            "evidence": args.evidence or [], "rejected_alternatives": args.rejected or [],
            "supersedes": args.supersedes or []}
    memory = handle.memories.add(args.title, args.rationale,
                                 **{k: v for k, v in body.items() if v not in (None, [])})
    dupes = memory.possible_duplicates
    note = "" if not dupes else "\n\npossible duplicates:\n" + "\n".join(
        f"  {d['id']}  {d['title']}" for d in dupes)
    found = memory.contradictions.get("items") or []
    if found:
        note += "\n\ncontradicts:\n" + "\n".join(
            f"  {c['id']}  {c['a'] if c['b'] == memory.id else c['b']}  ({c['confidence']}) "
            f"{c['explanation']}" for c in found)
    return _show(args, memory, note)


def cmd_show(args) -> int:
    return _show(args, project(args).memories.get(args.id))


def cmd_list(args) -> int:
    handle = project(args)
    items = handle.memories.list(**_filters(args, handle))
    rows = [m.raw for m in itertools.islice(items, args.limit)] if args.limit else \
        [m.raw for m in items]
    return emit(args, rows, rows=rows, columns=LIST_COLUMNS)


def cmd_search(args) -> int:
    handle = project(args)
    found = handle.memories.search(args.query, mode=args.mode, limit=args.limit,
                                   expand=args.expand or None, **_filters(args, handle))
    rows = [m.raw for m in found]
    emit(args, rows, rows=rows, columns=SEARCH_COLUMNS)
    note(args, found.notice)
    return 0


def cmd_edit(args) -> int:
    changes = {"rationale": args.rationale, "confidence": args.confidence, "tags": args.tags,
               "files_affected": args.files, "review_by": args.review_by, "kind": args.kind,
               "importance": args.importance, "pinned": args.pinned,
               "evidence_append": args.add_evidence, "rejected_append": args.add_rejected,
               "supersedes": args.supersedes}
    changes = {k: v for k, v in changes.items() if v is not None}
    if args.review_by == "":  # `--review-by ""` clears it, as null does over HTTP
        changes["review_by"] = None
    if not changes:
        raise CommandError("nothing to change: give --rationale, --confidence, --tags, --files, "
                           "--review-by, --kind, --importance, --pinned, --add-evidence, "
                           "--add-rejected or --supersedes")
    handle = project(args)
    if args.files:
        changes["files_affected"] = in_project(handle, args.files)
    return _show(args, handle.memories.update(args.id, if_match=args.if_match, **changes))


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


# the one change that is a list as it stands, not [old, new] (a merge's originals)
LISTED = {"merged_from"}


def _changes(changes: dict) -> str:
    """``status: ACTIVE → INVALIDATED; tags: db → db,sqlite`` from ``{field: [old, new]}``."""
    return "; ".join("{}: {} → {}".format(field, *_differing(_was(v[0]), _was(v[1]),
                                                            (CELL - len(field) - 5) // 2))
                     if isinstance(v, list) and len(v) == 2 and field not in LISTED
                     else f"{field}: {_was(v)}" for field, v in changes.items())


def _differing(old: str, new: str, room: int) -> tuple[str, str]:
    """Both sides of a long change cut to where they differ (``…proceed.`` → ``…proceed.
    (edited)``) and to ``room`` each, so a change of one field fits the table's cell whole."""
    if len(old) <= room and len(new) <= room:
        return old, new
    head = len(os.path.commonprefix([old, new]))
    tail = len(os.path.commonprefix([old[head:][::-1], new[head:][::-1]]))
    start = max(0, head - 8)

    def cut(text: str) -> str:
        part = ("…" if start else "") + text[start:len(text) - tail + min(tail, 8)]
        return part if len(part) <= room else part[:room - 1] + "…"

    return cut(old), cut(new)


def _was(value) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "[]"
    if isinstance(value, dict):  # a link: what it joins, never Python's repr
        return plain(value)
    return '""' if value in ("", None) else str(value)


def cmd_feedback(args) -> int:
    memory = project(args).memories.feedback(args.id, helpful=args.helpful, note=args.note)
    return emit(args, memory.raw, text=f"{memory.id}: confidence now {memory.confidence}")


def cmd_export(args) -> int:
    if args.json and args.format == "md":
        raise CommandError("--format md writes Markdown: leave out --json (ndjson is JSON)")
    memories = project(args).memories
    count = 0
    with whole_file(args.output) if args.output else contextlib.nullcontext(sys.stdout) as out:
        if args.format == "md":
            text = memories.export_markdown()
            out.write(text)
            count = text.count("\n## ")
        else:
            for line in memories.export():
                out.write(json.dumps(line) + "\n")
                count += 1
    if args.output:
        print(f"exported {count} memories to {args.output}", file=sys.stderr)
    return 0


SHOWN_PROBLEMS = 5  # an import's problems printed before "… and N more"


def _json_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested beyond reach
        return False


def cmd_import(args) -> int:
    if args.file == "-":
        body, name = sys.stdin.buffer.read(), "stdin"
    else:
        with open(args.file, "rb") as fh:
            body, name = fh.read(), args.file
    lines = [line for line in body.splitlines() if line.strip()]
    if lines and not any(map(_json_object, lines)):  # before the project is registered
        raise CommandError(f"{name} is not a JSONL export: no line of it is a JSON object "
                           "(import reads what `neuralmind memory export` writes with its "
                           "default --format ndjson, one record a line; --format md is for "
                           "reading, not importing)")
    try:
        result = project(args, register=True).memories.import_(body, mode=args.mode)
    except ValidationFailed as ex:  # one problem a bad line: the first few say enough
        problems = ex.field_errors()
        if len(problems) <= SHOWN_PROBLEMS + 1:
            raise
        request = f", request {ex.request_id}" if ex.request_id else ""
        raise CommandError(
            f"{ex.message} [{ex.code}, status {ex.status}{request}]"
            + "".join(f"\n  {line}" for line in problems[:SHOWN_PROBLEMS])
            + f"\n  … and {len(problems) - SHOWN_PROBLEMS:,} more", exit_code=1) from None
    return emit(args, result, text=", ".join(f"{k} {v}" for k, v in result.items()))


def cmd_link(args) -> int:
    if args.remove and args.note is not None:
        raise CommandError("--note is kept on a link when it is made: --remove takes none "
                           "(it removes the link, note and all)")
    memories = project(args).memories
    if args.remove:
        memories.unlink(args.id, args.target, args.type)
        return emit(args, {"unlinked": [args.id, args.target, args.type]},
                    text=f"removed {args.type or 'every'} link from {args.id} to {args.target}")
    if args.type is None:
        print("neuralmind: memory link: give --type (one of "
              f"{', '.join(LINK_TYPES)}) or --remove", file=sys.stderr)
        return 2
    found = memories.link(args.id, args.target, args.type, note=args.note)
    text = f"{found['source']} {found['type']} {found['target']}"
    if (end := RETIRES.get(found["type"])) and not args.json:  # which one, and is it now?
        status = memories.get(found[end]).status
        text += (f": {found[end]} (the {end}) "
                 + (f"is {status} now" if status in ("SUPERSEDED", "MERGED")
                    else f"stays {status}"))
    return emit(args, found, text=text)


def cmd_graph(args) -> int:
    graph = project(args).memories.graph(args.id, depth=args.depth)
    edges = "\n".join(f"  {e['source']} {e['type']} {e['target']}" for e in graph["edges"])
    from neuralmind.commands.common import table
    text = table(graph["nodes"], ("id", "depth", "kind", "status", "title")) + \
        ("\n\nlinks:\n" + edges if edges else "\n\nno links")
    return emit(args, graph, text=text)


def cmd_timeline(args) -> int:
    rows = project(args).memories.timeline(args.id)
    return emit(args, rows, rows=rows, columns=("at", "source", "kind", "actor", "note"))


# the options of an action-taking command, each with the one action it is for
CONTRADICTION_OPTIONS = {"status": "list", "memory": "list", "strategy": "resolve",
                         "title": "resolve", "rationale": "resolve", "threshold": "config",
                         "check_on_store": "config", "auto_resolve": "config"}
DECAY_OPTIONS = {"dry_run": "run", "enabled": "policy", "half_life": "policy",
                 "access_boost": "policy", "archive_threshold": "policy"}


def cmd_contradictions(args) -> int:
    action = args.action
    refuse_misplaced(args, "memory contradictions", CONTRADICTION_OPTIONS)
    if args.target and action not in ("check", "resolve"):
        raise CommandError(f"memory contradictions {action} takes no id ({args.target})")
    memories = project(args).memories
    if action in ("check", "resolve") and not args.target:
        print(f"neuralmind: memory contradictions {action} needs "
              f"{'a memory id' if action == 'check' else 'a contradiction id'}", file=sys.stderr)
        return 2
    if action == "resolve" and args.strategy is None:
        print(f"neuralmind: memory contradictions resolve needs --strategy (one of "
              f"{', '.join(STRATEGIES)})", file=sys.stderr)
        return 2
    if action == "check":
        out = memories.check_contradictions(args.target)
        return emit(args, out, rows=out["items"], columns=CONTRADICTION_COLUMNS)
    if action == "resolve":
        out = memories.resolve(args.target, args.strategy, title=args.title,
                               rationale=args.rationale)
        return emit(args, out, text=f"resolved {args.target} ({args.strategy}): kept "
                                    f"{', '.join(out['kept'])}; superseded "
                                    f"{', '.join(out['superseded']) or 'nothing'}"
                                    + (f"; new {out['created']}" if out["created"] else ""))
    if action == "config":
        changes = {k: v for k, v in {"threshold": args.threshold,
                                     "check_on_store": args.check_on_store}.items()
                   if v is not None}
        if args.auto_resolve is not None:
            changes["auto_resolve"] = None if args.auto_resolve == "off" else args.auto_resolve
        out = memories.contradiction_config(**changes)
        return emit(args, out, text=fields(out, list(out)))
    rows = list(memories.contradictions(status=args.status or "open", memory_id=args.memory))
    return emit(args, rows, rows=rows, columns=CONTRADICTION_COLUMNS)


def _job_text(job) -> str:
    if job.status != "done":
        return f"{job.kind} {job.status}: {(job.error or {}).get('message', '')}"
    return ""


def cmd_consolidate(args) -> int:
    job = project(args).memories.consolidate(dry_run=args.dry_run, kinds=args.kind or (),
                                             threshold=args.threshold)
    r = job.result or {}
    lines = [f"{'would merge' if r.get('dry_run') else 'merged'} {len(c['ids'])} {c['kind']} "
             f"records{' into ' + c['merged_into'] if c['merged_into'] else ''}: "
             + "; ".join(c["titles"]) for c in r.get("clusters", [])]
    text = _job_text(job) or "\n".join(lines) or f"no near-duplicates among {r.get('checked')} records"
    return emit(args, job.raw, text=text)


def cmd_decay(args) -> int:
    refuse_misplaced(args, "memory decay", DECAY_OPTIONS)
    memories = project(args).memories
    if args.action == "policy":
        changes = {k: v for k, v in {"enabled": args.enabled, "access_boost": args.access_boost,
                                     "archive_threshold": args.archive_threshold}.items()
                   if v is not None}
        if args.half_life:
            changes["half_life_days"] = dict(args.half_life)
        policy = memories.decay_policy(**changes)
        return emit(args, policy, text=fields(policy, list(policy)))
    job = memories.decay(dry_run=args.dry_run)
    r = job.result or {}
    lines = [f"{'would archive' if r.get('dry_run') else 'archived'} {c['id']} (strength "
             f"{c['strength']:.4f}) {c['title']}" for c in r.get("changes", [])]
    text = _job_text(job) or "\n".join(lines) or (
        f"nothing below the threshold among {r.get('checked')} records"
        + ("" if r.get("enabled", True) else " (decay is off for this project)"))
    return emit(args, job.raw, text=text)


def cmd_stats(args) -> int:
    stats = project(args).memories.stats()
    lines = [f"{stats['total']} memories; vectors {stats['vectors']['embedded']} embedded, "
             f"{stats['vectors']['pending']} pending"]
    for key in ("by_kind", "by_status", "by_author", "by_agent", "by_tag"):
        if stats[key]:
            lines.append(f"{key[3:]}: " + ", ".join(f"{k or '(none)'} {v}"
                                                    for k, v in stats[key].items()))
    return emit(args, stats, text="\n".join(lines))


def cmd_tags(args) -> int:
    if both := sorted(set(args.add or ()) & set(args.remove or ())):
        raise CommandError(f"--add and --remove name the same tag: {', '.join(both)}")
    if args.id is not None and args.status is not None:
        raise CommandError("--status counts the tags of records of a status (`memory tags "
                           "--status S`, without an id): a memory's own tags take none")
    memories = project(args).memories
    if args.id is None:
        if args.add or args.remove:
            print("neuralmind: memory tags --add/--remove need a memory id", file=sys.stderr)
            return 2
        rows = memories.tags(status=args.status or "ALL")
        return emit(args, rows, rows=rows, columns=("tag", "count"))
    memory = None
    if args.add:
        memory = memories.tag(args.id, *args.add)
    if args.remove:
        memory = memories.untag(args.id, *args.remove)
    memory = memory or memories.get(args.id)
    return emit(args, memory.raw, text=f"{memory.id}: {', '.join(memory.tags) or '(no tags)'}")


def _filter_flags(parser) -> None:
    parser.add_argument("--status", type=filled, help="ACTIVE (default), STALE, INVALIDATED, "
                        "ARCHIVED, SUPERSEDED, MERGED or ALL")
    parser.add_argument("--tag", action="append", help="any of these tags (repeatable)")
    parser.add_argument("--file", action="append", help="any of these files (repeatable)")
    parser.add_argument("--type", type=filled,
                        help="ARCHITECTURE, DEPENDENCY, TEST, REFACTOR, BUGFIX, CONFIG")
    parser.add_argument("--kind", action="append", type=str.lower, choices=KINDS,
                        help="any of these (repeatable)")
    parser.add_argument("--collection", type=filled,
                        help="a saved filter (flags given here override it)")
    parser.add_argument("--author", type=filled)
    parser.add_argument("--agent", type=filled)
    parser.add_argument("--session", type=filled)


def _updated_at(text: str) -> str:
    """An argparse ``type``: a record's ``updated_at`` as the server wrote it."""
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an updated_at time such as "
                                         "2026-01-31T12:00:00.000Z (`memory show ID` prints "
                                         "it)") from None
    return text


def add_commands(sub) -> None:
    from kernel.commands import command_group
    group = command_group(sub, "memory", "decisions about the code: add, search, history …")
    scoped = project_flags()

    def verb(name: str, func, help: str, with_id: bool = True):
        parser = group.add_parser(name, parents=[scoped], help=help)
        if with_id:
            parser.add_argument("id", type=memory_id, help="the memory id")
        parser.set_defaults(func=func)
        return parser

    add = verb("add", cmd_add, "record a decision", with_id=False)
    add.add_argument("title")
    add.add_argument("--rationale", "-r", required=True)
    add.add_argument("--file", action="append", help="a file it is about (repeatable)")
    add.add_argument("--tag", action="append")
    add.add_argument("--type", type=filled,
                     help="ARCHITECTURE (default), DEPENDENCY, TEST, REFACTOR, BUGFIX, CONFIG")
    add.add_argument("--kind", type=str.lower, choices=KINDS,
                     help="decision (default), fact, preference, procedure, episode")
    add.add_argument("--importance", type=_fraction, help="0–1 (default by kind)")
    add.add_argument("--pinned", action="store_true", help="never decays, never archived")
    add.add_argument("--supersedes", action="append", metavar="ID", type=memory_id,
                     help="a memory this one replaces (repeatable; it becomes SUPERSEDED)")
    add.add_argument("--confidence", type=_fraction, help="0–1 (default 1)")
    add.add_argument("--review-by", help="YYYY-MM-DD: after that day it reads as STALE")
    add.add_argument("--evidence", action="append")
    add.add_argument("--rejected", action="append", help="a rejected alternative (repeatable)")
    add.add_argument("--author", type=filled)
    add.add_argument("--agent", type=filled)
    add.add_argument("--session", type=filled)
    add.add_argument("--id", type=memory_id, help="a client-chosen id (409 when it exists)")
    verb("show", cmd_show, "one decision")
    lst = verb("list", cmd_list, "decisions, newest first", with_id=False)
    _filter_flags(lst)
    lst.add_argument("--limit", type=ranged(1), help="show at most this many")
    search = verb("search", cmd_search, "keyword, semantic or hybrid search", with_id=False)
    search.add_argument("query")
    search.add_argument("--mode", choices=["keyword", "semantic", "hybrid"])
    search.add_argument("--limit", type=ranged(1, 25), default=10,
                        help="show at most this many, 1–25 (default 10)")
    search.add_argument("--expand", action="store_true",
                        help="add the records linked to the hits (scored below them)")
    _filter_flags(search)
    edit = verb("edit", cmd_edit, "change fields (the history keeps the diff)")
    edit.add_argument("--rationale")
    edit.add_argument("--confidence", type=_fraction, help="0–1")
    edit.add_argument("--tags", nargs="*", help="replace the tags")
    edit.add_argument("--files", nargs="*", help="replace files_affected")
    edit.add_argument("--review-by", help='YYYY-MM-DD; "" clears it')
    edit.add_argument("--kind", type=str.lower, choices=KINDS)
    edit.add_argument("--importance", type=_fraction)
    edit.add_argument("--pinned", type=_on_off, metavar="on|off")
    edit.add_argument("--supersedes", action="append", metavar="ID", type=memory_id)
    edit.add_argument("--add-evidence", action="append")
    edit.add_argument("--add-rejected", action="append")
    edit.add_argument("--if-match", type=_updated_at,
                      help="refuse (412) unless updated_at is still this")
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
    exp = verb("export", cmd_export, "records with their history: JSONL, or Markdown",
               with_id=False)
    exp.add_argument("--output", "-o", type=filled, help="a file (default stdout)")
    exp.add_argument("--format", choices=["ndjson", "md"], default="ndjson",
                     help="ndjson (what import reads; default) or md (one section per record)")
    imp = verb("import", cmd_import, "load an export", with_id=False)
    imp.add_argument("file", help="a JSONL export, or - for stdin")
    imp.add_argument("--mode", choices=["skip", "overwrite"], default="skip")

    link = verb("link", cmd_link, "link two memories (or --remove the link)")
    link.add_argument("target", type=memory_id, help="the memory linked to")
    link.add_argument("--type", choices=LINK_TYPES, help="supersedes retires the target "
                      "(SUPERSEDED), merged_into the source, ID (MERGED); the others change "
                      "no status")
    link.add_argument("--note")
    link.add_argument("--remove", action="store_true", help="remove links to target "
                      "(of --type, else every type)")
    verb("graph", cmd_graph, "the memories linked to this one, to --depth").add_argument(
        "--depth", type=_depth, default=2, help="1–4 (default 2)")
    verb("timeline", cmd_timeline, "history merged with the commits on its files")
    con = verb("contradictions", cmd_contradictions, "list, check, resolve or configure "
               "contradictions", with_id=False)
    con.add_argument("action", nargs="?", default="list",
                     choices=["list", "check", "resolve", "config"])
    con.add_argument("target", nargs="?", type=path_id(
        "an id", "`neuralmind memory list` or `neuralmind memory contradictions`"),
        help="check: a memory id; resolve: a contradiction id")
    con.add_argument("--status", choices=["open", "resolved", "all"],
                     help="list: which (default open)")
    con.add_argument("--memory", type=memory_id,
                     help="list: only those involving this memory")
    con.add_argument("--strategy", choices=STRATEGIES, help="resolve: how")
    con.add_argument("--title", help="resolve --strategy manual: the new record's title")
    con.add_argument("--rationale", help="resolve --strategy manual: the new record's text")
    con.add_argument("--threshold", type=_fraction, help="config: detector confidence to report")
    con.add_argument("--check-on-store", type=_on_off, metavar="on|off",
                     help="config: check each create and patch")
    con.add_argument("--auto-resolve", choices=[*STRATEGIES[:4], "off"],
                     help="config: resolve new contradictions at once this way")
    con.set_defaults(_parser=con)  # refuse_misplaced tells a given value from the default
    cons = verb("consolidate", cmd_consolidate, "merge near-duplicate memories (a job)",
                with_id=False)
    cons.add_argument("--dry-run", action="store_true", help="list the clusters, merge nothing")
    cons.add_argument("--kind", action="append", type=str.lower, choices=KINDS,
                      help="only these (repeatable)")
    cons.add_argument("--threshold", help="cosine 0.5–1 (default 0.85)",
                      type=setting("plugins.memory.models:ConsolidateIn", "threshold"))
    dec = verb("decay", cmd_decay, "run a decay sweep, or show/change the decay policy",
               with_id=False)
    dec.add_argument("action", nargs="?", default="run", choices=["run", "policy"])
    dec.add_argument("--dry-run", action="store_true", help="run: list, archive nothing")
    dec.add_argument("--enabled", type=_on_off, metavar="on|off", help="policy: decay on or off")
    dec.add_argument("--half-life", type=_half_life, action="append", metavar="KIND=DAYS",
                     help="policy: a kind's half-life (repeatable)")
    dec.add_argument("--access-boost", type=_fraction, help="policy: importance added per recall")
    dec.add_argument("--archive-threshold", type=_fraction,
                     help="policy: a sweep archives records below this strength")
    dec.set_defaults(_parser=dec)
    verb("stats", cmd_stats, "counts by kind, status, author, agent, tag", with_id=False)
    tags = verb("tags", cmd_tags, "tags in use, or --add/--remove a memory's", with_id=False)
    tags.add_argument("id", nargs="?", type=memory_id, help="a memory id (to change its tags)")
    tags.add_argument("--add", action="append", metavar="TAG", type=_tag)
    tags.add_argument("--remove", action="append", metavar="TAG", type=_tag)
    tags.add_argument("--status", type=filled,
                      help="without an id: count records of this status (default ALL)")
