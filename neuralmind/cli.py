"""The ``neuralmind`` command. Exit codes: 0 ok, 1 API or runtime error, 2 usage.

Server commands (``serve``, ``daemon``, ``openapi``) run the kernel; ``up``, ``project`` and
``memory`` are clients of the daemon (``neuralmind.commands``); plugins add theirs through
``register_commands``, sharing groups with ``neuralmind.command_group``."""

from __future__ import annotations

import argparse
import os
import sys

from kernel import __version__
from kernel.config import ConfigError, load_settings


def build_parser() -> argparse.ArgumentParser:
    from neuralmind.commands import memories, projects, server
    parser = argparse.ArgumentParser(prog="neuralmind", description="NeuralMind memory server")
    parser.add_argument("--version", action="version", version=f"neuralmind {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    server.add_commands(sub)
    projects.add_commands(sub)
    memories.add_commands(sub)
    _plugin_commands(sub)
    return parser


def _plugin_commands(sub) -> None:
    """Sub-commands plugins add (``register_commands``). A plugin that fails to load leaves
    out only its own commands (the server reports it at start-up); a config error, all."""
    from kernel.plugins import PluginError, make_plugin_manager
    try:
        names = load_settings().kernel.plugins
    except ConfigError:
        return
    for name in names:
        try:
            pm = make_plugin_manager([name])
        except PluginError:
            continue
        pm.hook.register_commands(kernel=None, subparsers=sub)


def main(argv: list[str] | None = None) -> int:
    from neuralmind.client import DaemonNotRunning, NeuralMindAPIError
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except ConfigError as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    except NeuralMindAPIError as ex:
        print(f"neuralmind: {ex.message} [{ex.code}, status {ex.status}, request {ex.request_id}]",
              file=sys.stderr)
        for e in (ex.details or {}).get("errors") or ():  # what did not validate, field by field
            print(f"  {'.'.join(map(str, e.get('loc') or ())) or '-'}: {e.get('msg')}",
                  file=sys.stderr)
        return 1
    except DaemonNotRunning as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `neuralmind … | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
