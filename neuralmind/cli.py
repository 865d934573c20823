"""The ``neuralmind`` command. Exit codes: 0 ok, 1 API or runtime error, 2 usage, 130 Ctrl-C.

Server commands (``serve``, ``daemon``, ``openapi``) run the kernel and ``storage`` opens its
stores; ``up``, ``project`` and ``memory`` are clients of the daemon (``neuralmind.commands``);
plugins add theirs through ``register_commands``, sharing groups with
``neuralmind.command_group``."""

from __future__ import annotations

import argparse
import os
import sys

from kernel import __version__
from kernel.commands import needs_command
from kernel.config import DEFAULT_PLUGINS, ConfigError, load_settings


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole CLI; ``argv`` (the command line about to be parsed) can name the ``--config``
    whose plugins' commands it offers."""
    from neuralmind.commands import jobs, memories, projects, server, storage
    parser = argparse.ArgumentParser(prog="neuralmind", description="NeuralMind memory server")
    parser.add_argument("--version", action="version", version=f"neuralmind {__version__}")
    sub = parser.add_subparsers(dest="command")
    parser.set_defaults(func=needs_command(parser, sub))
    server.add_commands(sub)
    projects.add_commands(sub)
    memories.add_commands(sub)
    jobs.add_commands(sub)
    storage.add_commands(sub)
    _plugin_commands(sub, _enabled(argv or []))
    return parser


def _config_given(argv: list[str]) -> str | None:
    """The command line's ``--config`` (its last, as argparse reads it)."""
    found = None
    for flag, value in zip(argv, [*argv[1:], None]):
        if flag == "--config":
            found = value
        elif flag.startswith("--config="):
            found = flag.split("=", 1)[1]
    return found


def _enabled(argv: list[str]) -> list[str]:
    """The plugins whose commands are offered: those of the config (the command line's
    ``--config``, else ``$NEURALMIND_CONFIG``'s), and those the running daemon serves — it may
    have been started with another config (its discovery file lists them). With no config
    that can be read, a command given a server (``--url``, ``NEURALMIND_API_URL``) — which
    needs none — is offered the default plugins' commands."""
    try:
        settings = load_settings(_config_given(argv))
    except ConfigError:
        try:  # the command, or the hint for a command left out, reports the --config given
            settings = load_settings()
        except ConfigError:
            named = os.environ.get("NEURALMIND_API_URL") or any(
                a == "--url" or a.startswith("--url=") for a in argv)
            return list(DEFAULT_PLUGINS) if named else []
    return list(dict.fromkeys([*settings.kernel.plugins,
                               *(daemon_serves(settings.home)[1] or [])]))


def daemon_serves(home) -> tuple[str | None, list[str] | None]:
    """The URL of the daemon running in ``home`` and the plugins it serves, as its discovery
    file lists them (None: none runs, or its file lists none)."""
    from kernel.daemon import pid_alive, read_discovery
    daemon = read_discovery(home) or {}
    if not pid_alive(daemon.get("pid")):
        return None, None
    plugins = daemon.get("plugins")
    return daemon.get("url"), plugins if isinstance(plugins, list) else None


def _plugin_commands(sub, names: list[str]) -> None:
    """Sub-commands plugins add (``register_commands``). A plugin that fails to load leaves
    out only its own commands (the server reports it at start-up); one whose hook raises (or
    adds a command another has) leaves out its commands with a line saying why."""
    from kernel.plugins import PluginError, each, make_plugin_manager
    for name in names:
        try:
            pm = make_plugin_manager([name])
        except PluginError:
            continue
        try:
            each(pm, "register_commands", doing="adds no commands", kernel=None, subparsers=sub)
        except PluginError as ex:
            print(f"neuralmind: {ex}", file=sys.stderr)


def _plugin_not_enabled(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """For a command no enabled plugin adds — a group's word (`ask`) or a word inside a group
    (`project impact`, `eval code`) —: the installed plugin that would, so the user learns
    what to enable rather than that the word is unknown."""
    from kernel.plugins import PluginError, available, each, make_plugin_manager
    words = _unknown_command(parser, [a for a in argv if not a.startswith("-")])
    if words is None:
        return None
    try:  # the config's fault (the --config given, else $NEURALMIND_CONFIG's) is said, not
        load_settings(_config_given(argv))  # the plugins it names: they were never read
    except ConfigError as ex:
        return str(ex)
    for name in sorted(available()):
        probe = argparse.ArgumentParser()
        try:
            each(make_plugin_manager([name]), "register_commands", kernel=None,
                 subparsers=probe.add_subparsers())
        except PluginError:
            continue
        if _unknown_command(probe, words) is None:
            return (f"`neuralmind {' '.join(words)}` comes with the {name} plugin, which neither "
                    "this configuration nor the running daemon enables: add "
                    f"\"{name}\" to [kernel] plugins in the config (or to NEURALMIND_PLUGINS)")
    return None


def _unknown_command(parser: argparse.ArgumentParser, words: list[str]) -> list[str] | None:
    """The command words up to the first that ``parser``'s groups do not know (`project
    impact`), or None when each is known up to a command's own arguments."""
    for depth, word in enumerate(words):
        group = _subcommands(parser)
        if group is None:  # a command: the rest are its arguments
            return None
        if word not in group.choices:
            return words[:depth + 1]
        parser = group.choices[word]
    return None


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _utf8(arg: str) -> bool:
    """Whether a command-line argument is UTF-8 text: the OS hands other bytes over as lone
    surrogates (PEP 383), which no request can carry."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def client_error(ex: Exception, args=None) -> int:
    """Print what the client raised (``NeuralMindError``: about the server, or what was
    given — never a bug here, so no traceback) and answer the exit code: 2 for a URL or token
    given wrongly (the ValueErrors), else 1. A timeout's hint names the Python client's
    ``timeout=``, which no flag sets here: it is left out. A 401 says where the token sent came
    from (a stale ``NEURALMIND_API_TOKEN`` hides the home's own; a token given is --token's,
    not the Python client's ``token=``), never the token. A route the daemon lacks says why
    (:func:`not_served`)."""
    from neuralmind.client import TOKEN_GIVEN, NeuralMindAPIError, TimedOut, Unauthorized
    from neuralmind.commands.common import err
    if isinstance(ex, NeuralMindAPIError):  # a message that may echo what was typed
        request = f", request {ex.request_id}" if ex.request_id else ""
        wrong = ex.field_errors()  # one: what is wrong leads the line; more: a line each
        head = f"{wrong[0]} ({ex.message})" if len(wrong) == 1 else ex.message
        if isinstance(ex, Unauthorized) and ex.token_from:
            head += "; " + ("the token sent was the one given (--token)"
                            if ex.token_from == TOKEN_GIVEN else ex.token_from)
        if ex.code == "not_found" and (why := not_served(args)):
            head += f": {why}"
        err(f"{head} [{ex.code}, status {ex.status}{request}]"
            + "".join(f"\n  {line}" for line in wrong if len(wrong) > 1))
        return 1
    err(str(ex.message if isinstance(ex, TimedOut) else ex))
    return 2 if isinstance(ex, ValueError) else 1


def not_served(args) -> str | None:
    """Why the home's daemon has no route for a command (404 ``not_found``) when it runs
    without a plugin this configuration enables — started with another config, or before
    the config changed —: so, and to restart it; None when it runs them all, or the command
    went to a server named by --url or NEURALMIND_API_URL (whose config is not known here)."""
    if getattr(args, "url", None) or os.environ.get("NEURALMIND_API_URL"):
        return None
    try:
        settings = load_settings()
    except ConfigError:
        return None
    url, served = daemon_serves(settings.home)
    missing = [name for name in settings.kernel.plugins if name not in (served or ())]
    if url is None or served is None or not missing:
        return None
    plugins = (f"the {missing[0]} plugin, which this configuration enables, and so serves "
               "none of its routes" if len(missing) == 1 else
               f"the {', '.join(missing[:-1])} and {missing[-1]} plugins, which this "
               "configuration enables, and so serves none of their routes")
    return (f"the daemon at {url} runs without {plugins}: restart it with this configuration "
            "(`neuralmind daemon stop`, then `neuralmind daemon start`)")


def command_parser(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The parser of the command ``args`` were parsed for (``project show``'s), whose usage
    a wrong argument is shown with rather than the whole CLI's."""
    group = _subcommands(parser)
    chosen = group and group.choices.get(getattr(args, group.dest, None) or "")
    return parser if chosen is None else command_parser(chosen, args)


def main(argv: list[str] | None = None) -> int:
    from kernel.daemon import DiscoveryDamaged
    from kernel.plugins import PluginError, StartupError
    from neuralmind.client import NeuralMindError
    from neuralmind.commands.common import CommandError, err, registered_for_nothing, shown
    line = sys.argv[1:] if argv is None else argv
    if (reconfigure := getattr(sys.stdout, "reconfigure", None)) is not None:
        # a terminal or pipe that is not UTF-8 shows what it cannot encode as \u escapes
        # rather than ending the command in a traceback (-o FILE writes UTF-8 whatever it is)
        reconfigure(errors="backslashreplace")
    if bad := next((arg for arg in line if not _utf8(arg)), None):
        readable = bad.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        print(f"neuralmind: the argument {readable!r} is not UTF-8: names and text reach the "
              "server as UTF-8 (rename the file, or give the text in UTF-8)", file=sys.stderr)
        return 2
    parser = build_parser(line)
    hint = _plugin_not_enabled(parser, line)
    if hint is not None:
        err(hint)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:  # argparse's parse_args would name them under the whole CLI's usage
        command_parser(parser, args).error(
            f"unrecognized arguments: {' '.join(map(shown, extra))}")
    try:
        return args.func(args) or 0
    except (ConfigError, CommandError, PluginError, StartupError, DiscoveryDamaged) as ex:
        err(str(ex))
        if note := registered_for_nothing(args, ex):
            err(note)
        return getattr(ex, "exit_code", 2)
    except KeyboardInterrupt:
        print("\nneuralmind: interrupted", file=sys.stderr)
        return 130
    except NeuralMindError as ex:  # before OSError: a timeout or no daemon is one too
        code = client_error(ex, args)
        if note := registered_for_nothing(args, ex):
            err(note)
        return code
    except BrokenPipeError:  # `neuralmind … | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as ex:  # a file a command was told to read or write
        if ex.filename is None:
            raise
        err(f"{ex.filename or repr('')}: {ex.strerror}")
        # a path that names no such file (or the wrong kind) is the command used wrongly
        return 2 if isinstance(ex, (FileNotFoundError, IsADirectoryError,
                                    NotADirectoryError)) else 1


if __name__ == "__main__":
    sys.exit(main())
