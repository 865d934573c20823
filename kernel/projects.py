"""The project registry: ids, config aliases, the reserved-path denylist, state dirs.

A project is a directory. In loopback mode any readable directory outside the denylist can be
registered; in server mode projects come only from the config's ``[[projects]]`` allowlist.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from kernel.clock import now_iso
from kernel.errors import Forbidden, InvalidFields, NotFound

RESERVED_SYSTEM = ("/", "/proc", "/sys", "/dev", "/etc", "/boot", "/run")
RESERVED_HOME = (".ssh", ".gnupg", ".aws", ".kube", ".docker", ".config")

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS projects (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    registered_at TEXT NOT NULL
);
"""]


def project_id_for(realpath: str) -> str:
    return "p_" + hashlib.sha256(realpath.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Project:
    id: str
    name: str
    path: Path
    state_dir: Path
    registered_at: str
    alias: bool = False


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_path(raw: str) -> str:
    """The real path of a directory that may be registered, or a 403/422 saying why not."""
    real = os.path.realpath(os.path.expanduser(raw))
    home = os.path.realpath(os.path.expanduser("~"))
    if real in RESERVED_SYSTEM or real == home or any(
            _inside(real, p) for p in RESERVED_SYSTEM[1:]) or any(
            _inside(real, os.path.join(home, d)) for d in RESERVED_HOME):
        raise Forbidden(f"{real} is a reserved system or credentials path", code="path_not_allowed")
    if not os.path.isdir(real):
        raise InvalidFields.one("path", "not a directory", "not_a_directory",
                                f"{raw} is not a directory")
    return real


class ProjectRegistry:
    def __init__(self, db, settings):
        self._db = db
        self._state_root = Path(settings.kernel.state_dir).expanduser() if settings.kernel.state_dir else None
        self.server_mode = settings.server_mode
        self._aliases: dict[str, Project] = {}
        for alias in settings.projects:
            real = os.path.realpath(alias.path)
            self._aliases[alias.id] = self._make(alias.id, real, "", alias=True)

    def _make(self, pid: str, real: str, registered_at: str, alias: bool = False) -> Project:
        state = (self._state_root / pid) if self._state_root else Path(real) / ".neuralmind"
        return Project(pid, os.path.basename(real) or real, Path(real), state, registered_at, alias)

    def _row(self, row) -> Project:
        return self._make(row["id"], row["path"], row["registered_at"])

    def register(self, raw_path: str) -> tuple[Project, bool]:
        """``(project, created)``; registering the same directory twice is not an error."""
        if self.server_mode:
            raise Forbidden("server mode serves only the projects in its config",
                            code="registration_disabled")
        real = check_path(raw_path)
        pid = project_id_for(real)
        with self._db.transaction() as conn:
            created = conn.execute(
                "INSERT INTO projects (id, path, name, registered_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING RETURNING id",
                (pid, real, os.path.basename(real) or real, now_iso())).fetchone() is not None
        return self.get(pid), created

    def find(self, pid: str) -> Project | None:
        if pid in self._aliases:
            return self._aliases[pid]
        if self.server_mode:
            return None
        row = self._db.conn.execute("SELECT * FROM projects WHERE id = ?", (pid,)).fetchone()
        return self._row(row) if row else None

    def get(self, pid: str) -> Project:
        project = self.find(pid)
        if project is None:
            raise NotFound(f"no project with id {pid}", code="project_not_found")
        return project

    def all(self) -> list[Project]:
        """Every project in id order (config aliases and registered ones)."""
        rows = [] if self.server_mode else self._db.conn.execute("SELECT * FROM projects").fetchall()
        return sorted([*self._aliases.values(), *map(self._row, rows)], key=lambda p: p.id)

    def remove(self, pid: str) -> Project:
        """Unregister (never touches the user's files). Config aliases cannot be removed."""
        project = self.get(pid)
        if project.alias:
            raise Forbidden("projects from the config are removed by editing the config",
                            code="registration_disabled")
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM projects WHERE id = ?", (pid,))
        return project
