"""``neuralmind agent install|uninstall``: an agent's MCP configuration for ``neuralmind mcp``
(stdio), merged into the file the agent reads.

Install keeps the user's other servers and settings, keeps a copy of a file it changes
(``<file>.neuralmind-backup``, the first original only), and is idempotent. Uninstall
removes exactly what install added: our server entry and hook, and a file install created;
a file back to what the backup holds gets the backup itself back, byte for byte. An entry
named ``neuralmind`` that we did not write is refused rather than replaced."""

from __future__ import annotations

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


class AgentError(Exception):
    """A configuration we cannot merge into: say which file and why; nothing was written."""


@dataclass(frozen=True)
class Edit:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None   # None: the file goes away
    snippet: str        # what we add, for --print
    note: str


def launcher() -> list[str]:
    """How an agent starts us: ``neuralmind`` when it is on PATH, else this interpreter."""
    return [NAME] if shutil.which(NAME) else [sys.executable, "-P", "-m", "neuralmind.cli"]


def environment() -> dict[str, str]:
    """Settings an agent launched from a desktop would not inherit from this shell."""
    return {k: os.environ[k] for k in PASSED_ON if os.environ.get(k)}


def server_entry(*args: str) -> dict[str, Any]:
    command = launcher()
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "mcp", *args]}
    if environment():
        entry["env"] = environment()
    return entry


def hook_command() -> str:
    prefix = [f"{k}={shlex.quote(v)}" for k, v in environment().items()]
    return " ".join([*prefix, *map(shlex.quote, launcher()), "agent", "wakeup"])


def _ours(entry: Any) -> bool:
    """A server entry that runs ``neuralmind mcp`` (whichever launcher wrote it)."""
    if not isinstance(entry, dict):
        return False
    args = [str(a) for a in entry.get("args") or []]
    runs_us = Path(str(entry.get("command", ""))).name == NAME or "neuralmind.cli" in args
    return runs_us and "mcp" in args


def _our_hook(hook: Any) -> bool:
    return isinstance(hook, dict) and f"{NAME}" in str(hook.get("command", "")) and \
        "agent wakeup" in str(hook.get("command", ""))


# -- the parts an agent's configuration is made of ---------------------------------------------
# Each part merges into (or out of) the text of its file: ``merge(text) -> text``,
# ``unmerge(text) -> text`` (the same text when there is nothing of ours), ``empty(text)``.

class _JSONPart:
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

    def __init__(self, path: Path, entry: dict[str, Any]):
        self.path, self.entry = path, entry

    def snippet(self) -> str:
        return json.dumps({"mcpServers": {NAME: self.entry}}, indent=2)

    def add(self, doc: dict) -> None:
        servers = doc.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise AgentError(f"{self.path}: mcpServers is not an object; nothing was changed")
        if NAME in servers and not _ours(servers[NAME]):
            raise AgentError(f"{self.path} already has a server named {NAME!r} that does not run "
                             f"`neuralmind mcp` ({json.dumps(servers[NAME])}); rename or remove "
                             "it, then install again")
        servers[NAME] = self.entry

    def remove(self, doc: dict) -> bool:
        servers = doc.get("mcpServers")
        if not isinstance(servers, dict) or not _ours(servers.get(NAME)):
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
        if not isinstance(hooks, dict) or not isinstance(hooks.setdefault("SessionStart", []),
                                                          list):
            raise AgentError(f"{self.path}: hooks.SessionStart is not a list; nothing was changed")
        hooks["SessionStart"].append(self.group)

    def remove(self, doc: dict) -> bool:
        hooks = doc.get("hooks")
        groups = hooks.get("SessionStart") if isinstance(hooks, dict) else None
        if not isinstance(groups, list):
            return False
        kept = [g for g in groups if not (isinstance(g, dict) and g.get("hooks")
                                          and all(map(_our_hook, g["hooks"])))]
        if len(kept) == len(groups):
            return False
        hooks["SessionStart"] = kept
        if not kept:
            del hooks["SessionStart"]
        if not hooks:
            del doc["hooks"]
        return True


class TOMLServer:
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
        if NAME in (self._parse(text).get("mcp_servers") or {}):
            raise AgentError(f"{self.path} already has [mcp_servers.{NAME}] that `neuralmind "
                             "agent install` did not write; remove it, then install again")
        merged = (text.rstrip("\n") + "\n\n" if text.strip() else "") + self.snippet() + "\n"
        self._parse(merged)
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
        return [JSONServer(project / ".mcp.json", server_entry()),
                ClaudeHook(project / ".claude" / "settings.json", hook_command())]
    if agent == "cursor":  # Cursor expands ${workspaceFolder}; its working directory varies
        return [JSONServer(project / ".cursor" / "mcp.json",
                           server_entry("--project", "${workspaceFolder}"))]
    codex_home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    args = ("--project", str(project)) if pinned else ()  # else: the directory codex runs in
    return [TOMLServer(codex_home / "config.toml", server_entry(*args))]


def install(agent: str, project: Path, pinned: bool) -> list[Edit]:
    return [_edit(part, adding=True) for part in parts(agent, project, pinned)]


def uninstall(agent: str, project: Path, pinned: bool) -> list[Edit]:
    return [_edit(part, adding=False) for part in parts(agent, project, pinned)]


def _edit(part, adding: bool) -> Edit:
    path = part.path
    before = path.read_text() if path.exists() else None
    after = part.merge(before) if adding else part.unmerge(before)
    if adding:
        note = f"added the {NAME} {part.label}" if before != after else \
            f"{NAME} {part.label} already there"
    elif before == after:
        note = f"no {NAME} {part.label} to remove"
    else:
        note = f"removed the {NAME} {part.label}"
        if part.empty(after) and not _backup(path).exists():
            after = None  # install created this file: it goes
    return Edit(path, before, after, part.snippet(), note)


def _load_json(path: Path, text: str | None) -> dict:
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as ex:
        raise AgentError(f"{path} is not valid JSON ({ex}); nothing was changed") from None
    if not isinstance(doc, dict):
        raise AgentError(f"{path} does not hold a JSON object; nothing was changed")
    return doc


def _backup(path: Path) -> Path:
    return path.with_name(path.name + BACKUP)


def apply(edits: list[Edit]) -> list[str]:
    """Write the edits; one line per file saying what happened."""
    lines = []
    for e in edits:
        if e.before == e.after:
            lines.append(f"{e.path}: {e.note}")
            continue
        backup = _backup(e.path)
        extra = ""
        if e.after is None:
            e.path.unlink()
            _prune(e.path.parent)
        else:
            if e.before is not None and not backup.exists():
                shutil.copy2(e.path, backup)
                extra = f" (the original is kept in {backup.name})"
            e.path.parent.mkdir(parents=True, exist_ok=True)
            if _restored(e.after, backup):  # its bytes back, not our rendering of the same JSON
                os.replace(backup, e.path)
                extra = f" (put back from {backup.name}: the file is as it was)"
            else:
                e.path.write_text(e.after)
        lines.append(f"{e.path}: {e.note}{extra}")
    return lines


def _restored(text: str, backup: Path) -> bool:
    """Whether ``text`` is what the backup holds (as JSON when both parse)."""
    if not backup.exists():
        return False
    kept = backup.read_text()
    try:
        return json.loads(kept) == json.loads(text)
    except ValueError:
        return kept.strip() == text.strip()


def _prune(folder: Path) -> None:
    """An agent's folder install created for us alone (``.cursor``, ``.claude``) goes too."""
    if folder.name in (".cursor", ".claude", ".codex") and not any(folder.iterdir()):
        folder.rmdir()
