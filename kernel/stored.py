"""What each component keeps, for ``neuralmind storage check`` and ``neuralmind storage migrate``.

The kernel and every plugin with state describe it as :class:`StorageComponent` objects (the
kernel its own; plugins through the ``storage_components`` hook): its name in the shared
database, its PostgreSQL migrations and tables, the files it keeps in a SQLite home, and how
to copy those files into PostgreSQL — or, for state each machine keeps for itself whatever
the backend (the code index, derived from its checkout), no PostgreSQL part at all. Copies
go through :func:`copy_table`: rows in batches, each committed, a row already in the
database skipped — so running a copy again resumes it, and running it on a finished copy
changes nothing, as long as no server wrote there meanwhile: a row a server deleted would
come back, so :func:`foreign` refuses such a database first. Each copy answers with
:class:`Check` lines (a count, a chain's head) that hold the same value in the home and in
the database.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel.pg import PgDatabase, PgMigration
from kernel.storage import Database, Migration

BATCH = 1_000  # rows per committed batch of a copy


@dataclass(frozen=True)
class StoredFile:
    """A file a component keeps in a SQLite home: a SQLite database with its ``migrations``
    (``storage check`` compares its version with them), or another file (``migrations`` None)."""

    path: Path
    migrations: Sequence[Migration] | None = None
    label: str = ""  # what it belongs to, when a component keeps several (a project id)


@dataclass(frozen=True)
class Check:
    """One thing a copy verifies: ``home`` and ``database`` are equal once the copy is whole."""

    what: str
    home: Any
    database: Any
    mended: tuple[str, ...] = ()  # rows copied other than as stored, each said (a NUL's)

    @property
    def ok(self) -> bool:
        return self.home == self.database


@dataclass(frozen=True)
class StorageComponent:
    """One component's stored state. ``files(home)`` and ``copy(home, target)`` get a
    :class:`SqliteHome`; ``copy`` brings each file to its version first (as a server start
    would), copies what it holds into ``target`` (the component's view of the database,
    migrated) and returns the :class:`Check` lines that prove the copy whole. ``prerequisite``
    says, on a connection to the database, why the component could not make its tables there
    (an extension the role may not create) — checked before a server forks or a copy begins,
    for the enabled components alone. ``pg_migrations`` None: the component keeps nothing in
    the database — its files stay per machine, checked in a SQLite home, never copied."""

    name: str
    pg_migrations: Sequence[PgMigration] | None
    tables: tuple[str, ...]
    files: Callable[[SqliteHome], list[StoredFile]]
    copy: Callable[[SqliteHome, PgDatabase], list[Check]]
    prerequisite: Callable[[Any], str | None] | None = None


@dataclass
class SqliteHome:
    """The SQLite home being checked or copied: its settings, and its projects as its kernel.db
    and the config list them (a component that keeps state per project walks them)."""

    settings: Any
    _projects: list | None = field(default=None, repr=False)

    @property
    def path(self) -> Path:
        return self.settings.home

    def projects(self) -> list:
        if self._projects is None:
            from kernel.projects import ProjectRegistry
            path = self.path / "kernel.db"
            # 0 bytes with no log: a first open cut short (a full disk), an empty database
            db = Database(path) if file_size(path) else _NoProjects()
            try:
                self._projects = ProjectRegistry(db, self.settings).all()
            finally:
                db.close()
        return self._projects

    def open(self, file: StoredFile) -> Database | None:
        """``file`` migrated to its version, or None when the home has no such file."""
        if not file.path.is_file():
            return None
        return Database(file.path, file.migrations)


class _NoProjects:
    """A home without kernel.db, or with an empty one: no registered projects (the config's
    still count)."""

    def __init__(self):
        from kernel.projects import MIGRATIONS
        self.conn = sqlite3.connect(":memory:")
        self.conn.row_factory = sqlite3.Row
        self.conn.executescript(MIGRATIONS[0])

    def close(self) -> None:
        self.conn.close()


def rows_of(source: Database, table: str) -> tuple[list[str], Iterator[sqlite3.Row]]:
    """``(columns, rows)`` of a SQLite table, rows read in primary-key order (a WITHOUT ROWID
    table is read in that order as it is)."""
    keyed = source.conn.execute("SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_master "
                                "WHERE name = ?", (table,)).fetchone()[0]
    cursor = source.conn.execute(f"SELECT * FROM {table}" + ("" if keyed else " ORDER BY rowid"))
    return [c[0] for c in cursor.description], iter(cursor)


def copy_table(source: Database, target: PgDatabase, table: str, key: Sequence[str], *,
               into: str | None = None, extra: dict[str, Any] | None = None,
               convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
               where: tuple[str, Sequence] = ("", ()), mend: bool = True,
               remedy: str | None = None) -> Check:
    """Copy SQLite ``table`` into PostgreSQL table ``into`` (the same name by default), every
    column, plus the ``extra`` columns (a project id), each row through ``convert`` if given.
    Rows whose ``key`` is there already are skipped. The check counts the source's rows and
    the target's (those matching ``where``, an SQL condition and its parameters). A NUL in a
    text is copied as U+FFFD and said (``mended``) unless ``mend`` is False — a table whose
    rows a hash covers — where such a row is refused (:class:`RowRefused`, saying ``remedy``
    when a row cannot be mended in the file)."""
    into = into or table
    shown_key = [k for k in key if k not in (extra or {})]
    if not mend:  # refused before any row is copied: none of the table goes in part
        columns, rows = rows_of(source, table)
        for row in rows:
            record = dict(zip(columns, row))
            if any(isinstance(v, str) and "\0" in v for v in record.values()):
                raise RowRefused(source.path, table, _where(record, shown_key),
                                 "PostgreSQL's text cannot hold its NUL character", remedy)
    columns, rows = rows_of(source, table)
    copied, names, sql, mended = 0, None, "", []
    for chunk in _chunks(rows, BATCH):
        records = [{**dict(zip(columns, row)), **(extra or {})} for row in chunk]
        if convert is not None:
            records = [convert(r) for r in records]
        for record in records if mend else ():
            if nul := [n for n, v in record.items() if isinstance(v, str) and "\0" in v]:
                record.update({n: record[n].replace("\0", NUL_AS) for n in nul})
                mended.append(f"{table} {_where(record, shown_key)}: {', '.join(nul)} held a NUL "
                              "character, copied as U+FFFD")
        if names is None:
            names = list(records[0])
            sql = (f"INSERT INTO {into} ({', '.join(names)}) VALUES "
                   f"({', '.join('?' * len(names))}) ON CONFLICT ({', '.join(key)}) DO NOTHING")
        try:
            with target.transaction() as conn:
                conn.executemany(sql, [[r[n] for n in names] for r in records])
        except _refusals():
            _name_refused(target, sql, names, records, source.path, table, shown_key, remedy)
            raise
        copied += len(records)
    condition, params = where
    in_target = target.conn.execute(
        f"SELECT COUNT(*) FROM {into}" + (f" WHERE {condition}" if condition else ""),
        params).fetchone()[0]
    label = f"{into} rows" + (f" ({params[0]})" if params else "")
    return Check(label, copied, in_target, tuple(mended))


NUL_AS = "\ufffd"  # PostgreSQL's text holds no NUL; older builds let one into SQLite


class RowRefused(Exception):
    """A row of the home PostgreSQL will not take as it is (a value out of its column's
    range): copying it again would fail again, so the copy names it, where an operator mends
    it (the SQLite file, table and key)."""

    MEND = ("Mend that row in the file (with the home's server stopped), then run the same "
            "command again: what was copied stays.")

    def __init__(self, path: Path, table: str, where: str, why: str, remedy: str | None = None):
        super().__init__(f"PostgreSQL refuses the row of {table} in {path} where {where}: {why}")
        self.remedy = remedy or self.MEND


def _where(record: dict[str, Any], key: Sequence[str]) -> str:
    return " and ".join(f"{k} = {record[k]!r}" for k in key)


def _refusals() -> tuple[type[Exception], ...]:
    """What PostgreSQL raises for a row's own data, not for being out of reach."""
    import psycopg
    return psycopg.DataError, psycopg.IntegrityError


def _name_refused(target: PgDatabase, sql: str, names: list[str], records: list[dict[str, Any]],
                  path: Path, table: str, key: Sequence[str], remedy: str | None) -> None:
    """Raise :class:`RowRefused` for the first of ``records`` PostgreSQL refuses: each is
    tried alone (the ones before it are copied, as a resumed copy would copy them)."""
    for record in records:
        try:
            with target.transaction() as conn:
                conn.execute(sql, [record[n] for n in names])
        except _refusals() as ex:
            raise RowRefused(path, table, _where(record, key), str(ex).splitlines()[0],
                             remedy) from None


def _chunks(rows: Iterable, size: int) -> Iterator[list]:
    chunk: list = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def follow_serial(target: PgDatabase, table: str, column: str = "id") -> None:
    """Move ``table``'s id sequence past the ids a copy wrote, so the next row a server adds
    gets the next id (copied ids are kept: other tables and cursors name them)."""
    with target.transaction() as conn:
        conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                     f"GREATEST((SELECT MAX({column}) FROM {table}), 1))")


def file_size(path: Path) -> int:
    """Bytes of a file, its SQLite ``-wal`` included (0 when it does not exist — or no longer:
    the last connection to close removes the ``-wal``)."""
    return sum(_size(p) for p in (path, f"{path}-wal"))


def _size(path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# -- the kernel's own component ------------------------------------------------------------------

def _kernel_files(home: SqliteHome) -> list[StoredFile]:
    from kernel.app import kernel_migrations
    return [StoredFile(home.path / "kernel.db", kernel_migrations(postgres=False))]


def _kernel_copy(home: SqliteHome, target: PgDatabase) -> list[Check]:
    """Projects, jobs and events, ids kept (webhook deliveries, the audit trail's cursor and
    clients' Last-Event-IDs name events by id). Leases are not copied: they say which
    process holds what now, and the servers that start on the database take them afresh."""
    (file,) = _kernel_files(home)
    source = home.open(file)
    if source is None:
        return []
    try:
        checks = [copy_table(source, target, table, ("id",))
                  for table in ("projects", "jobs", "events")]
    finally:
        source.close()
    follow_serial(target, "events")
    return checks


def foreign(home: SqliteHome, conn) -> str | None:
    """Why the database ``conn`` reads (a reader's ``conn``) must not take a copy of ``home``:
    it holds what the home does not — this home's copy with events past the home's last (a
    server wrote there since: copying again would bring back what it deleted, a webhook that
    then delivers again), or another home's events or projects (they would mix, ids clash).
    None when it holds nothing yet, or (part of) this home's copy that no server wrote to
    since: the copy then resumes, or changes nothing. Every write a server makes appends an
    event, and the events' sequence never goes back: it tells even of events deleted since."""
    if conn.execute("SELECT to_regclass('events') IS NULL OR to_regclass('projects') IS NULL"
                    ).fetchone()[0]:
        return None
    issued, last = conn.execute(
        "SELECT GREATEST(pg_sequence_last_value(pg_get_serial_sequence('events', 'id')"
        "::regclass), MAX(id), 0), MAX(id) FROM events").fetchone()
    ours, in_home, registered = _home_kernel(home, last)
    ids = [n for n in {last, ours} if n]
    in_database = {row[0]: (row[1], row[2]) for row in conn.execute(
        "SELECT id, at, kind FROM events WHERE id = ANY(?)", (ids,))}
    copied = ours > 0 and in_database.get(ours) == in_home.get(ours)  # the home's last is there
    if last is not None and in_database[last] != in_home.get(last) and not (
            issued > ours and copied):
        at, kind = in_database[last]
        return (f"holds data this home does not: its event #{last} ({kind} at {at}) is not "
                "this home's — another home's data, or a server wrote there; copying would mix "
                "them")
    if issued > ours:
        return (f"holds events up to #{issued}, past this home's last (#{ours}): a server "
                "wrote there since this home was copied, and copying again would bring back "
                "what it deleted")
    for pid, at in conn.execute("SELECT id, registered_at FROM projects ORDER BY id"):
        if registered.get(pid) != at:
            return (f"holds data this home does not: project {pid} (registered at {at}) — "
                    "another home's data, or a server wrote there; copying would mix them")
    return None


def _home_kernel(home: SqliteHome, event: int | None) -> tuple[int, dict, dict]:
    """What :func:`foreign` compares of ``home``'s kernel.db: its last event's id, ``{id:
    (at, kind)}`` of that event and of event ``event``, ``{project id: registered_at}``."""
    (file,) = _kernel_files(home)
    source = home.open(file)
    if source is None:
        return 0, {}, {}
    try:
        last = source.conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
        events = {row[0]: (row[1], row[2]) for row in source.conn.execute(
            "SELECT id, at, kind FROM events WHERE id IN (?, ?)", (last, event))}
        registered = dict(source.conn.execute("SELECT id, registered_at FROM projects"))
        return last, events, registered
    finally:
        source.close()


def kernel_component() -> StorageComponent:
    from kernel.app import kernel_migrations
    return StorageComponent("kernel", kernel_migrations(postgres=True),
                            ("projects", "jobs", "events", "leases"), _kernel_files, _kernel_copy)


def components(settings, pm) -> list[StorageComponent]:
    """The kernel's component, then each enabled plugin's (``storage_components``); on
    PostgreSQL those with a part in the database alone."""
    found = [kernel_component()]
    for batch in pm.hook.storage_components(settings=settings):
        found.extend(batch or ())
    if settings.storage.backend == "postgres":
        found = [c for c in found if c.pg_migrations is not None]
    return found


def unmet(conn, found: Sequence[StorageComponent]) -> str | None:
    """Why the database ``conn`` reaches cannot hold the ``found`` components (the first
    :attr:`StorageComponent.prerequisite` unmet), or None."""
    return next((why for c in found if c.prerequisite and (why := c.prerequisite(conn))), None)


def unusable(dsn: str, found: Sequence[StorageComponent]) -> str | None:
    """Why the database at ``dsn`` cannot serve the ``found`` components now (one connection
    tried): out of reach, or a prerequisite unmet (:func:`unmet`); None when it can."""
    from kernel.pg import unreachable
    return unreachable(dsn, check=lambda conn: unmet(conn, found))


def databases(home: SqliteHome, found: Sequence[StorageComponent]
              ) -> list[tuple[str, StoredFile]]:
    """``(component, file)`` of each SQLite database of ``home`` that exists (a missing one is
    made whole at its version); reading kernel.db for the projects may raise
    ``sqlite3.DatabaseError``."""
    return [(c.name, f) for c in found for f in c.files(home)
            if f.migrations is not None and f.path.is_file()]


def newer_state(settings, found: Sequence[StorageComponent]) -> str | None:
    """Why this NeuralMind must not serve the state ``found`` describes: a SQLite file of the
    home, or a component in the database, that a newer NeuralMind migrated; None when none
    is. A file that is no database is left to the server, which names it where it opens it."""
    if settings.storage.backend == "postgres":
        return _newer_in_database(settings.storage.dsn, found)
    from kernel.storage import newer_schema
    try:
        return next(filter(None, (newer_schema(f.path, f.migrations)
                                  for _, f in databases(SqliteHome(settings), found))), None)
    except sqlite3.DatabaseError:
        return None


def _newer_in_database(dsn: str, found: Sequence[StorageComponent]) -> str | None:
    from kernel.pg import PgBackend
    from kernel.storage import NewerSchema
    backend = PgBackend(dsn, 1)
    try:
        conn = backend.database("kernel", None).conn
        if not conn.execute("SELECT to_regclass('nm_schema') IS NOT NULL").fetchone()[0]:
            return None
        versions = dict(conn.execute("SELECT component, version FROM nm_schema").fetchall())
    finally:
        backend.close()
    for c in found:
        if versions.get(c.name, 0) > len(c.pg_migrations):
            return str(NewerSchema(f"{c.name} in the database", c.name, versions[c.name],
                                   len(c.pg_migrations)))
    return None
