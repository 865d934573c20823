"""What the client commands share: the common flags, the client, the project they act on,
output as a table (default) or JSON (``--json``), and a file written whole (an export's)."""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import secrets
import shutil
import stat
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

from neuralmind.client import (NeuralMindAPIError, NeuralMindClient, Project, ProjectHandle,
                               no_directory)


def common_flags(json_flag: bool = True) -> argparse.ArgumentParser:
    """``--json``, ``--url`` and ``--token``, shared by every client command; ``--json`` left
    out (``json_flag`` False) by a command that has no output for it to shape (``mcp`` writes
    only MCP messages)."""
    parent = argparse.ArgumentParser(add_help=False)
    if json_flag:
        parent.add_argument("--json", action="store_true", help="print JSON for scripts")
    parent.add_argument("--url", type=filled,
                        help="server URL (default $NEURALMIND_API_URL, then the daemon)")
    parent.add_argument("--token", type=filled,
                        help="bearer token (default $NEURALMIND_API_TOKEN, then the daemon's)")
    return parent


def project_flags(json_flag: bool = True) -> argparse.ArgumentParser:
    """:func:`common_flags` and ``--project``/``-p``."""
    parent = argparse.ArgumentParser(add_help=False, parents=[common_flags(json_flag)])
    parent.add_argument("--project", "-p", metavar="PATH_OR_ID", type=filled,
                        help="a directory or a project id (default: the repository around here)")
    return parent


def ranged(low: int, high: int | None = None):
    """An argparse ``type``: a whole number from ``low`` to ``high`` (no bound above: None, up
    to what a count can be), so a wrong value is named before any request or work."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"{value} is outside {low}–{high}" if high is not None else
                f"{value} is less than {low}")
        if value > sys.maxsize:
            raise argparse.ArgumentTypeError(f"{value} is too large")
        return value
    return parse


port = ranged(0, 65535)  # an argparse ``type``: a TCP port to listen on (0: one the OS picks)


def filled(text: str) -> str:
    """An argparse ``type``: an id (of a job, a memory, a hook …) or a name that is never
    empty (an empty one would drop a filter, or name nothing)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("cannot be empty")
    return text


def path_id(what: str, listed_by: str):
    """An argparse ``type``: an id the client puts in a URL as one path segment (a memory's,
    a webhook's …), never empty. A ``/`` in it is refused here: quoted as ``%2F`` it reaches
    the server as a path separator, so ``ID/history`` would be another route's answer (or
    ``no route``) rather than "no such id". ``what`` is "a memory id"; ``listed_by`` the
    command that shows the ids."""
    def parse(text: str) -> str:
        filled(text)
        if "/" in text:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}: an id has no / in it "
                                             f"({listed_by} shows them)")
        return text
    return parse


def seconds(text: str) -> float:
    """An argparse ``type``: a time in seconds, more than 0 (not nan, not inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a time: give seconds, more than 0")
    return value


def setting(model: str, name: str):
    """An argparse ``type`` taking what the setting ``name`` of the settings model ``model``
    (``"module:Class"``, imported when the option is given: the CLI starts without it) takes,
    its type and bounds read from the model, so an override on the command line is checked
    as the config file is."""
    def parse(text: str):
        import importlib
        from typing import Annotated

        from pydantic import TypeAdapter, ValidationError

        from kernel.errors import error_message
        module, _, cls = model.partition(":")
        field = getattr(importlib.import_module(module), cls).model_fields[name]
        try:
            return TypeAdapter(Annotated[field.annotation, *field.metadata]).validate_python(text)
        except ValidationError as ex:
            raise argparse.ArgumentTypeError(f"{error_message(ex.errors()[0])} (got {text})"
                                             ) from None
    return parse


def refuse_misplaced(args, command: str, options: dict[str, str]) -> None:
    """An option given that belongs to another action of ``command`` (``options``: option →
    its action) is an error: ignored, it would let `memory decay run --half-life …` sweep with
    the old policy unnoticed. Given is what is not the parser's default object itself (the
    parser set as ``_parser``): ``--enabled off`` (False), ``--threshold 0`` or ``--port 0``
    are given as much as ``on``, ``0.7`` or ``8765`` (a test of falsiness would let them by)."""
    parser = args._parser
    for name, action in options.items():
        if action != args.action and getattr(args, name) is not parser.get_default(name):
            raise CommandError(f"--{name.replace('_', '-')} is for `{command} {action}`, "
                               f"not `{args.action}`")


class CommandError(Exception):
    """A command used wrongly: the CLI prints the message and exits 2 (or ``exit_code``: 1 for
    what went wrong after the command was understood)."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


def client(args, autostart: bool = False) -> NeuralMindClient:
    """The client of ``--url``/``--token`` (or ``NEURALMIND_API_URL``), else of the daemon of
    this machine's settings' home, which ``autostart`` starts when none runs there."""
    named = bool(args.url or os.environ.get("NEURALMIND_API_URL"))
    return NeuralMindClient(url=args.url, token=args.token, home=_local_home(named),
                            autostart=autostart and not named)


def _local_home(named_server: bool) -> Path | None:
    """The settings' home (:func:`local_settings`). A command given a server needs no local
    config (its home only lends a loopback server its token file): one that cannot be read
    is passed over then (None: the client's own default), and said otherwise."""
    from kernel.config import ConfigError
    try:
        return local_settings().home
    except ConfigError:
        if named_server:
            return None
        raise


def local_settings():
    """The settings the daemon runs with (``$NEURALMIND_CONFIG``, the environment). Their
    ``home`` is where `daemon start`, `token show` and `up` find the daemon: NEURALMIND_HOME,
    else the config's ``[kernel] home``, else ~/.neuralmind (docs/operations.md,
    "Precedence"); the stdlib client alone reads only NEURALMIND_HOME (it reads no config)."""
    from kernel.config import load_settings
    return load_settings()


def repo_root(start: str | os.PathLike | None = None) -> Path:
    """The git repository around ``start`` (the current directory), or ``start`` itself."""
    return git_root(start) or Path(start or os.getcwd()).resolve()


def git_root(start: str | os.PathLike | None = None) -> Path | None:
    """The git repository around ``start`` (the current directory), if there is one."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def project(args, nm: NeuralMindClient | None = None, register: bool = False) -> ProjectHandle:
    """The project a command acts on: ``--project`` (an id, or a directory), else the
    repository around the current directory, else the registered folder that is or holds the
    current one (:func:`registered_around`). A directory is
    registered (idempotently) only by a command that puts something into the project
    (``register``: build, memory add and import, ingest), and only one that was named or is a
    repository; the others find it among the registered projects, so reading or removing
    never registers a folder, nor needs a token that may register."""
    nm = nm or client(args)
    given = getattr(args, "project", None)
    if given and (why := no_directory(given)):
        if looks_like_a_path(given):
            raise CommandError(f"--project {given}: {why} (give a directory or a project id: "
                               "`neuralmind project list`)")
        try:
            return nm.project(given)
        except ValueError as ex:  # neither a directory here nor an id's shape
            raise CommandError(f"--project {ex} (`neuralmind project list`)") from None
    where = given or git_root()
    if where is not None and register:
        handle = nm.project(where)
        if handle.registered:  # undone if the server refuses the write (unregistered_if_refused)
            args._registered = handle
        return handle
    found = nm.projects.find(where) if where is not None else registered_around(nm)
    if found is not None:
        return ProjectHandle(nm, found)
    raise CommandError(not_registered(nm, where))


def registered_around(nm: NeuralMindClient) -> Project | None:
    """Outside a git repository: the registered project that is the current folder or holds
    it, the nearest — found as the repository around it would be (a subfolder of a registered
    folder is in that project, never a nested project of its own)."""
    by_path = {os.path.realpath(p.path): p for p in nm.projects.list() if p.path}
    here = Path(os.path.realpath(Path.cwd()))
    return next((by_path[str(f)] for f in (here, *here.parents) if str(f) in by_path), None)


def not_registered(nm: NeuralMindClient, where: str | os.PathLike | None) -> str:
    """That ``where`` (None: the current folder, in no repository) is no registered project,
    and what to do: `neuralmind project add` registers it — unless it cannot: a reserved path,
    a server that registers none (server mode: its projects come from its config, their paths
    hidden from a reader)."""
    folder = Path.cwd() if where is None else where
    said = (f"{folder} is not inside a git repository, nor a registered project"
            if where is None else f"{where} is not a registered project")
    if why := _unregistrable(nm, folder):
        return f"{said}, and {why}: pass --project ID (`neuralmind project list` lists the ids)"
    if where is None:
        return (f"{said}: pass --project PATH_OR_ID (`neuralmind project add .` registers "
                "this folder)")
    return (f"{said}: `neuralmind project add {where}` registers it (`neuralmind project list` "
            "shows those that are)")


def _unregistrable(nm: NeuralMindClient, folder: str | os.PathLike) -> str | None:
    """Why `neuralmind project add` could not register ``folder``, or None: the denylist the
    server checks (kernel/projects.py), then the server's mode — its callers are tokens'
    (``whoami``) in server mode alone, where every token, a reader's too, registers none."""
    from kernel.projects import private_dirs, refusal
    if why := refusal(os.path.realpath(folder), private_dirs(local_settings())):
        return f"cannot be one ({why})"
    try:
        kind = nm.whoami().get("kind")
    except NeuralMindAPIError:  # a server without the auth plugin: nothing known against it
        return None
    return ("this server registers none (its projects come from its config; a token that "
            "sees no paths finds none by its folder)") if kind == "token" else None


def registered_for_nothing(args, ex: BaseException) -> str | None:
    """What to say after a refusal when this command registered a folder (:func:`project`) for
    a write the server then refused — a 4xx to a request that was no read, sent once: nothing
    was written —: that it stays registered, and how to let it go. The refusal is the error the
    command raised, or the one it was handling when it raised its own (`memory import`'s). Not
    undone here: another client may have put something into the project meanwhile."""
    handle = getattr(args, "_registered", None)
    refused = ex if isinstance(ex, NeuralMindAPIError) else ex.__context__
    if (handle is None or not isinstance(refused, NeuralMindAPIError)
            or not 400 <= refused.status < 500 or refused.method == "GET" or refused.resent):
        return None
    return (f"{handle.info.path} was registered as project {handle.id} for this and stays "
            f"one: `neuralmind project remove -p {handle.id}` lets it go")


@contextmanager
def whole_file(name: str | os.PathLike, mode: int | None = None) -> Iterator[TextIO]:
    """``name`` opened to write text, its old content replaced only once all of the new is
    written: a write refused or cut short (an error inside the ``with``) leaves the file as
    it was, and nothing beside it. The new file is made beside the one it replaces (a link's
    target) with ``mode``, else the old file's mode, else as ``open(name, "w")`` makes one.
    What is no regular file (a pipe) and a name in /dev or /proc — or a link that leads there
    (``/dev/stdout``: a link to wherever the shell sent the output) — is written as it is:
    never a file made in /dev and renamed over ``/dev/stdout`` (which, for root, would
    replace the link, and write nothing where the shell sent the output). Where the new file
    cannot be renamed over the old — a bind-mounted file, a folder this user may not add to
    (the new one is then made in the temp folder) — it is written over it once whole."""
    name = os.fspath(name)
    _not_planted(name)
    path = os.path.realpath(name)
    if any(os.path.abspath(p).startswith(("/dev/", "/proc/")) for p in (name, path)) or (
            os.path.exists(path) and not os.path.isfile(path)):
        with open(name, "w", encoding="utf-8") as out:
            yield out
        return
    folder, base = os.path.split(path)
    try:
        fd, temp = _temporary(folder, base, mode)
    except OSError as ex:  # a folder this user may not add to: the file itself may be writable
        if ex.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise OSError(ex.errno, ex.strerror, name) from None  # the file asked for, not ours
        fd, temp = _temporary(tempfile.gettempdir(), base, 0o600)
    try:
        with open(fd, "w", encoding="utf-8") as out:
            yield out
        if os.path.dirname(temp) == folder:
            if mode is None and os.path.exists(path):
                shutil.copymode(path, temp)
            try:
                os.replace(temp, path)
                return
            except OSError as ex:  # a bind-mounted file (EBUSY), another file system …
                if ex.errno not in (errno.EBUSY, errno.EXDEV, errno.EACCES, errno.EPERM):
                    raise OSError(ex.errno, ex.strerror, name) from None
        _written_over(temp, path, name, mode)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(temp)


def _temporary(folder: str, base: str, mode: int | None) -> tuple[int, str]:
    """A new file in ``folder`` for :func:`whole_file`, opened with ``O_EXCL``: never through
    a link someone put there under its name."""
    temp = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.part")
    return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                   0o666 if mode is None else mode), temp


def _not_planted(name: str) -> None:
    """Refuse a link another user put in a shared, sticky folder (``/tmp``) anywhere in
    ``name`` — what Linux's ``protected_symlinks`` refuses a shell's ``>`` — which
    :func:`os.path.realpath` would follow: root would write the export over whatever file it
    names, or into whatever folder."""
    path = os.path.abspath(name)
    parts = path.split(os.sep)[1:]
    for depth in range(1, len(parts) + 1):
        prefix = os.sep + os.sep.join(parts[:depth])
        try:
            link, folder = os.lstat(prefix), os.stat(os.path.dirname(prefix))
        except OSError:
            return
        if (stat.S_ISLNK(link.st_mode) and folder.st_mode & stat.S_ISVTX
                and folder.st_mode & stat.S_IWOTH
                and link.st_uid not in (os.geteuid(), folder.st_uid)):
            raise OSError(errno.EACCES, "a link another user put in a shared folder is not "
                          f"followed ({prefix})", name)


def _written_over(temp: str, path: str, name: str, mode: int | None) -> None:
    """What ``temp`` holds written over ``path``, once whole, where it cannot be renamed over
    it (a bind mount, a folder this user may not write): the file keeps its inode and owner,
    and its mode unless ``mode`` is given. Never a file of another user (renaming over it was
    refused for that: a sticky folder); errors name ``name``, the file the user gave."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW,
                     0o666 if mode is None else mode)
        with open(fd, "wb") as target:
            if os.fstat(fd).st_uid != os.geteuid():
                raise OSError(errno.EACCES, "the file is another user's", name)
            if mode is not None:
                os.fchmod(fd, mode)
            target.truncate()
            with open(temp, "rb") as source:
                shutil.copyfileobj(source, target)
    except OSError as ex:
        raise OSError(ex.errno, ex.strerror, name) from None


def looks_like_a_path(value: str) -> bool:
    return value.startswith((".", "~", os.sep)) or os.sep in value


def in_project(handle: ProjectHandle, paths: Iterable[str]) -> list[str]:
    """FILE arguments as the request names them, project-relative: one that names a file
    under the current directory inside the project is taken from here (`cd kernel; …
    config.py` is kernel/config.py, `../app.py` is app.py); anything else as given — a path
    from the root, a deleted file."""
    root = handle.info.path and os.path.realpath(handle.info.path)
    out = []
    for path in paths:
        if root and os.path.isfile(path):
            here = os.path.abspath(path)  # a symlinked file is named, not followed
            rel = os.path.relpath(os.path.join(os.path.realpath(os.path.dirname(here)),
                                               os.path.basename(here)), root)
            if not rel.startswith(os.pardir + os.sep):
                path = rel.replace(os.sep, "/")
        out.append(path)
    return out


def emit(args, data: Any, rows: Sequence[dict] | None = None, columns: Sequence[str] = (),
         text: str | None = None) -> int:
    """Print ``data`` as JSON with ``--json``; else ``rows`` as a table, or ``text``
    (:func:`shown`, its lines kept)."""
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    elif rows is not None:
        print(table(rows, columns) if rows else "(none)")
    elif text is not None:
        print(shown(text, lines=True))
    return 0


CELL = 60  # a table cell's most characters


def table(rows: Iterable[dict], columns: Sequence[str], width: int = CELL) -> str:
    """A plain aligned table, aligned by the columns a terminal gives each character (two for
    Chinese, Japanese and Korean, none for a combining accent); long cells are cut with an
    ellipsis."""
    cells = [[_cell(row.get(c), width) for c in columns] for row in rows]
    widths = [max(len(c), *(shown_width(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(_pad(v, w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


# the joiners Persian, Indic scripts and emoji sequences need: invisible, yet no control
JOINERS = "\u200c\u200d"


def shown(text: str, lines: bool = False) -> str:
    """``text`` — the server's, or what the user typed echoed back — as the terminal is to
    show it: each control character (an ANSI or OSC escape, BEL, a C1 control, a bidi override
    that makes a title read other than it is) written as its escape, never sent to the
    terminal. ``lines`` keeps the line breaks and tabs of multi-line prose (an answer, a
    query's context, a list of lines), never a lone carriage return (it overwrites a line).
    ``--json`` needs none of this: JSON's own escapes cover it."""
    kept = "\n\t" if lines else ""
    if lines:
        text = text.replace("\r\n", "\n")
    return "".join(c if c.isprintable() or c in JOINERS or c in kept else repr(c)[1:-1]
                   for c in text)


def counted(n: int, noun: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _cell(value: Any, width: int) -> str:
    text = shown(plain(value).replace("\n", " ")) or "-"
    if shown_width(text) <= width:
        return text
    cut, used = [], 0
    for c in text:
        used += _columns(c)
        if used > width - 1:
            break
        cut.append(c)
    return "".join(cut) + "…"


def shown_width(text: str) -> int:
    """The terminal columns ``text`` takes."""
    return sum(map(_columns, text))


def _columns(c: str) -> int:
    if unicodedata.combining(c) or c in JOINERS:
        return 0
    return 2 if unicodedata.east_asian_width(c) in "WF" else 1


def _pad(text: str, width: int) -> str:
    return text + " " * (width - shown_width(text))


def plain(value: Any) -> str:
    """A value as a person reads it: ``a,b`` for a list, ``key: value, …`` for a mapping —
    never Python's repr (``{'status': [...]}``)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return ",".join(map(plain, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}: {plain(v)}" for k, v in value.items())
    return str(value)


def fields(record: Any, names: Sequence[str]) -> str:
    """``name: value`` lines for a detail view."""
    raw = record.raw if hasattr(record, "raw") else record
    pad = max(map(len, names))
    return "\n".join(f"{n.ljust(pad)}  {_cell(raw.get(n), 200)}" for n in names if n in raw)


def err(message: str) -> None:
    print(f"neuralmind: {shown(message, lines=True)}", file=sys.stderr)


def note(args, notice: str | None) -> None:
    """What the server said besides its answer (nothing relevant found, records not embedded
    yet), on stderr so the table on stdout stays the results; ``--json`` prints the results
    alone, as before."""
    if notice and not args.json:
        print(f"note: {shown(notice)}", file=sys.stderr)
