"""What CLI commands share, the kernel's and plugins' alike: sub-command groups that two
plugins can both add to."""

from __future__ import annotations

import argparse


def command_group(subparsers, name: str, help: str = "") -> argparse._SubParsersAction:
    """The sub-command group ``name`` (``eval``, ``memory`` …), made on first use, so two
    plugins can add commands under one group: ``command_group(sub, "eval").add_parser("code")``."""
    parser = subparsers.choices.get(name) or subparsers.add_parser(name, help=help)
    group = parser.get_default("_group")
    if group is None:
        group = parser.add_subparsers(dest=f"{name}_command")
        parser.set_defaults(_group=group, func=needs_command(parser, group))
    return group


def needs_command(parser: argparse.ArgumentParser, group: argparse._SubParsersAction):
    """The ``func`` of a parser run without one of its commands: usage and exit 2. Not
    argparse's ``required=True``, which says "arguments are required" before it names an
    option it does not know (``neuralmind memory --bogus``)."""
    def missing(args) -> int:
        parser.error(f"give a command: {', '.join(group.choices)}")
    return missing
