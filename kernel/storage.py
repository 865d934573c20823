"""SQLite for every store: WAL, a busy timeout, foreign keys, migrations by schema version.

A store opens one connection per thread; writers take ``BEGIN IMMEDIATE`` so two gunicorn
workers queue instead of failing with "database is locked". They queue on a :class:`WriteLock`
first: SQLite's busy handler sleeps 1, 2, 5, 10… ms between tries, which leaves the CPU idle
while a write of a few hundred µs holds the file.
"""

from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

BUSY_TIMEOUT_MS = 10_000
S = TypeVar("S")

Migration = str | Callable[[sqlite3.Connection], None]


class WriteLock:
    """One writer at a time on a SQLite file: a lock for this process's threads, then
    ``flock`` on a side file for other processes, polled with pauses that start at 50 µs.
    Taken before ``BEGIN IMMEDIATE``, it hands the file over as soon as a write is done."""

    def __init__(self, path: Path):
        self._threads = threading.Lock()
        self._path = f"{path}-writer"
        self._fd: int | None = None  # made by the first write: reading needs none

    def acquire(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=timeout):
            return False
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:  # a read-only file system: said as such (kernel.errors)
                self._threads.release()
                raise
            weakref.finalize(self, os.close, self._fd)  # once no store of the file is left
        pause = 50e-6
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._threads.release()
                    return False
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._threads.release()


# held by the stores of each file: a file no store has open any more has no lock left either
_write_locks: weakref.WeakValueDictionary[str, WriteLock] = weakref.WeakValueDictionary()
_write_locks_guard = threading.Lock()
# A forked child must not share its parent's lock files (flock belongs to the open file).
os.register_at_fork(after_in_child=_write_locks.clear)


def write_lock(path: str | Path) -> WriteLock:
    """This process's :class:`WriteLock` for the SQLite file at ``path``."""
    resolved = Path(path).resolve()
    with _write_locks_guard:
        lock = _write_locks.get(str(resolved))
        if lock is None:
            lock = _write_locks[str(resolved)] = WriteLock(resolved)
        return lock


def connect(path: str | Path, remedy: str | None = None) -> sqlite3.Connection:
    """A connection in autocommit mode with the project's pragmas applied. It makes no folder:
    a thread connecting after the store's folder was deleted (a project's directory removed)
    fails, rather than making an empty database in a new folder of that name. A file whose
    folder or self cannot be written (a read-only file system, a folder without write
    permission) is opened read-only: reads go on, a write is :class:`StateReadOnly`.
    ``remedy`` is what a damage error met on it says to do (:func:`damage_remedy`)."""
    path = Path(path)
    read_only = read_only_here(path)
    if read_only and not path.exists():
        raise StateReadOnly(f"{path} cannot be made: its folder cannot be written")
    conn = sqlite3.connect(read_only_uri(path) if read_only else str(path), uri=read_only,
                           timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False, factory=_Connection)
    conn.path, conn.read_only, conn.remedy = path, read_only, remedy or RESTORE_HINT
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if read_only:
        _can_read(conn)
    else:
        _use_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class StateReadOnly(sqlite3.OperationalError):
    """The state's folder or file cannot be written here: said as ``storage_read_only``
    (kernel/errors.py), never as a store to try again."""


def read_only_here(path: Path) -> bool:
    """Whether SQLite may not write ``path``: its folder (which holds ``-wal``, ``-shm`` and a
    new file) or the file itself is there and cannot be written. A folder that is gone is no
    such state: connecting fails there as it should (nothing makes the folder anew)."""
    return ((path.parent.is_dir() and not os.access(path.parent, os.W_OK))
            or (path.exists() and not os.access(path, os.W_OK)))


def read_only_uri(path: Path) -> str:
    """A URI that opens ``path`` read-only. Where its folder cannot be written and no ``-wal``
    holds commits (a clean stop folds and removes it), SQLite cannot make the ``-shm`` a WAL
    reader needs: ``immutable`` reads the file without it, safe as nothing can write there."""
    wal = Path(f"{path}-wal")
    log_holds_commits = wal.exists() and wal.stat().st_size > 0
    immutable = not os.access(path.parent, os.W_OK) and not log_holds_commits
    return f"{path.absolute().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def _can_read(conn: sqlite3.Connection) -> None:
    """A read-only file SQLite cannot open — a ``-wal`` with commits but no ``-shm`` beside
    it, in a folder where none can be made — is :class:`StateReadOnly`, not "unable to open"
    (which reads as a store to try again)."""
    try:
        conn.execute("PRAGMA schema_version")
    except sqlite3.OperationalError as ex:
        conn.close()
        if getattr(ex, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_CANTOPEN:
            raise
        raise StateReadOnly(f"{conn.path} cannot be written here, nor read: {ex} (a -wal log "
                            "without its -shm in a folder where none can be made)") from None


DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def damaged(ex: BaseException) -> bool:
    """Whether SQLite says a file is damaged ("database disk image is malformed", "file is
    not a database"): no retry helps; a backup does."""
    return (isinstance(ex, sqlite3.DatabaseError)
            and getattr(ex, "sqlite_errorcode", 0) & 0xFF in DAMAGED)


def damaged_file(ex: BaseException) -> Path | None:
    """The file a damage error came from, where a store's connection named it."""
    return getattr(ex, "database_path", None)


RESTORE_HINT = 'restore it from a backup (docs/operations.md, "Storage")'


def remedy_of(migrations) -> str:
    """What mends a damaged file of a store with these ``migrations``: the ``remedy`` a
    derived store's carry (make the file again), else a backup."""
    return getattr(migrations, "remedy", RESTORE_HINT)


def damage_remedy(ex: BaseException) -> str:
    """What mends the file a damage error came from: its store's ``remedy`` (a derived
    store's file is made again, see :class:`Database`), else a backup."""
    return getattr(ex, "database_remedy", RESTORE_HINT)


def damage_said(ex: BaseException) -> str:
    """The one line a log, a start-up or ``storage check`` says of a damaged file."""
    where = damaged_file(ex) or "a SQLite file of NeuralMind's state"
    return f"{where} is damaged ({ex}): {damage_remedy(ex)}"


def _names_its_file(method: Callable) -> Callable:
    """``method`` of a cursor, putting the cursor's file, and what mends it, on a damage error
    it raises (SQLite's own names none, and a traceback says only which query met it)."""

    def call(self, *args):
        try:
            return method(self, *args)
        except sqlite3.DatabaseError as ex:
            if damaged(ex):
                ex.database_path, ex.database_remedy = (self.connection.path,
                                                        self.connection.remedy)
            raise

    return call


class _Cursor(sqlite3.Cursor):
    execute = _names_its_file(sqlite3.Cursor.execute)
    executemany = _names_its_file(sqlite3.Cursor.executemany)
    fetchone = _names_its_file(sqlite3.Cursor.fetchone)
    fetchmany = _names_its_file(sqlite3.Cursor.fetchmany)
    fetchall = _names_its_file(sqlite3.Cursor.fetchall)


class _Connection(sqlite3.Connection):
    """A store's connection: its file, whether it was opened read-only, what mends it when
    damaged, and cursors that name the file on damage."""

    path: Path
    read_only: bool
    remedy: str

    def cursor(self, factory=_Cursor):
        return super().cursor(factory)

    def execute(self, sql: str, parameters=()):
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters):
        return self.cursor().executemany(sql, parameters)


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (it stays so). The switch needs the file to itself and does not
    wait on the busy timeout, so processes opening a new file together retry it here."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as ex:
            if "locked" not in str(ex) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def schema_version(path: Path) -> int:
    """The schema version of the database at ``path``, read without writing to it; a file
    that is no SQLite database is a ``sqlite3.DatabaseError``."""
    conn = sqlite3.connect(read_only_uri(Path(path)), uri=True)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def damage(path: Path) -> str | None:
    """What SQLite's ``PRAGMA quick_check`` finds wrong in the file at ``path`` (read-only; it
    reads every page, so it takes a while on a large file); None when the file is whole. A
    file of 0 bytes (a first open cut short) is an empty database, and whole."""
    conn = sqlite3.connect(read_only_uri(Path(path)), uri=True)
    try:
        found = [row[0] for row in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as ex:
        if not damaged(ex):
            raise
        return str(ex)
    finally:
        conn.close()
    return None if found == ["ok"] else "; ".join(found[:3])


class StateReplaced(Exception):
    """A project's state file deleted or replaced while the server ran (a fresh clone):
    writing on would lose the writes at its next start, and its caches would mix the two
    files' rows."""

    def __init__(self, project_id: str):
        super().__init__(f"the state of project {project_id} (its .neuralmind folder) was "
                         "deleted or replaced while this server ran — a fresh clone? Remove "
                         "the project and add it again to serve the folder as it is now "
                         "(`neuralmind project remove`, then `neuralmind project add`, in the "
                         "folder); what the deleted state held is gone with it. A project "
                         "from the server's config: restart the server")


class NewerSchema(Exception):
    """Data a newer NeuralMind wrote (a downgrade, or an old server beside upgraded ones):
    never migrated down and never served, or this release would write what it cannot read."""

    def __init__(self, where: str, component: str, version: int, known: int):
        self.component, self.version, self.known = component, version, known
        super().__init__(f"{where} is at schema version {version}, newer than this "
                         f"NeuralMind's {known}: upgrade NeuralMind before serving it")

    @property
    def public(self) -> str:
        """What a request is told: the component, never the file's path."""
        return (f"the {self.component} data is at schema version {self.version}, newer than "
                f"this NeuralMind's {self.known}: upgrade NeuralMind")


def newer_schema(path: Path, migrations: Sequence[Migration]) -> str | None:
    """Why this NeuralMind must not open ``path``: its schema is of a newer one (a
    downgrade); None when it may. A file that is no database is a ``sqlite3.DatabaseError``."""
    version = schema_version(path)
    if version > len(migrations):
        return str(NewerSchema(str(path), Path(path).stem, version, len(migrations)))
    return None


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration],
            path: Path | None = None) -> int:
    """Bring the database to ``len(migrations)``; step *n* runs when ``user_version`` < n.
    A database past them is :class:`NewerSchema` (naming its ``path``), never opened.

    Each step runs in its own transaction with the version bump, so a crash leaves the
    database at a whole version and running this again is harmless.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(migrations):
        raise NewerSchema(str(path or "the database"), path.stem if path else "database",
                          version, len(migrations))
    for number, step in enumerate(migrations, start=1):
        if number <= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # re-read: another process may have migrated while we waited for the lock
            if conn.execute("PRAGMA user_version").fetchone()[0] >= number:
                conn.execute("COMMIT")
                continue
            if callable(step):
                step(conn)
            else:
                for statement in statements(step):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise
    return len(migrations)


def _roll_back(conn: sqlite3.Connection) -> None:
    """End a failed transaction — unless SQLite ended it itself (a full disk does), where a
    ROLLBACK would fail and hide why."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def statements(script: str) -> Iterator[str]:
    """The statements of a SQL script, one at a time (``executescript`` would commit); a
    semicolon inside a string, a comment or a trigger's body ends none (SQLite decides)."""
    buf = ""
    for piece in re.split(r"(?<=;)", script):
        buf += piece
        if sqlite3.complete_statement(buf):
            if buf.strip():
                yield buf.strip()
            buf = ""
    if buf.strip():
        yield buf.strip()


class Database:
    """A SQLite file with its migrations, handing each thread its own connection; without
    them (``None``) the file is read and written as it is. The migrations of a derived store
    (the code index, made from the repository) carry a ``remedy``: what a damage error then
    says to do instead of restoring a backup (deleting the file and building it again)."""

    def __init__(self, path: str | Path, migrations: Sequence[Migration] | None = None):
        self.path = Path(path)
        self.remedy = remedy_of(migrations)
        self.path.parent.mkdir(parents=True, exist_ok=True)  # here only: see connect()
        self._local = threading.local()
        self._write_lock = write_lock(self.path)
        if migrations is not None:
            migrate(self.conn, migrations, self.path)
        self._identity = _identity(self.path)

    def replaced(self) -> bool:
        """Whether the file was deleted, or another put in its place, since it was opened (a
        project's folder cloned afresh while the server runs): what this object holds open
        is then a file no one else will ever read."""
        return self._identity is not None and _identity(self.path) != self._identity

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection; one opened read-only is opened again once the file can
        be written (a file system remounted read-write), without a restart."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.read_only and not read_only_here(self.path):
            conn.close()
            conn = None
        if conn is None:
            conn = self._local.conn = connect(self.path, self.remedy)
        return conn

    @contextmanager
    def transaction(self, serial: bool = False) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed on exit, rolled back on error.
        Writers of one file go one at a time anyway, so ``serial`` (which PostgreSQL needs for
        appends that must commit in order) changes nothing here."""
        conn = self.conn
        if conn.read_only:  # before the write lock, whose side file could not be made either
            raise StateReadOnly(f"{self.path} cannot be written here")
        if not self._write_lock.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
            raise sqlite3.OperationalError("database is locked")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")  # which can fail too (a deferred constraint, I/O)
            except BaseException:
                _roll_back(conn)
                raise
        finally:
            self._write_lock.release()

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def checkpoint(self) -> None:
        """Copy the write-ahead log's commits into the file, without waiting for readers: a
        server stopping does it, so the file alone — copied, or restored with its ``-wal``
        deleted (docs/operations.md) — holds every commit."""
        if not self.conn.read_only:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def state_dir(path: Path) -> Path:
    """A project's state folder, made on first use with a ``.gitignore`` holding ``*``, so a
    ``.neuralmind/`` inside a repository never shows in its ``git status``; the owner's alone
    (0700, as the home is): its files hold the memories and the index, which other local users
    could read in a repository they may enter."""
    ignore = Path(path) / ".gitignore"
    if not ignore.exists():
        ignore.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        ignore.write_text("*\n")
    try:
        if Path(path).stat().st_mode & 0o077:  # made by an earlier release, or by hand
            os.chmod(path, 0o700)
    except OSError:  # a read-only state, or another user's folder: it is read as it is
        pass
    return Path(path)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class ProjectStores(Generic[S]):
    """A plugin's store per project, opened on first use (in the project's :func:`state_dir`)
    for the project's registration, and kept until the plugin forgets the project (the
    ``forget_project`` hook) or the project is found registered anew."""

    def __init__(self, open_store: Callable[[Any], S]):
        self._open = open_store
        self._stores: dict[str, tuple[str, S]] = {}  # id → (registered_at, its store)
        self._lock = threading.Lock()

    def get(self, project) -> S:
        """The project's store; one opened before the project was removed and registered
        again is let go of (this process had not served it since, or looked it up late);
        :class:`StateReplaced` when its file was deleted or replaced under the running
        server."""
        held = self._stores.get(project.id)
        if held is not None and held[0] != project.registered_at:
            held = None  # opened for an earlier registration: replaced below
        db = getattr(held and held[1], "db", None)  # a store of the kernel's databases
        if isinstance(db, Database) and db.replaced():
            raise StateReplaced(project.id)
        if held is None:
            with self._lock:
                held = self._stores.get(project.id)
                if held is None or held[0] != project.registered_at:
                    from kernel.projects import refuse_a_gone_directory
                    refuse_a_gone_directory(project)  # opening it would make the folder anew
                    state_dir(project.state_dir)
                    held = self._stores[project.id] = (project.registered_at,
                                                       self._open(project))
        return held[1]

    def forget(self, project) -> S | None:
        """Let go of the store opened for ``project``'s registration, returned; None when this
        process holds none: its files close once no request or job that holds it still does
        (each thread's connection goes with the store)."""
        with self._lock:
            held = self._stores.get(project.id)
            if held is None or held[0] != project.registered_at:
                return None
            del self._stores[project.id]
            return held[1]


def database_errors() -> tuple[type[Exception], ...]:
    """What a store's database raises when it cannot serve: SQLite's errors, PostgreSQL's and
    its pool's (``except database_errors():`` is evaluated only when something was raised)."""
    import psycopg
    import psycopg_pool
    return sqlite3.Error, psycopg.Error, psycopg_pool.PoolTimeout
