"""``neuralmind agent install|uninstall``: an agent's MCP configuration for ``neuralmind mcp``
(stdio), merged into the file the agent reads.

Install keeps the user's other servers and settings, keeps a copy of a file it changes
(``<file>.neuralmind-backup``, the first original only), and is idempotent. Uninstall
removes exactly what install added: our server entry and hook, and a file install created;
a file back to what the backup holds gets the backup itself back, byte for byte. An entry
named ``neuralmind`` that we did not write is refused rather than replaced, and never removed:
what we write carries a mark (marker comments in TOML; in JSON, which has none, a variable in
the entry's ``env``). A JSON entry from before the mark is known by its exact shape."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = "neuralmind"
BACKUP = ".neuralmind-backup"
PASSED_ON = ("NEURALMIND_HOME", "NEURALMIND_CONFIG", "NEURALMIND_API_URL")  # never the token
TOML_START = f"# {NAME}: written by `neuralmind agent install codex`; " \
             "`neuralmind agent uninstall codex` removes it"
TOML_END = f"# end {NAME}"
MARK = "NEURALMIND_AGENT_INSTALL"  # in the env of a JSON entry we wrote; its value: the agent


class AgentError(Exception):
    """A configuration we cannot merge into, or write: say which file and why; nothing was
    written. ``exit_code``: 2 for what the user can fix in a file or a setting (its text, its
    shape, a folder where a file belongs), 1 for what the system refused (permissions …)."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Edit:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None   # None: the file goes away
    snippet: str        # what we add, for --print
    note: str
    keep_original: bool = True  # back up ``before``: not when it holds only what we wrote


def launcher() -> list[str]:
    """How an agent starts us: ``neuralmind`` when it is on PATH, else this interpreter."""
    return [NAME] if shutil.which(NAME) else [sys.executable, "-P", "-m", "neuralmind.cli"]


def environment() -> dict[str, str]:
    """Settings an agent launched from a desktop would not inherit from this shell; a home or
    config named by a relative path made absolute (the agent starts ``neuralmind mcp`` in
    whatever folder it works in, where ``../team.toml`` names another file or none)."""
    found = {k: os.environ[k] for k in PASSED_ON if os.environ.get(k)}
    for key in ("NEURALMIND_HOME", "NEURALMIND_CONFIG"):
        if key in found:
            found[key] = os.path.abspath(os.path.expanduser(found[key]))
    return found


def server_entry(*args: str) -> dict[str, Any]:
    command = launcher()
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "mcp", *args]}
    if environment():
        entry["env"] = environment()
    return entry


def hook_command() -> str:
    prefix = [f"{k}={shlex.quote(v)}" for k, v in environment().items()]
    return " ".join([*prefix, *map(shlex.quote, launcher()), "agent", "wakeup"])


def marked(entry: dict[str, Any], agent: str) -> dict[str, Any]:
    """``entry`` with our mark: how uninstall (and a second install) tell it from an entry the
    user wrote, even one running ``neuralmind mcp`` too."""
    return {**entry, "env": {**entry.get("env", {}), MARK: agent}}


def _ours(entry: Any, unmarked: dict[str, Any]) -> bool:
    """A server entry install wrote: marked (whichever launcher, env and version wrote it), or
    exactly ``unmarked``, what install writes today bar the mark — as installs before the mark
    wrote it, so an upgrade replaces and uninstall removes theirs. Anything else is the user's,
    even an entry running ``neuralmind mcp`` too."""
    env = entry.get("env") if isinstance(entry, dict) else None
    return (isinstance(env, dict) and MARK in env) or entry == unmarked


def _kind(value: Any, toml: bool = False) -> str:
    """What a JSON (or TOML) value is, in the format's own words."""
    if isinstance(value, dict):
        return "a table" if toml else "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else "a date or time"


def _our_hook(hook: Any) -> bool:
    return isinstance(hook, dict) and f"{NAME}" in str(hook.get("command", "")) and \
        "agent wakeup" in str(hook.get("command", ""))


# -- the parts an agent's configuration is made of ---------------------------------------------
# Each part merges into (or out of) the text of its file: ``merge(text) -> text``,
# ``unmerge(text) -> text`` (the same text when there is nothing of ours), ``empty(text)``.

class _Part:
    def foreign(self, text: str | None) -> bool:
        """Whether ``text`` holds an entry of ours by name that install did not write."""
        return False

    def legacy(self, text: str) -> bool:
        """Whether ``text`` holds our entry without the mark (an install before it)."""
        return False


class _JSONPart(_Part):
    path: Path

    def merge(self, text: str | None) -> str:
        doc = _load_json(self.path, text)
        self.add(doc)
        return json.dumps(doc, indent=2) + "\n"

    def unmerge(self, text: str | None) -> str | None:
        doc = _load_json(self.path, text)
        return json.dumps(doc, indent=2) + "\n" if self.remove(doc) else text

    @staticmethod
    def empty(text: str) -> bool:
        return json.loads(text) == {}



class JSONServer(_JSONPart):
    """``mcpServers.neuralmind`` in a JSON file (Claude Code's ``.mcp.json``, Cursor's)."""

    label = "server"

    def __init__(self, path: Path, entry: dict[str, Any], agent: str):
        self.path, self.unmarked, self.entry = path, entry, marked(entry, agent)

    def snippet(self) -> str:
        return json.dumps({"mcpServers": {NAME: self.entry}}, indent=2)

    def add(self, doc: dict) -> None:
        servers = doc.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise AgentError(f"{self.path}: mcpServers is {_kind(servers)}, not an object; "
                             "nothing was changed")
        if NAME in servers and not _ours(servers[NAME], self.unmarked):
            raise AgentError(f"{self.path} already has a server named {NAME!r} that `neuralmind "
                             f"agent install` did not write ({json.dumps(servers[NAME])}); rename "
                             "or remove it, then install again")
        servers[NAME] = self.entry

    def _named(self, text: str | None) -> Any:
        servers = _load_json(self.path, text).get("mcpServers")
        return servers.get(NAME) if isinstance(servers, dict) else None

    def foreign(self, text: str | None) -> bool:
        entry = self._named(text)
        return entry is not None and not _ours(entry, self.unmarked)

    def legacy(self, text: str) -> bool:
        return self._named(text) == self.unmarked

    def remove(self, doc: dict) -> bool:
        servers = doc.get("mcpServers")
        if not isinstance(servers, dict) or not _ours(servers.get(NAME), self.unmarked):
            return False
        del servers[NAME]
        if not servers:
            del doc["mcpServers"]
        return True


class ClaudeHook(_JSONPart):
    """A ``SessionStart`` hook in ``.claude/settings.json`` printing the project's wakeup, so
    every session starts with the overview in its context."""

    label = "SessionStart hook"

    def __init__(self, path: Path, command: str):
        self.path, self.group = path, {"hooks": [{"type": "command", "command": command}]}

    def snippet(self) -> str:
        return json.dumps({"hooks": {"SessionStart": [self.group]}}, indent=2)

    def add(self, doc: dict) -> None:
        self.remove(doc)  # a re-install replaces our hook rather than adding a second
        hooks = doc.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise AgentError(f"{self.path}: hooks is {_kind(hooks)}, not an object; nothing "
                             "was changed")
        groups = hooks.setdefault("SessionStart", [])
        if not isinstance(groups, list):
            raise AgentError(f"{self.path}: hooks.SessionStart is {_kind(groups)}, not an "
                             "array; nothing was changed")
        groups.append(self.group)

    def remove(self, doc: dict) -> bool:
        hooks = doc.get("hooks")
        groups = hooks.get("SessionStart") if isinstance(hooks, dict) else None
        if not isinstance(groups, list):
            return False
        kept = [g for g in groups if not (isinstance(g, dict) and isinstance(g.get("hooks"), list)
                                          and g["hooks"] and all(map(_our_hook, g["hooks"])))]
        if len(kept) == len(groups):
            return False
        hooks["SessionStart"] = kept
        if not kept:
            del hooks["SessionStart"]
        if not hooks:
            del doc["hooks"]
        return True


class TOMLServer(_Part):
    """``[mcp_servers.neuralmind]`` in Codex's ``config.toml``, between two marker comments
    (no TOML writer in the standard library, so the user's text is kept as it is)."""

    label = "server"

    def __init__(self, path: Path, entry: dict[str, Any]):
        self.path, self.entry = path, entry

    def snippet(self) -> str:
        lines = [TOML_START, f"[mcp_servers.{NAME}]",
                 f"command = {json.dumps(self.entry['command'])}",
                 f"args = {json.dumps(self.entry['args'])}"]
        if self.entry.get("env"):
            pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in self.entry["env"].items())
            lines.append(f"env = {{ {pairs} }}")
        return "\n".join([*lines, TOML_END])

    def merge(self, text: str | None) -> str:
        text = self._without(text or "")
        servers = self._parse(text).get("mcp_servers", {})
        if not isinstance(servers, dict):
            raise AgentError(f"{self.path}: mcp_servers is {_kind(servers, toml=True)}, not a "
                             "table; nothing was changed")
        if NAME in servers:
            raise AgentError(f"{self.path} already has [mcp_servers.{NAME}] that `neuralmind "
                             "agent install` did not write; remove it, then install again")
        merged = (text.rstrip("\n") + "\n\n" if text.strip() else "") + self.snippet() + "\n"
        try:
            tomllib.loads(merged)
        except tomllib.TOMLDecodeError as ex:  # the file parses: our table cannot follow it
            raise AgentError(f"{self.path}: [mcp_servers.{NAME}] cannot be added after what the "
                             f"file holds ({ex}; an inline mcp_servers = {{ … }} table takes no "
                             "more servers: write each as [mcp_servers.NAME]); nothing was "
                             "changed") from None
        return merged

    def unmerge(self, text: str | None) -> str | None:
        return self._without(text) if text is not None else None

    @staticmethod
    def empty(text: str) -> bool:
        return not text.strip()

    def _without(self, text: str) -> str:
        lines = text.splitlines(keepends=True)
        starts = [i for i, line in enumerate(lines) if line.rstrip("\n") == TOML_START]
        if not starts:
            return text
        start = starts[0]
        end = next((i for i in range(start, len(lines)) if lines[i].rstrip("\n") == TOML_END),
                   None)
        if end is None:
            raise AgentError(f"{self.path}: our block starts at line {start + 1} but its end "
                             f"marker ({TOML_END}) is gone; fix the file by hand")
        while start > 0 and not lines[start - 1].strip():
            start -= 1  # the blank line install put before the block
        return "".join(lines[:start] + lines[end + 1:])

    def _parse(self, text: str) -> dict:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as ex:
            raise AgentError(f"{self.path} is not valid TOML ({ex}); nothing was changed") from None


# -- agents ------------------------------------------------------------------------------------

AGENTS = ("claude-code", "cursor", "codex")


def parts(agent: str, project: Path, pinned: bool) -> list:
    """What ``agent`` reads, for ``project`` (``pinned``: named with --project)."""
    if agent == "claude-code":  # Claude Code starts servers and hooks in the project
        return [JSONServer(project / ".mcp.json", server_entry(), agent),
                ClaudeHook(project / ".claude" / "settings.json", hook_command())]
    if agent == "cursor":  # Cursor expands ${workspaceFolder}; its working directory varies
        return [JSONServer(project / ".cursor" / "mcp.json",
                           server_entry("--project", "${workspaceFolder}"), agent)]
    codex_home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    if os.environ.get("CODEX_HOME") and os.path.lexists(codex_home) and \
            not os.path.isdir(codex_home):
        raise AgentError(f"CODEX_HOME {codex_home} is a file, not a folder; nothing was changed")
    args = ("--project", str(project)) if pinned else ()  # else: the directory codex runs in
    return [TOMLServer(codex_home / "config.toml", server_entry(*args))]


def install(agent: str, project: Path, pinned: bool) -> list[Edit]:
    return [_edit(part, adding=True) for part in parts(agent, project, pinned)]


def uninstall(agent: str, project: Path, pinned: bool) -> list[Edit]:
    return [_edit(part, adding=False) for part in parts(agent, project, pinned)]


def _read(path: Path) -> str | None:
    """The text of an agent's file (None: there is none yet), read as ``read_text`` would in
    UTF-8 (newlines made ``\\n``) past a leading byte-order mark (an editor on Windows writes
    one; JSON and TOML let it go, and the file is written back without it); an
    :class:`AgentError` naming it when it cannot be one we merge into: a folder, under a file,
    unreadable, not UTF-8."""
    for folder in path.parents:  # the nearest that exists must be a folder we can write in
        if os.path.lexists(folder):
            if not os.path.isdir(folder):
                raise AgentError(f"{folder} is a file, not a folder, so {path} cannot be "
                                 "written; nothing was changed")
            break
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as ex:
        raise AgentError(f"{in_words(ex, path, 'read')}; nothing was changed",
                         _exit_code(ex)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as ex:
        raise AgentError(f"{path} is not UTF-8 text (byte {ex.start} is 0x{data[ex.start]:02x}); "
                         "save it as UTF-8, then try again; nothing was changed") from None
    return _lines(text)


def _lines(text: str) -> str:
    """A file's text as it is merged and compared: no byte-order mark, newlines ``\\n``."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def in_words(ex: OSError, path: Path, verb: str = "write") -> str:
    """What went wrong with ``path`` (the file or folder ``verb`` acted on), in words rather
    than an errno."""
    if isinstance(ex, IsADirectoryError):
        return f"{path} is a folder, not a file"
    if isinstance(ex, FileExistsError):  # mkdir: something that is not a folder is there
        return f"{path} is a file, not a folder"
    if isinstance(ex, NotADirectoryError):
        return f"cannot {verb} {path}: a folder on its path is a file"
    if isinstance(ex, PermissionError):
        return f"cannot {verb} {path}: permission denied"
    why = {errno.EROFS: "the file system is read-only", errno.ENOSPC: "the disk is full",
           errno.EDQUOT: "the disk quota is used up"}.get(ex.errno)
    return f"cannot {verb} {path}: {why or (ex.strerror or str(ex)).lower()}"


def _exit_code(ex: OSError) -> int:
    """2 when the path is the wrong kind of thing (the user's to fix), else 1."""
    return 2 if isinstance(ex, (IsADirectoryError, NotADirectoryError, FileExistsError)) else 1


def _edit(part, adding: bool) -> Edit:
    path = part.path
    before = _read(path)
    after = part.merge(before) if adding else part.unmerge(before)
    if adding:
        note = f"added the {NAME} {part.label}" if before != after else \
            f"{NAME} {part.label} already there"
    elif before == after:
        note = (f"the {NAME} {part.label} there is not one `neuralmind agent install` wrote: "
                "left as it is" if part.foreign(before) else f"no {NAME} {part.label} to remove")
    else:
        note = f"removed the {NAME} {part.label}"
        if part.empty(after) and not _backup(path).exists():
            after = None  # install created this file: it goes
    return Edit(path, before, after, part.snippet(), note, not _only_ours(part, before))


def _only_ours(part, text: str | None) -> bool:
    """Whether ``text`` holds nothing but what install wrote, marked: a file install created,
    which uninstall removes, so a second install (other settings) keeps no backup of it. An
    unmarked entry taken for a legacy install's may be the user's: its file is kept."""
    if text is None or part.legacy(text):
        return False
    rest = part.unmerge(text)
    return rest != text and part.empty(rest)


def _load_json(path: Path, text: str | None) -> dict:
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as ex:
        raise AgentError(f"{path} is not valid JSON ({ex}); nothing was changed") from None
    if not isinstance(doc, dict):
        raise AgentError(f"{path} does not hold a JSON object (its top level is {_kind(doc)}); "
                         "nothing was changed")
    return doc


def _backup(path: Path) -> Path:
    return path.with_name(path.name + BACKUP)


def apply(edits: list[Edit]) -> list[str]:
    """Write the edits; one line per file saying what happened. A step the system refuses
    (permissions, a full disk …) undoes the steps before it, so every file is as it was, and
    raises :class:`AgentError` saying which file and why."""
    lines: list[str] = []
    undo: list = []  # what puts each step done back, newest last
    for e in edits:
        try:
            lines.append(_write(e, undo))
        except _Failed as failed:
            kept = _undo(undo)
            raise AgentError(f"{failed}; " + ("nothing was changed" if kept else
                             "undoing the files written before it failed too: check them"),
                             failed.exit_code) from None
    return lines


class _Failed(Exception):
    def __init__(self, ex: OSError, path: Path, verb: str):
        super().__init__(in_words(ex, path, verb))
        self.exit_code = _exit_code(ex)


def _step(verb: str, path: Path, action, *args):
    """``action(*args)``, its OSError named in words for ``path`` (``cannot VERB PATH: …``)."""
    try:
        return action(*args)
    except OSError as ex:
        raise _Failed(ex, path, verb) from None


def _undo(undo: list) -> bool:
    """Run the undo steps, newest first; whether all of them worked."""
    ok = True
    for action in reversed(undo):
        try:
            action()
        except OSError:
            ok = False
    return ok


def _write(e: Edit, undo: list) -> str:
    if e.before == e.after:
        return f"{e.path}: {e.note}"
    backup = _backup(e.path)
    original = _step("read", e.path, e.path.read_bytes) if e.before is not None else None

    def put_back() -> None:
        if original is None:
            e.path.unlink(missing_ok=True)
        elif not e.path.is_file() or e.path.read_bytes() != original:
            e.path.write_bytes(original)
    extra = ""
    if e.after is None:
        _step("remove", e.path, e.path.unlink)
        undo.append(put_back)
        _prune(e.path.parent, undo)
        return f"{e.path}: {e.note}"
    if e.before is not None and e.keep_original and not backup.exists():
        _step("write", backup, shutil.copy2, e.path, backup)
        undo.append(lambda: backup.unlink(missing_ok=True))
        extra = f" (the original is kept in {backup.name})"
    for folder in reversed([f for f in e.path.parents if not os.path.lexists(f)]):
        _step("create the folder", folder, folder.mkdir)
        undo.append(folder.rmdir)
    if (kept := _restored(e.after, backup)) is not None:  # its bytes back, not our rendering
        _step("write", e.path, os.replace, backup, e.path)
        undo.append(lambda: backup.write_bytes(kept))
        undo.append(put_back)
        extra = f" (put back from {backup.name}: the file is as it was)"
    else:
        undo.append(put_back)  # a write that failed half-way is put back too
        _step("write", e.path, e.path.write_bytes, e.after.encode("utf-8"))
    return f"{e.path}: {e.note}{extra}"


def _restored(text: str, backup: Path) -> bytes | None:
    """The backup's bytes when ``text`` is what it holds (as JSON when both parse), else None."""
    try:
        kept_bytes = backup.read_bytes()
        kept = kept_bytes.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    kept = _lines(kept)  # as the file was read
    try:
        same = json.loads(kept) == json.loads(text)
    except ValueError:
        same = kept.strip() == text.strip()
    return kept_bytes if same else None


def _prune(folder: Path, undo: list) -> None:
    """An agent's folder install created for us alone (``.cursor``, ``.claude``) goes too."""
    if folder.name in (".cursor", ".claude", ".codex") and \
            not _step("read the folder", folder, os.listdir, folder):
        _step("remove the folder", folder, folder.rmdir)
        undo.append(folder.mkdir)
