"""``neuralmind project impact|next|neighbors|activity|savings|ingest|documents|
remove-document|validate``: the index's code intelligence from the command line, through the
daemon (``neuralmind.client``). Ranges and types the server enforces are checked here first,
so a wrong value is named before any request. FILE arguments are read as a shell reads them
when they name a file here."""

from __future__ import annotations

import argparse
from pathlib import Path

from neuralmind.client import DOCUMENT_TYPES
from neuralmind.commands.common import (emit, err, filled, in_project, path_id, project,
                                        project_flags, ranged, table)

LEARNED_LIMIT = 200  # GET …/neighbors/synaptic takes limit 1–200


def _where(node: dict) -> str:
    return f"{node['path']}:{node['line']} {node['label']}"


def _media_type(text: str) -> str:
    """An argparse ``type``: a media type ``POST …/documents`` reads (``ingest.TYPES``)."""
    from plugins.index import ingest  # when the option is given: the CLI starts without it
    if ingest.media_type(filled(text), "") not in ingest.TYPES:
        raise argparse.ArgumentTypeError(f"{text} is not a type ingest reads "
                                         f"({', '.join(ingest.TYPES)})")
    return text


def cmd_impact(args) -> int:
    if not args.files and not args.node:
        err("name the changed files (`project impact src/a.py`) or nodes (`--node ID`)")
        return 2
    handle = project(args)
    out = handle.impact(in_project(handle, args.files), args.node or (), depth=args.depth,
                        limit=args.limit, guessed=not args.exact)
    lines = []
    for item in out["impacted"]:
        via = " ← ".join(f"{s['src']['label']} {s['kind']} {s['dst']['label']}"
                         for s in item["path"][:3])
        lines.append(f"{item['distance']}  {_where(item['node'])}   ({via})")
    lines.append("")
    lines += [f"{f['distance']}  {f['path']}  "
              + (f"{f['nodes']} node(s)" if f["distance"] else "changed") + "".join(
        f"\n     decision {d['id']}: {d['title']}" for d in f["decisions"]) for f in out["files"]]
    if out["truncated"]:
        lines.append(f"(more than {args.limit} impacted: raise --limit)")
    if not out["impacted"]:
        lines.insert(0, "nothing in the index depends on that (within depth "
                        f"{args.depth})")
    return emit(args, out, text="\n".join(lines))


def cmd_next(args) -> int:
    handle = project(args)
    out = handle.next_files(in_project(handle, args.files), task=args.task, limit=args.n,
                            full=True)
    files = out["files"]
    rows = [{"score": f["score"], "path": f["path"],
             "why": "; ".join(f"{w['kind']}: {w['detail']}" for w in f["why"])} for f in files]
    if out["not_indexed"] and not args.json:  # --json: the answer's own not_indexed says it
        err(f"left out, not in the index: {', '.join(out['not_indexed'])} (a new file counts "
            "once a build has indexed it: `neuralmind project build`)")
    return emit(args, out, rows=rows, columns=("score", "path", "why"))


def cmd_neighbors(args) -> int:
    if (args.file is None) == (args.node is None):
        err("name a file (`project neighbors src/a.py`) or a node (`--node ID`)"
            + (", not both" if args.file else ""))
        return 2
    if args.learned and args.file is None:
        err("learned neighbours are kept per file: name a file, not --node")
        return 2
    if args.learned and args.limit > LEARNED_LIMIT:
        err(f"--limit: {args.limit} is outside 1–{LEARNED_LIMIT} with --learned")
        return 2
    if args.learned and args.depth is not None:
        err("--depth follows structural edges; --learned lists the files learned with FILE")
        return 2
    handle = project(args)
    file = None if args.file is None else in_project(handle, [args.file])[0]
    if args.learned:
        out = handle.learned_neighbors(file, limit=args.limit)
        if out["indexed"] or out["neighbors"]:
            return emit(args, out, rows=out["neighbors"],
                        columns=("weight", "count", "file", "updated_at"))
        if args.json:  # the answer (indexed: false) for a script, and the same exit code
            emit(args, out)
        err(f"{out['file']} is not an indexed file, and nothing was learned with it "
            "(`neuralmind project build` indexes a new file)")
        return 1
    out = handle.neighbors(file=file, node=args.node, depth=args.depth or 1, limit=args.limit)
    lines = []
    for relation in ("callers", "callees", "importers", "imports", "subclasses", "bases"):
        if out[relation]:
            lines.append(f"{relation}:")
            lines += [f"  {i['distance']}  {_where(i['node'])}"
                      + ("  (guessed by name)" if i["how"] == "name" else "")
                      for i in out[relation]]
    if out["unresolved"]:
        lines.append("unresolved (other packages, builtins):")
        lines += [f"  {u['kind']} {u['ref']}  from {u['source']['label']}"
                  for u in out["unresolved"][:20]]
    return emit(args, out, text="\n".join(lines) or "no neighbours in the index")


def cmd_activity(args) -> int:
    handle = project(args)
    out = handle.activity(in_project(handle, args.files), kind=args.kind, session=args.session)
    note = "" if out["learning"] else " (learning is off on this server: nothing linked)"
    if out["not_indexed"]:
        note += (f"\nleft out, not in the index: {', '.join(out['not_indexed'])} (a new file "
                 "counts once a build has indexed it: `neuralmind project build`)")
    return emit(args, out, text=f"recorded {out['files']} file(s) as {out['kind']} in session "
                f"{out['session']}: {out['pairs']} pair(s) linked{note}")


def cmd_savings(args) -> int:
    out = project(args).savings(days=args.days)
    t = out["total"]
    text = table(out["per_day"], ("day", "kind", "calls", "tokens_served", "tokens_whole",
                                  "tokens_saved")) if out["per_day"] else "(no query or search yet)"
    ratio = ("" if not t["ratio"] else f" — {t['ratio']}× fewer tokens than the whole files"
             if t["ratio"] >= 1 else " — more than the whole files: answers carried their "
             "neighbours' context too")
    return emit(args, out, text=f"{text}\n\ntotal: {t['calls']} calls, {t['tokens_served']:,} "
                f"tokens served for {t['tokens_whole']:,} in the files{ratio}")


def cmd_ingest(args) -> int:
    path = Path(args.path)
    if not path.is_file():
        err(f"{args.path}: no such file" if not path.exists() else f"{args.path} is not a file")
        return 2
    suffix = Path(args.name or path.name).suffix.lower()
    if args.type is None and suffix not in DOCUMENT_TYPES:
        named = f"--name {args.name}" if args.name else args.path
        err(f"{named}: {suffix or 'a name without an extension'} is not a type ingest reads "
            f"({', '.join(sorted(DOCUMENT_TYPES))}); name its type with --type if it is one")
        return 2
    out = project(args, register=True).ingest(path, name=args.name, content_type=args.type)
    return emit(args, out, text=f"ingested {out['id']} {out['name']}: {out['nodes']} section(s) "
                f"from {out['size']:,} bytes of {out['content_type']}; remove it with "
                f"`neuralmind project remove-document {out['id']}`")


def cmd_documents(args) -> int:
    docs = project(args).documents()
    return emit(args, docs, rows=docs,
                columns=("id", "name", "content_type", "size", "nodes", "created_at"))


def cmd_remove_document(args) -> int:
    project(args).delete_document(args.id)
    return emit(args, {"id": args.id, "removed": True}, text=f"removed {args.id}")


def cmd_validate(args) -> int:
    out = project(args).validate(write=args.write)
    rows = [{**c, "ok": "ok" if c["ok"] else "NO", "repaired": "yes" if c["repaired"] else ""}
            for c in out["checks"]]
    emit(args, out, rows=rows, columns=("name", "ok", "repaired", "detail"))
    if not out["ok"] and not args.write and not args.json:
        print("\nrepair with `neuralmind project validate --write` (admin)")
    return 0 if out["ok"] else 1


def register(group) -> None:
    scoped = project_flags()
    p = group.add_parser("impact", parents=[scoped],
                         help="what depends on changed files or nodes")
    p.add_argument("files", nargs="*", help="changed files (project-relative)")
    p.add_argument("--node", action="append", help="a changed node's id (repeatable)")
    p.add_argument("--depth", type=ranged(1, 6), default=2, help="edges to follow (1–6, 2)")
    p.add_argument("--limit", type=ranged(1, 1000), default=100,
                   help="impacted nodes to list at most (1–1000, 100)")
    p.add_argument("--exact", action="store_true", help="leave out edges guessed by name")
    p.set_defaults(func=cmd_impact)
    p = group.add_parser("next", parents=[scoped], help="the files to look at next, with why")
    p.add_argument("files", nargs="+", help="the files open now")
    p.add_argument("--task", help="what you are doing (searched for)")
    p.add_argument("-n", type=ranged(1, 50), default=10, help="files (1–50, 10)")
    p.set_defaults(func=cmd_next)
    p = group.add_parser("neighbors", parents=[scoped],
                         help="structural (or --learned) neighbours of a file or node")
    p.add_argument("file", nargs="?")
    p.add_argument("--node", help="a node's id instead of a file")
    p.add_argument("--depth", type=ranged(1, 4), help="1–4 (1); not with --learned")
    p.add_argument("--limit", type=ranged(1, 500), default=50,
                   help=f"1–500 (50); with --learned 1–{LEARNED_LIMIT}")
    p.add_argument("--learned", action="store_true", help="the files learned to go with it")
    p.set_defaults(func=cmd_neighbors)
    p = group.add_parser("activity", parents=[scoped],
                         help="report files read, edited or tested (trains next)")
    p.add_argument("files", nargs="+")
    p.add_argument("--kind", choices=["read", "edit", "test"], default="read")
    p.add_argument("--session", help="groups reports across calls (default: your token)")
    p.set_defaults(func=cmd_activity)
    p = group.add_parser("savings", parents=[scoped],
                         help="tokens served vs the whole files, per day")
    p.add_argument("--days", type=ranged(1, 366), default=30)
    p.set_defaults(func=cmd_savings)
    p = group.add_parser("ingest", parents=[scoped],
                         help="index a document that is not in the repository (md, txt, html, pdf)")
    p.add_argument("path", type=filled, help="the file to send")
    p.add_argument("--name", type=filled, help="its name in the index (default: the file's)")
    p.add_argument("--type", type=_media_type,
                   help="its media type (default: from the name's extension)")
    p.set_defaults(func=cmd_ingest)
    p = group.add_parser("documents", parents=[scoped], help="the ingested documents")
    p.set_defaults(func=cmd_documents)
    p = group.add_parser("remove-document", parents=[scoped],
                         help="take an ingested document out of the index")
    p.add_argument("id", type=path_id("a document id", "`neuralmind project documents`"),
                   help="its id (doc_…), as `project documents` lists it")
    p.set_defaults(func=cmd_remove_document)
    p = group.add_parser("validate", parents=[scoped],
                         help="check the index and learned state; --write repairs (admin)")
    p.add_argument("--write", action="store_true")
    p.set_defaults(func=cmd_validate)
