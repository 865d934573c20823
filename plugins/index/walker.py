"""The project's files that may be indexed: ignore rules and ``.gitignore`` applied while
descending (an ignored directory is never entered), symlinks never followed."""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass

from plugins.index.ignore import GitIgnores, RuleSet


@dataclass(frozen=True)
class FileEntry:
    path: str  # project-relative POSIX path
    size: int
    mtime_ns: int


OVERSIZED = "larger than the size cap ([index] max_file_bytes, or a max_file_size rule)"


def walk(root: str, rules: RuleSet, check=lambda: None,
         skipped: Counter | None = None) -> list[FileEntry]:
    """Every regular file under ``root`` that no rule ignores, sorted by path; the files left
    out for their size alone are counted in ``skipped`` (a rule that names a file says why
    itself, a size cap would leave a large module out without a word).

    Symlinks (files and directories) are skipped: one pointing outside the root must never
    pull outside files into the index, and one pointing inside would index a file twice.
    """
    gitignores = GitIgnores(root)
    found: list[FileEntry] = []
    stack = [""]
    while stack:
        check()
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel_dir)))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if stat.S_ISDIR(st.st_mode):
                if rules.match(rel, True) is None and gitignores.match(rel, True) is None:
                    stack.append(rel)
            elif stat.S_ISREG(st.st_mode):
                rule = rules.match(rel, False, st.st_size)
                if rule is None and gitignores.match(rel, False) is None:
                    found.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
                elif rule is not None and rule.type == "max_file_size" and skipped is not None:
                    skipped[OVERSIZED] += 1
    found.sort(key=lambda f: f.path)
    return found


def contained(root: str, rel: str) -> str | None:
    """``rel``'s full path when it is no symlink and no symlink on its way leads out of
    ``root``; else None. What a walk found may have changed since (a folder made a symlink
    by a branch switch or a deploy): a read must still never leave the project."""
    full = os.path.join(root, rel)
    try:
        real = os.path.realpath(full)
    except ValueError:  # a NUL in it: no file's name
        return None
    if os.path.islink(full) or not real.startswith(os.path.realpath(root) + os.sep):
        return None
    return full


def explain(root: str, rules: RuleSet, rel: str) -> dict | None:
    """The rule that ignores ``rel`` (a rule's fields, or the deciding .gitignore line)."""
    full = os.path.join(root, rel)
    is_dir = os.path.isdir(full) and not os.path.islink(full)
    size = os.lstat(full).st_size if os.path.lexists(full) and not is_dir else None
    rule = rules.match_path(rel, size, is_dir)
    if rule is not None:
        return rule.public()
    hit = GitIgnores(root).match_with_parents(rel, is_dir)
    if hit:
        where, _, pattern = hit.partition(": ")
        return {"id": "gitignore", "type": "gitignore", "value": pattern, "enabled": True,
                "reason": where, "protected": True}
    return None


def select(root: str, rules: RuleSet, paths: set[str]) -> tuple[list[FileEntry], set[str]]:
    """The named paths split into files to index and paths that are gone or now ignored
    (the watcher's targeted update, without a walk of the whole tree)."""
    present, gone = [], set()
    for rel in sorted(paths):
        full = os.path.join(root, rel)
        try:
            st = os.lstat(full)
        except OSError:
            gone.add(rel)
            continue
        if not stat.S_ISREG(st.st_mode) or explain(root, rules, rel) is not None:
            gone.add(rel)
        else:
            present.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
    return present, gone
