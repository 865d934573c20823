"""What plugins ask of git: HEAD (read from files, no subprocess on a write path) and which
files changed since a commit (``git diff``, for slow jobs only).

A project may sit in a sub-folder of a repository or in a linked worktree; HEAD is the
repository's either way."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

HEX = re.compile(r"[0-9a-fA-F]{4,64}")  # a commit id, abbreviated or not (git takes 4 on)


def git_dir(root: Path) -> Path | None:
    """The ``.git`` directory of the repository holding ``root`` (worktrees included)."""
    for folder in (root, *root.parents):
        dot = os.path.join(folder, ".git")
        try:
            mode = os.stat(dot).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            return Path(dot)
        text = Path(dot).read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text[7:].strip())
            return target if target.is_absolute() else (folder / target).resolve()
    return None


def head(root: Path) -> str:
    """The commit HEAD names, or "" outside a repository (or on an unborn branch)."""
    gdir = git_dir(root)
    if gdir is None:
        return ""
    try:
        ref = (gdir / "HEAD").read_text().strip()
    except OSError:
        return ""
    if not ref.startswith("ref:"):
        return ref
    name = ref[4:].strip()
    common = gdir
    if (gdir / "commondir").is_file():  # a linked worktree keeps refs in the main .git
        common = (gdir / (gdir / "commondir").read_text().strip()).resolve()
    for base in (gdir, common):
        try:
            return (base / name).read_text().strip()
        except OSError:
            continue
    try:
        for line in (common / "packed-refs").read_text().splitlines():
            sha, _, refname = line.partition(" ")
            if refname.strip() == name:
                return sha
    except OSError:
        pass
    return ""


def changed_since(root: Path, sha: str) -> set[str] | None:
    """Project-relative paths changed between ``sha`` and HEAD; None when git cannot say, or
    ``sha`` is no commit id (a stored value, imported perhaps: never one git reads as an
    option, which ``--end-of-options`` makes sure of as well)."""
    if not HEX.fullmatch(sha):
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "diff", "--name-only", "--relative",
                              "--end-of-options", f"{sha}..HEAD"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


def commits(root: Path, paths: list[str], limit: int) -> list[dict]:
    """The newest ``limit`` commits touching any of ``paths`` (project-relative):
    ``[{sha, at, author, subject, files}]``, newest first; [] without paths or outside a
    repository (``git log``, for reads that are not on a write path)."""
    if not paths:
        return []
    try:
        out = subprocess.run(["git", "-C", str(root), "log", f"-n{limit}", "--relative",
                              "--format=%x1e%H%x1f%aI%x1f%an%x1f%s", "--name-only", "--", *paths],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    found = []
    for block in out.stdout.split("\x1e")[1:]:
        head, _, names = block.partition("\n")
        sha, at, author, subject = head.split("\x1f", 3)
        found.append({"sha": sha, "at": at, "author": author, "subject": subject,
                      "files": [n.strip() for n in names.splitlines() if n.strip()]})
    return found
