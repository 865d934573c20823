"""What the walker leaves out: protected system rules, the project's own rules (peer 004's
types), every ``.gitignore`` on the way down, and a file-size cap — each able to say which
rule matched, so ``POST …/ignore-rules/test`` can explain itself."""

from __future__ import annotations

import logging
import os
import posixpath
from dataclasses import asdict, dataclass

log = logging.getLogger("neuralmind.index")
# a pattern's second and later * between two slashes, summed over the pattern: each
# multiplies the backtracking on long names, across names too (on 255-character names:
# `*a*a*/b` 8 ms, `*a*/*a*/b` 22 ms, `*a*a*/*a*/b` 2.1 s, `*a*a*/*a*a*/*a*a*/b` minutes)
MAX_EXTRA_STARS = 2


@dataclass(frozen=True)
class Rule:
    id: str
    type: str
    value: str
    enabled: bool = True
    reason: str = ""
    protected: bool = False
    created_at: str | None = None
    updated_at: str | None = None

    def public(self) -> dict:
        return asdict(self)


_SYSTEM = (  # (id, type, value, reason)
    ("git", "folder_name", ".git", "version-control internals"),
    ("git_file", "file_name", ".git", "version-control internals (a worktree's or submodule's)"),
    ("state", "folder_name", ".neuralmind", "NeuralMind's own state"),
    ("node_modules", "folder_name", "node_modules", "installed dependencies"),
    ("pycache", "folder_name", "__pycache__", "bytecode"),
    ("venv", "folder_name", ".venv", "virtual environments"),
    ("env", "file_name", ".env", "secrets"),
    ("env_any", "pattern", ".env.*", "secrets"),
    ("pem", "extension", ".pem", "keys and certificates"),
    ("key", "extension", ".key", "private keys"),
    ("p12", "extension", ".p12", "keystores"),
    ("ssh", "pattern", "id_rsa*", "SSH keys"),
    ("ssh_ed", "pattern", "id_ed25519*", "SSH keys"),
    ("ssh_ec", "pattern", "id_ecdsa*", "SSH keys"),
)


def system_rules(max_file_bytes: int) -> list[Rule]:
    """Never indexed, listed for transparency, never changed through the API."""
    size = ("size", "max_file_size", str(max_file_bytes), "file-size cap ([index] max_file_bytes)")
    return [Rule(f"sys_{rid}", type_, value, True, reason, protected=True)
            for rid, type_, value, reason in (*_SYSTEM, size)]


def normalise_value(type_: str, value: str) -> str:
    """A rule value in the form the matcher uses; ValueError says what is wrong with it — also
    when no path could ever match it, so no rule is saved that can never apply."""
    value = value.strip()
    if not value:
        raise ValueError("value must not be empty")
    if "\x00" in value:
        raise ValueError("value holds a NUL character, which no file name has")
    if type_ == "max_file_size":
        if not value.isdecimal() or int(value) <= 0:
            raise ValueError("max_file_size takes a positive number of bytes")
        return str(int(value))
    if type_ == "hidden_files":
        if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError("hidden_files takes true or false")
        return "true" if value.lower() in ("true", "1", "yes") else "false"
    if type_ in ("folder_name", "file_name", "extension") and "/" in value:
        raise ValueError(f"a {type_} is within one name, so it holds no '/': for a path use "
                         "type path or pattern")
    if type_ == "extension":
        if not value.strip("."):
            raise ValueError("extension takes what follows a dot, e.g. .mp4 or mp4")
        return "." + value.lower().lstrip(".")
    if type_ in ("folder_name", "file_name") and value in (".", ".."):
        raise ValueError(f"{type_} takes a name; {value} names no file or folder")
    if type_ == "path":
        norm = posixpath.normpath(value.replace("\\", "/")).strip("/")
        if value.startswith("/") or norm in (".", "..") or norm.startswith("../"):
            raise ValueError("path is relative to the project root and stays inside it")
        return norm
    if type_ == "pattern":
        from pathspec import GitIgnoreSpec
        if (extra := extra_stars(value)) > MAX_EXTRA_STARS:
            raise ValueError(f"{extra} * beside another between two slashes: at most "
                             f"{MAX_EXTRA_STARS} (each multiplies the time to match a long "
                             "name; more take minutes)")
        try:
            spec = GitIgnoreSpec.from_lines([value])
        except Exception as ex:  # pathspec raises several types for a malformed glob
            raise ValueError(f"not a gitignore-style pattern: {ex}") from None
        if not any(p.include for p in spec.patterns):
            raise ValueError(f"{value} leaves nothing out in a .gitignore (a # line is a "
                             "comment, a ! pattern re-includes): escape a leading # or ! "
                             "with \\")
    return value


def extra_stars(pattern: str) -> int:
    """The ``*`` of ``pattern`` that follow another between the same two slashes (``**``
    aside): what makes matching backtrack, name by name and across names."""
    return sum(max(0, part.count("*") - 1) for part in pattern.split("/") if part != "**")


class RuleSet:
    """The enabled rules compiled for fast checks on every path the walker meets."""

    def __init__(self, rules: list[Rule]):
        from pathspec import GitIgnoreSpec
        self.rules = [r for r in rules if r.enabled]
        self._patterns = [(r, GitIgnoreSpec.from_lines([r.value])) for r in self.rules
                          if r.type == "pattern" and _bounded([r.value], f"rule {r.id}")]
        sizes = [r for r in self.rules if r.type == "max_file_size"]
        self._size = min(sizes, key=lambda r: int(r.value)) if sizes else None
        self._hidden = next((r for r in self.rules
                             if r.type == "hidden_files" and r.value == "true"), None)

    def match(self, rel: str, is_dir: bool, size: int | None = None) -> Rule | None:
        """The first rule that leaves out ``rel`` (a project-relative POSIX path)."""
        parts = rel.split("/")
        name = parts[-1]
        for r in self.rules:
            t = r.type
            if t == "path" and (rel == r.value or rel.startswith(r.value + "/")):
                return r
            if t == "folder_name" and (name == r.value if is_dir else r.value in parts[:-1]):
                return r
            if t == "file_name" and not is_dir and name == r.value:
                return r
            if t == "extension" and not is_dir and name.lower().endswith(r.value):
                return r
        for r, spec in self._patterns:
            if spec.match_file(rel + "/" if is_dir else rel):
                return r
        if self._hidden and any(p.startswith(".") for p in parts):
            return self._hidden
        if self._size and size is not None and not is_dir and size > int(self._size.value):
            return self._size
        return None


    def match_path(self, rel: str, size: int | None = None, is_dir: bool = False) -> Rule | None:
        """As ``match``, also when one of the path's parent folders is what is ruled out."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            rule = self.match("/".join(parts[:depth]), True)
            if rule is not None:
                return rule
        return self.match(rel, is_dir, size)


_WARNED: set[tuple[str, str]] = set()  # (where, pattern) said once per process


def _bounded(patterns: list[str], where: str) -> list[str]:
    """``patterns`` (a ``.gitignore``'s lines, or a stored rule's one: ``where`` names it) but
    those whose backtracking has no bound — a line of a repository anyone may write, or a
    rule an older release saved, would freeze every build and a reader's rule test: left out,
    said once, not at every walk or rule set that meets it again."""
    kept = []
    for pattern in patterns:
        if extra_stars(pattern) <= MAX_EXTRA_STARS:
            kept.append(pattern)
        elif (where, pattern) not in _WARNED:
            _WARNED.add((where, pattern))
            log.warning("%s: pattern %r left out: more than %d * beside another between two "
                        "slashes (matching it takes minutes)", where, pattern, MAX_EXTRA_STARS)
    return kept


class GitIgnores:
    """Every ``.gitignore`` from the root down, read once per walk; deeper files win, as in git."""

    def __init__(self, root: str):
        self.root = root
        self._specs: dict[str, object] = {}

    def _spec(self, dir_rel: str):
        if dir_rel not in self._specs:
            path = os.path.join(self.root, dir_rel, ".gitignore")
            spec = None
            try:
                # utf-8-sig: a byte-order mark (an editor on Windows writes one) is no part
                # of the first rule, as git skips it too
                with open(path, encoding="utf-8-sig", errors="replace") as fh:
                    from pathspec import GitIgnoreSpec
                    spec = GitIgnoreSpec.from_lines(_bounded(fh.read().splitlines(), path))
            except OSError:
                pass
            self._specs[dir_rel] = spec
        return self._specs[dir_rel]

    def match(self, rel: str, is_dir: bool) -> str | None:
        """The deciding ``.gitignore`` line for ``rel`` if it ignores it, else None."""
        parts = rel.split("/")
        verdict = None
        for depth in range(len(parts)):
            dir_rel = "/".join(parts[:depth])
            spec = self._spec(dir_rel)
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            result = spec.check_file(sub)
            if result.include is not None:
                where = f"{dir_rel}/.gitignore" if dir_rel else ".gitignore"
                pattern = spec.patterns[result.index].pattern
                verdict = f"{where}: {pattern}" if result.include else None
        return verdict

    def match_with_parents(self, rel: str, is_dir: bool) -> str | None:
        """As ``match``, also when a parent directory is what is ignored."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            hit = self.match("/".join(parts[:depth]), True)
            if hit:
                return hit
        return self.match(rel, is_dir)
