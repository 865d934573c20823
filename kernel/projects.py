"""The project registry: ids, config aliases, the reserved-path denylist, state dirs.

A project is a directory. In loopback mode any readable directory outside the denylist can be
registered; in server mode projects come only from the config's ``[[projects]]`` allowlist,
which passes the same denylist at start-up. NeuralMind's own state (the state home, the
per-project state root, every ``.neuralmind/`` folder) is on the denylist too: a project
holding it would index and serve the bearer token.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernel.clock import now_iso
from kernel.config import ConfigError
from kernel.errors import Conflict, Forbidden, InvalidFields, NotFound

RESERVED_SYSTEM = ("/", "/proc", "/sys", "/dev", "/etc", "/boot", "/run")
RESERVED_HOME = (".ssh", ".gnupg", ".aws", ".kube", ".docker", ".config")
HOMES_ROOTS = ("/home", "/Users")  # where users' homes usually are, whoever runs the server

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
    registered_at: str | None  # None for a config alias: the config declares it, none registered it
    alias: bool = False


def gone(project: Project) -> bool:
    """Whether the project's directory, which holds its state (``.neuralmind/``), is gone."""
    return project.state_dir.is_relative_to(project.path) and not project.path.is_dir()


def refuse_a_gone_directory(project: Project) -> None:
    """A gone directory is a 409 in every worker alike, rather than a store one worker still
    holds open and another makes anew (an empty one, inside a new directory)."""
    if gone(project):
        raise Conflict(f"the directory of project {project.id}, {project.path}, is gone and its "
                       "state with it: restore it, or remove the project (`neuralmind project "
                       f"remove --project {project.id}`)", code="project_directory_missing")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def refusal(real: str, private: tuple[str, ...] = ()) -> str | None:
    """Why the directory at real path ``real`` may not be a project, or None: a system path,
    a user's home or a folder holding one (``/home``: its build would index every user's
    credential folders), a credential folder of the server's user. ``private`` holds
    NeuralMind's own state folders (real paths): neither they, nor a folder inside them, nor
    a folder holding them may be one."""
    home = os.path.realpath(os.path.expanduser("~"))
    if real in RESERVED_SYSTEM or any(_inside(real, p) for p in RESERVED_SYSTEM[1:]) or any(
            _inside(real, os.path.join(home, d)) for d in RESERVED_HOME):
        return f"{real} is a reserved system or credentials path"
    held = next((h for h in (home, *HOMES_ROOTS, *_users_homes()) if _inside(h, real)), None)
    if held is not None:
        return (f"{real} is a reserved system or credentials path: it is or holds users' "
                f"homes ({held}), whose credential folders its build would index")
    for state in private:
        if _inside(real, state) or _inside(state, real):
            return f"{real} holds NeuralMind's own state ({state}: its token and stores)"
    if ".neuralmind" in real.split("/"):
        return f"{real} is inside a .neuralmind folder, NeuralMind's own state"
    # git's own data: its config holds the remotes' URLs, tokens in them at times
    if ".git" in real.split("/") or _bare_repository(real):
        return (f"{real} is git's own data (a .git folder or a bare repository), not a "
                "working tree: give the folder the repository is checked out in")
    return None


@functools.cache
def _users_homes() -> tuple[str, ...]:
    """The real paths of the homes the system's user database lists (``/``, some daemons'
    home, is a system path already). Read once: a user added later is in the next process."""
    import pwd
    homes = {os.path.realpath(user.pw_dir) for user in pwd.getpwall() if user.pw_dir}
    return tuple(sorted(homes - {"/"}))


def _bare_repository(real: str) -> bool:
    return all(os.path.exists(os.path.join(real, name)) for name in ("HEAD", "objects", "refs"))


def real_path(raw: str) -> str:
    """``raw`` with ``~`` expanded and symlinks resolved; a NUL byte, which no path may hold,
    is a 422 on ``path`` instead of the OS's ValueError, and so is a relative path: it would
    be resolved against the server's working directory, which is not the caller's."""
    if "\0" in raw:
        raise InvalidFields.one("path", "a path cannot contain a NUL byte", "path_invalid")
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):
        raise InvalidFields.one("path", f"{raw!r} is relative: give an absolute path (the "
                                "server's working directory is not yours)", "path_invalid")
    return os.path.realpath(path)


def check_path(raw: str, private: tuple[str, ...] = ()) -> str:
    """The real path of a directory that may be registered, or a 403/422 saying why not."""
    real = real_path(raw)
    why = refusal(real, private)
    if why:
        raise Forbidden(why, code="path_not_allowed")
    if not os.path.isdir(real):
        raise InvalidFields.one("path", "not a directory", "not_a_directory",
                                f"{raw} is not a directory")
    return real


def state_root(settings) -> Path | None:
    """Where per-project state lives outside the repositories (``[kernel] state_dir``)."""
    return Path(settings.kernel.state_dir).expanduser() if settings.kernel.state_dir else None


def private_dirs(settings) -> tuple[str, ...]:
    """NeuralMind's own state folders, real paths: the state home and the state root."""
    return tuple(os.path.realpath(p) for p in (settings.home, state_root(settings)) if p)


def config_projects(settings) -> dict[str, str]:
    """The config's ``[[projects]]`` as ``{id: real path}``. An entry the denylist refuses
    (after symlinks are resolved), or that names no directory, is a ConfigError naming it:
    the server does not start."""
    private, out = private_dirs(settings), {}
    for alias in settings.projects:
        real = os.path.realpath(alias.path)
        why = refusal(real, private) or (None if os.path.isdir(real) else "not a directory"
                                         if os.path.exists(real) else "no such directory")
        if why:
            raise ConfigError(f"[[projects]] id = {alias.id!r}, path = {alias.path!r} in "
                              f"{settings.source or 'the config'} is refused: {why}")
        if alias.id in out:
            raise ConfigError(f"[[projects]] id = {alias.id!r} is given twice in "
                              f"{settings.source or 'the config'}: an id names one project")
        out[alias.id] = real
    return out


class ProjectRegistry:
    """The registered projects, and what this process served of them: ``forget(project)`` is
    called for a project removed — or removed and registered again, a new ``registered_at`` —
    since, so the plugins let go of its open stores and caches. At once in the process that
    removes it; in the others (gunicorn's workers) at the first lookup that finds it changed,
    or within ``check_every_s`` of the removal."""

    check_every_s = 10.0

    def __init__(self, db, settings, forget: Callable[[Project], None] | None = None):
        self._db = db
        self._state_root = state_root(settings)
        self.server_mode = settings.server_mode
        self.private = private_dirs(settings)
        self._made: dict[tuple, Project | None] = {}  # per registry row: what _row made of it
        self._aliases = {pid: self._make(pid, real, None, alias=True)
                         for pid, real in config_projects(settings).items()}
        self._forget = forget
        self._served: dict[str, Project] = {}  # as registered when this process served them
        self._served_lock = threading.Lock()
        self._checked = time.monotonic()
        # the registry read whole once: a damaged page stops the start in one line (the
        # Kernel's damage path) rather than answer every project route 500
        db.conn.execute("SELECT max(length(path || registered_at)) FROM projects").fetchone()

    def _make(self, pid: str, real: str, registered_at: str | None, alias: bool = False) -> Project:
        state = (self._state_root / pid) if self._state_root else Path(real) / ".neuralmind"
        return Project(pid, os.path.basename(real) or real, Path(real), state, registered_at, alias)

    def _row(self, row) -> Project | None:
        """The project of a registry row; None for a row registered before its path was
        refused (it held the state home then): such a row is neither listed nor served.
        Kept per row (every request asks; the denylist's answer is fixed for the process)."""
        key = (row["id"], row["path"], row["registered_at"])
        if key not in self._made:
            self._made[key] = (None if refusal(row["path"], self.private)
                               else self._make(*key))
        return self._made[key]

    def register(self, raw_path: str) -> tuple[Project, bool]:
        """``(project, created)``; registering the same directory twice is not an error."""
        if self.server_mode:
            raise Forbidden("server mode serves only the projects in its config",
                            code="registration_disabled")
        real = check_path(raw_path, self.private)
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
        project = self._row(row) if row else None
        if self._forget is not None:
            self._served_now(pid, project)
        return project

    def get(self, pid: str) -> Project:
        project = self.find(pid)
        if project is None:
            raise NotFound(f"no project with id {pid}", code="project_not_found")
        return project

    def all(self) -> list[Project]:
        """Every project in id order (config aliases and registered ones)."""
        rows = [] if self.server_mode else self._db.conn.execute("SELECT * FROM projects").fetchall()
        registered = list(filter(None, map(self._row, rows)))
        if self._forget is not None:  # a listing opens stores too (a project's status)
            for project in registered:
                self._served_now(project.id, project)
        return sorted([*self._aliases.values(), *registered], key=lambda p: p.id)

    def remove(self, pid: str) -> Project:
        """Unregister (never touches the user's files). Config aliases cannot be removed."""
        project = self.get(pid)
        if project.alias:
            raise Forbidden("projects from the config are removed by editing the config",
                            code="registration_disabled")
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM projects WHERE id = ?", (pid,))
        self._let_go([project])
        return project

    # -- what this process served ------------------------------------------------------------

    def _served_now(self, pid: str, project: Project | None) -> None:
        known = self._served.get(pid)
        if known is not None and (project is None or project.registered_at != known.registered_at):
            self._let_go([known])
        if project is not None and self._served.get(pid) is not project:
            with self._served_lock:
                self._served[pid] = project
        if time.monotonic() - self._checked >= self.check_every_s:
            self._checked = time.monotonic()
            current = dict(self._db.conn.execute("SELECT id, registered_at FROM projects"))
            self._let_go([p for pid, p in list(self._served.items())
                          if current.get(pid) != p.registered_at])

    def _let_go(self, known: list[Project]) -> None:
        """Forget these registrations — each once: a thread that found one changed after
        another thread let it go (and noted the new one) forgets nothing."""
        with self._served_lock:
            gone = [p for p in known if self._served.get(p.id) is p]
            for p in gone:
                del self._served[p.id]
                self._made.pop((p.id, str(p.path), p.registered_at), None)
        for project in gone:
            self._forget(project)
