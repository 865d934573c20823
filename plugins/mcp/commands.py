"""CLI commands of the mcp plugin: ``neuralmind mcp`` (what an agent's configuration
launches) and ``neuralmind agent install|uninstall|wakeup``. Clients of the daemon: they use
``neuralmind.client`` and never load the server's packages; the SDK loads inside ``mcp``."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from neuralmind.client import (Conflict, NeuralMindAPIError, NeuralMindClient, NotFound,
                               Unauthorized, no_directory)
from neuralmind.commands.common import client, err, project_flags, repo_root, shown

log = logging.getLogger("neuralmind.mcp")


def _client(args) -> NeuralMindClient:
    """The daemon's client, starting the daemon when none runs (unless a URL names a server),
    in the settings' home (``NEURALMIND_HOME``, else the config's ``[kernel] home``), the one
    ``neuralmind daemon start`` uses: ``~/.neuralmind`` by default would start a second
    daemon there when the config's home has one, on the port that one holds."""
    return client(args, autostart=True)


def _project_id(nm: NeuralMindClient, args, meanwhile: str | None = None) -> str | None:
    """``--project`` (a directory, registered, or an id), else the repository around the
    working directory; a directory the server will not take there means no default, said with
    what to do (``meanwhile``: what the command does until then). A refused token is no such
    case: it ends the command as it ends every client command (401, from ``neuralmind.cli``)."""
    if args.project:
        try:
            return nm.projects.resolve(args.project).id
        except (NotFound, ValueError):  # the command used wrongly: exit 2, as everywhere
            err(f"--project {args.project}: not a directory here, and no project has that id "
                "(`neuralmind project list`)")
            raise SystemExit(2) from None
    root = repo_root()
    try:
        return nm.projects.resolve(root).id
    except Unauthorized:  # no project would do: the server takes nothing from this token
        raise
    except NeuralMindAPIError as ex:  # a reserved path, a team server's fixed list, …
        why, advice = ex.message, "name one with --project"
        if isinstance(ex.details, dict) and ex.details.get("permission") == "projects.write":
            # a reader's token: it reads projects, and may not register the folder it is in
            why += ", which registering it takes"
            advice = ("pass --project ID of a project this token may read (`neuralmind project "
                      "list` lists them)")
        log.warning("%s cannot be the default project: %s; %s%s", root, why, advice,
                    f" ({meanwhile})" if meanwhile else "")
        return None


def _logging(args) -> None:
    """Logs go to stderr: an agent reads protocol messages only on stdout."""
    logging.basicConfig(stream=sys.stderr, format="neuralmind: %(message)s",
                        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING)


def cmd_mcp(args) -> int:
    """Serve MCP on stdin/stdout for an agent, relayed to the daemon's /v1/mcp."""
    _logging(args)
    nm = _client(args)
    project = _project_id(nm, args, "until then, tool calls must name one")
    from plugins.mcp.stdio import Relay, serve
    log.info("relaying to %s/v1/mcp (project %s)", nm.url, project or "none")
    serve(Relay(nm, project, restart=lambda: _client(args)))
    return 0


def cmd_wakeup(args) -> int:
    """What a SessionStart hook prints: the project's overview (starting the daemon)."""
    _logging(args)
    nm = _client(args)
    project = _project_id(nm, args)
    if project is None:
        return 1
    try:
        result = nm.project(project).wakeup()
    except Conflict as ex:
        if ex.code != "index_not_built":
            raise
        said = (f"NeuralMind: project {project} has no code index yet; `neuralmind up` builds "
                "it (or call the build_index tool).")
        print(json.dumps({"project_id": project, "built": False, "message": said}, indent=2)
              if args.json else said)
        return 0
    if args.json:
        print(json.dumps({**result.raw, "built": True}, indent=2))
    else:
        print(shown(result.context + (f"\n\nwarning: {result.warning}" if result.warning
                                      else ""), lines=True))  # a README's escape, as text
    return 0


def _target(args) -> Path | None:
    if args.project and (why := no_directory(args.project)):
        err(f"--project {args.project}: {why}")
        return None
    return (Path(args.project).expanduser() if args.project else repo_root()).resolve()


def cmd_agent(args) -> int:
    from plugins.mcp import agents
    project = _target(args)
    if project is None:
        return 2
    plan = agents.install if args.action == "install" else agents.uninstall
    try:
        edits = plan(args.agent, project, pinned=bool(args.project))
        if args.print:  # install: what it adds; uninstall: what each file would hold after
            for e in edits:
                print(f"# {e.path}\n{e.snippet}\n" if args.action == "install" else
                      f"# {e.path}: unchanged\n" if e.before == e.after else
                      f"# {e.path}: removed\n" if e.after is None else
                      f"# {e.path} without neuralmind's entries\n{e.after}\n")
            return 0
        lines = agents.apply(edits)
    except agents.AgentError as ex:  # names the file and what is wrong; nothing was written
        err(str(ex))
        return ex.exit_code
    except OSError as ex:  # a step agents.py does not name (none known): still in words
        err(agents.in_words(ex, Path(ex.filename or "the agent's configuration")))
        return 1
    if args.json:
        print(json.dumps({"agent": args.agent, "action": args.action, "project": str(project),
                          "files": [{"path": str(e.path), "changed": e.before != e.after,
                                     "said": line.removeprefix(f"{e.path}: ")}
                                    for e, line in zip(edits, lines, strict=True)]}, indent=2))
        return 0
    print("\n".join(lines))
    if args.action == "install" and any(e.before != e.after for e in edits):
        where = ("in whichever directory it runs (its config is global; --project pins one)"
                 if args.agent == "codex" and not args.project else "for this project")
        print(f"{args.agent} now starts `neuralmind mcp` {where}"
              + (" (approve the server when Claude Code asks)" if args.agent == "claude-code"
                 else ""))
    return 0


def add_commands(subparsers) -> None:
    from neuralmind import command_group
    from plugins.mcp.agents import AGENTS
    # no --json: mcp writes only MCP messages on stdout, nothing for a --json to shape
    mcp = subparsers.add_parser("mcp", parents=[project_flags(json_flag=False)],
                                help="serve MCP over stdio for an agent (relayed to the "
                                     "daemon, which it starts when needed)")
    mcp.add_argument("--verbose", "-v", action="store_true", help="log each step on stderr")
    mcp.set_defaults(func=cmd_mcp)

    group = command_group(subparsers, "agent", "wire a coding agent to NeuralMind over MCP")
    for action, text in (("install", "write the agent's MCP configuration (a backup is kept)"),
                         ("uninstall", "remove exactly what install added")):
        p = group.add_parser(action, help=text)
        p.add_argument("agent", choices=AGENTS)
        p.add_argument("--project", metavar="PATH",
                       help="the repository (default: the one around here)")
        shown = p.add_mutually_exclusive_group()
        shown.add_argument("--print", action="store_true",
                           help="print the configuration instead of writing it")
        shown.add_argument("--json", action="store_true",
                           help="say what was written as JSON: {agent, action, project, files}")
        p.set_defaults(func=cmd_agent, action=action)
    wakeup = group.add_parser("wakeup", parents=[project_flags()],
                              help="print the project's overview (the SessionStart hook)")
    wakeup.set_defaults(func=cmd_wakeup)
