"""``neuralmind up`` and ``neuralmind project …``: register, build, ask — through the daemon."""

from __future__ import annotations

import json
import os

from neuralmind.client import Job, NeuralMindClient, NotFound, no_directory
from neuralmind.commands.common import (CommandError, client, common_flags, counted, emit, err,
                                        fields, filled, git_root, note, port, project,
                                        project_flags, ranged, repo_root, shown)
from neuralmind.commands.progress import ProgressBar, detached_on_interrupt, job_summary

FIRST_QUERY = "what does this project do?"  # what `up` suggests; the README and quickstart too
PROJECT_COLUMNS = ("id", "name", "path", "registered_at")
HIT_COLUMNS = ("score", "source_file", "line", "label", "file_type")
# what `POST …/search` takes as file_type (plugins/index/models.py FileType; not imported:
# the CLI starts without the server's models)
FILE_TYPES = ("code", "docs", "config")
AGENT_FOLDERS = ((".claude", "claude-code"), (".cursor", "cursor"))  # what `up` suggests wiring


def cmd_add(args) -> int:
    if args.path and (why := no_directory(args.path)):
        raise CommandError(f"{args.path}: {why} (give the repository to register)")
    p = client(args).projects.add(args.path or repo_root())
    return emit(args, p.raw, text=f"{p.id}  {p.path or p.name}")


def cmd_list(args) -> int:
    rows = [p.raw for p in client(args).projects.list()]
    return emit(args, rows, rows=rows, columns=PROJECT_COLUMNS)


def cmd_show(args) -> int:
    p = project(args).info
    return emit(args, p.raw, text=fields(p, ("id", "name", "path", "registered_at", "alias", "status")))


def cmd_remove(args) -> int:
    handle = project(args)
    handle.remove()
    return emit(args, {"removed": handle.id},
                text=f"unregistered {handle.id} (its files and .neuralmind/ are untouched)")


def cmd_build(args) -> int:
    """Build and follow the job to its end (exit 1 unless done); ``--no-wait`` only starts it
    (exit 0 once the server has it)."""
    handle = project(args, register=True)
    bar = ProgressBar(quiet=args.json)
    with detached_on_interrupt(bar):
        job = handle.build(full=args.full, wait=not args.no_wait, on_progress=bar)
    if not job.finished:
        return emit(args, job.raw, text=f"build job {job.id} {job.status}: follow it with "
                    f"`neuralmind job wait {job.id}`, stop it with `neuralmind job cancel "
                    f"{job.id}`")
    note = _reindex_note(job.result) if isinstance(job.result, dict) else None
    emit(args, job.raw, text=job_summary(job) + (f"\n{note}" if note else ""))
    return 0 if job.status == "done" else 1


def cmd_search(args) -> int:
    hits = project(args).search(args.query, n=args.n, mode=args.mode, file_type=args.file_type)
    rows = [h.raw for h in hits]
    emit(args, rows, rows=rows, columns=HIT_COLUMNS)
    note(args, hits.notice)
    return 0


def cmd_query(args) -> int:
    result = project(args).query(args.question, query_type=args.type,
                                 context_budget=args.budget, trace=args.trace)
    tokens = result.tokens
    trace = (f"\n-- trace:\n{json.dumps(result.trace, indent=2)}"
             if args.trace and result.trace is not None else "")
    return emit(args, result.raw, text=f"{result.context}\n\n-- {tokens.total} tokens "
                f"(L0 {tokens.l0}, L1 {tokens.l1}, L2 {tokens.l2}, L3 {tokens.l3}); "
                f"layers {', '.join(result.layers_used)}; {result.search_hits} hits{trace}")


def cmd_wakeup(args) -> int:
    result = project(args).wakeup()
    warning = f"\n\nwarning: {result.warning}" if result.warning else ""
    return emit(args, result.raw, text=f"{result.context}{warning}")


def cmd_stats(args) -> int:
    stats = project(args).stats()
    return emit(args, stats, text=fields(stats, list(stats)))


# why a build re-indexed files whose content did not change (the result's `reindex_reason`)
REINDEX_WHY = {
    "layout": "this NeuralMind indexes them differently than the one that built the index",
    "settings": "the index was built with other [index] embed_mode, embed_chars or "
                "test_embed_chars settings",
    "full": "a full build re-indexes every file",
}


def _reindex_note(r: dict) -> str | None:
    """One line on the unchanged files a build re-indexed, and why; None when there were none."""
    n = r.get("files_reindexed") or 0
    if not n:
        return None
    why = REINDEX_WHY.get(r.get("reindex_reason"), "the index was built differently")
    changed, deleted = r.get("files_changed", 0), r.get("files_deleted", 0)
    return (f"re-indexed {counted(n, 'file')}: {why}"
            + (f" (besides {changed} changed, {deleted} deleted)" if changed or deleted else ""))


def _incremental_note(job: Job, was_built: bool) -> str:
    r = job.result if isinstance(job.result, dict) else {}
    if not was_built:
        return "first build: every file was indexed"
    if note := _reindex_note(r):
        return note
    return (f"incremental build: re-indexed only the {r.get('files_changed', '?')} changed "
            f"file(s) of the repository's {r.get('files_total', '?')} "
            f"({r.get('files_deleted', 0)} deleted)")


def cmd_up(args) -> int:
    """Start the daemon if needed, register this repository, build it, say what to try next
    (``--json``: one object with the same facts, for scripts). A server named (``--url``,
    NEURALMIND_API_URL) is used as it is: no daemon, and no token file of this home."""
    from kernel.config import load_settings
    from neuralmind.commands.server import check_port, start_daemon
    if args.path and (why := no_directory(args.path)):
        raise CommandError(f"{args.path}: {why} (give the repository to index)")
    say = (lambda text: None) if args.json else (lambda text: print(shown(text, lines=True)))
    settings = load_settings(args.config)
    remote = bool(args.url or os.environ.get("NEURALMIND_API_URL"))
    nm = NeuralMindClient(url=args.url, token=args.token, home=settings.home)
    started = None
    if not nm._answers():
        if remote:
            err(f"no NeuralMind server answers at {nm.url}")
            return 1
        info, spawned = start_daemon(args.config, args.port)
        # a start beside this one (a second `up`) may have spawned it: this one found it
        if not spawned:
            check_port(info["url"], args.port)
        started = info if spawned else None
        say(f"{'started the daemon' if spawned else 'daemon already running'} at {info['url']} "
            f"(pid {info['pid']})")
        nm = NeuralMindClient(url=args.url, token=args.token, home=settings.home)
    else:
        from kernel.daemon import other_code, read_discovery
        if not remote:
            check_port(nm.url, args.port)
        local = None if remote else read_discovery(settings.home)
        say(f"using the server at {nm.url}" if remote else
            f"daemon already running at {nm.url}" + (other_code(local) if local else ""))
    root = args.path or repo_root()
    handle = nm.project(root)
    say(f"project {handle.id} → {handle.info.path or root}"
        + ("" if args.path or git_root() else "  (not in a git repository: this folder)"))
    was_built = _built(handle)
    bar = ProgressBar(quiet=args.json)
    try:
        with detached_on_interrupt(bar):
            job = handle.build(wait=True, on_progress=bar)
    except NotFound as ex:
        if ex.code != "not_found":
            raise
        say("the index plugin is not enabled on this server: nothing to build")
        job = None
    token_at = None if remote else settings.home / "token"  # a server named has its own
    if args.json:
        print(json.dumps({"url": nm.url, "daemon_started": started is not None,
                          "pid": started and started["pid"], "project": handle.info.raw,
                          "first_build": not was_built, "job": job and job.raw,
                          "token_file": token_at and str(token_at)}, indent=2, default=str))
        return 0 if job is None or job.status == "done" else 1
    if job is not None:
        say(job_summary(job))
        if job.status != "done":
            return 1
        say(_incremental_note(job, was_built))
    print(f"\nURL:   {nm.url}/v1  (API docs: {nm.url}/v1/docs)")
    if token_at is not None:
        print(f"token: {token_at}  (send it as `Authorization: Bearer <token>`)")
    print(f'try:   neuralmind project query "{FIRST_QUERY}"')
    print('       neuralmind memory add "Use SQLite WAL" --rationale "readers never block writers"')
    print('       neuralmind ask "why do we use WAL?"    ·    neuralmind ui  (the dashboard)')
    for folder, agent in AGENT_FOLDERS:
        if os.path.isdir(os.path.join(root, folder)):
            print(f"agent: neuralmind agent install {agent}   (found {folder}/: gives {agent} "
                  "NeuralMind's tools over MCP)")
    return 0


def _built(handle) -> bool:
    """Whether the project had an index before this build."""
    try:
        return bool(handle.stats().get("built"))
    except NotFound:
        return False


def add_commands(sub) -> None:
    from kernel.commands import command_group
    up = sub.add_parser("up", parents=[common_flags()],
                        help="start the daemon, register this repository and build it")
    up.add_argument("path", nargs="?", type=filled,
                    help="the repository (default: the one around here)")
    up.add_argument("--config", help="TOML config for the daemon")
    up.add_argument("--port", type=port, help="the daemon's port when it has to start")
    up.set_defaults(func=cmd_up)

    group = command_group(sub, "project", "projects and their code index: add, build, "
                          "search, query, impact … (`neuralmind project -h` lists every command)")
    common, scoped = common_flags(), project_flags()
    add = group.add_parser("add", parents=[common], help="register a directory (idempotent)")
    add.add_argument("path", nargs="?", type=filled, help="default: the repository around here")
    add.set_defaults(func=cmd_add)
    group.add_parser("list", parents=[common], help="the projects you can see").set_defaults(func=cmd_list)
    group.add_parser("show", parents=[scoped], help="one project").set_defaults(func=cmd_show)
    group.add_parser("remove", parents=[scoped],
                     help="unregister (files untouched)").set_defaults(func=cmd_remove)
    build = group.add_parser("build", parents=[scoped], help="index the code (incremental)")
    build.add_argument("--full", action="store_true", help="re-index every file")
    build.add_argument("--no-wait", action="store_true", help="print the job and return")
    build.set_defaults(func=cmd_build)
    search = group.add_parser("search", parents=[scoped], help="search the code index")
    search.add_argument("query")
    search.add_argument("-n", type=ranged(1, 50), default=10, help="results (1–50, 10)")
    search.add_argument("--mode", choices=["keyword", "semantic", "hybrid"])
    search.add_argument("--file-type", choices=FILE_TYPES,
                        help="only hits in files of this type: code, docs (Markdown, text, "
                             "ingested documents) or config (JSON, YAML, TOML …); default: all")
    search.set_defaults(func=cmd_search)
    query = group.add_parser("query", parents=[scoped], help="token-budgeted context for a question")
    query.add_argument("question")
    query.add_argument("--type", default="auto", choices=["auto", "code", "docs"])
    query.add_argument("--budget", type=ranged(256, 200_000),
                       help="context budget in tokens (256–200000; default 8000)")
    query.add_argument("--trace", action="store_true")
    query.set_defaults(func=cmd_query)
    group.add_parser("wakeup", parents=[scoped],
                     help="L0 + L1: what an agent reads first").set_defaults(func=cmd_wakeup)
    group.add_parser("stats", parents=[scoped], help="index counts").set_defaults(func=cmd_stats)
