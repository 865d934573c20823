"""PostgreSQL for the stores when ``[storage] backend = "postgres"``: several servers share one
database, so what must be shared (projects, jobs, events, memories, queues) is.

A :class:`PgDatabase` offers what :class:`kernel.storage.Database` offers — ``conn.execute``
for reads, ``transaction()`` for writes, rows read by name or by position, ``?`` and ``:name``
placeholders — so a store's plain SQL serves both engines. What differs (full-text search,
vectors, schema types) lives in the store's PostgreSQL twin and in its own migrations.

Every database of one kernel shares one connection pool (``[storage] pool_size`` per worker),
whose waits suit a request (:class:`Pool`). Migrations are versioned per component
(``kernel``, ``memory`` …) in ``nm_schema`` and run once, whoever starts first, under an
advisory lock.
"""

from __future__ import annotations

import re
import weakref
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from kernel.config import masked
from kernel.storage import NewerSchema

MIGRATE_LOCK = 0x6E6D_6D69  # pg_advisory_xact_lock key of migrations ("nmmi")
SCHEMA = """CREATE TABLE IF NOT EXISTS nm_schema (
    component TEXT PRIMARY KEY, version INTEGER NOT NULL)"""

PgMigration = str | Callable[[Any], None]

# A request waits this long for a pooled connection (psycopg_pool's own 30 s held a worker
# thread through an outage, till the threads ran out and /v1/health queued behind them) …
WAIT_S = 5.0
# … and this long once a connection was found broken or none could be had: time for the pool
# to try a fresh connection, not for an outage to end (the answer is 503 with Retry-After)
DOWN_WAIT_S = 0.5
# a lost connection is tried again for this long (backing off), then the next request that
# finds none starts afresh: after an outage the pool reconnects within seconds, not minutes
RECONNECT_S = 5.0
CONNECT_TIMEOUT_S = 5  # one connection attempt, unless the DSN sets connect_timeout


class Row:
    """A row readable as ``row["name"]`` and ``row[0]``, like ``sqlite3.Row``."""

    __slots__ = ("_values", "_index")

    def __init__(self, values: Sequence[Any], index: dict[str, int]):
        self._values, self._index = values, index

    def __getitem__(self, key: int | str) -> Any:
        return self._values[self._index[key] if isinstance(key, str) else key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)


def _rows(cursor) -> Callable[[Sequence[Any]], Row]:
    index = {col.name: i for i, col in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


_NAMED = re.compile(r"(?<!:):([A-Za-z_]\w*)")


@lru_cache(maxsize=2048)
def translate(sql: str, named: bool) -> str:
    """SQLite's placeholders in psycopg's spelling: ``?`` → ``%s``, ``:name`` → ``%(name)s``
    (a literal ``%`` doubled). Our SQL puts no ``?`` or ``:`` inside string literals."""
    sql = sql.replace("%", "%%")
    return _NAMED.sub(r"%(\1)s", sql) if named else sql.replace("?", "%s")


class Cursor:
    """The rows of one statement, fetched at once (the connection goes back to the pool)."""

    def __init__(self, rows: list[Row], rowcount: int):
        self._rows, self.rowcount = rows, rowcount

    def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Row]:
        return self._rows

    def __iter__(self):
        return iter(self._rows)


def _run(conn, sql: str, params: Sequence | dict = ()) -> Cursor:
    # without parameters psycopg sends the text as it is: nothing to translate
    cur = conn.execute(translate(sql, isinstance(params, dict)) if params else sql,
                       params if params else None)
    rows = cur.fetchall() if cur.description else []
    return Cursor(rows, cur.rowcount)


class Connection:
    """One pooled connection inside a transaction: ``execute`` and ``executemany``."""

    def __init__(self, conn):
        self.raw = conn

    def execute(self, sql: str, params: Sequence | dict = ()) -> Cursor:
        return _run(self.raw, sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(translate(sql, False), rows)


class Pool:
    """One kernel's psycopg pool, lent a connection at a time with a wait that suits a request:
    :data:`WAIT_S` while the database answers, :data:`DOWN_WAIT_S` once a connection was
    found broken or none came in time — until a connection is made or a statement runs again.
    So while the database is down each request answers 503 at once instead of holding a
    worker's thread, and the pool's reconnection is short (:data:`RECONNECT_S`)."""

    def __init__(self, dsn: str, size: int):
        from psycopg.conninfo import conninfo_to_dict
        from psycopg_pool import ConnectionPool
        self.reached = True
        limit = {} if "connect_timeout" in conninfo_to_dict(dsn) else {
            "connect_timeout": CONNECT_TIMEOUT_S}
        self.raw = ConnectionPool(dsn, min_size=1, max_size=size, open=True, timeout=WAIT_S,
                                  reconnect_timeout=RECONNECT_S, configure=self._connected,
                                  kwargs={"autocommit": True, "row_factory": _rows, **limit},
                                  name="neuralmind")

    def _connected(self, conn) -> None:
        self.reached = True

    @contextmanager
    def connection(self) -> Iterator[Any]:
        import psycopg
        from psycopg_pool import PoolTimeout
        try:
            with self.raw.connection(WAIT_S if self.reached else DOWN_WAIT_S) as conn:
                try:
                    yield conn
                except psycopg.OperationalError:
                    if conn.broken:
                        self.reached = False
                    raise
        except PoolTimeout:
            self.reached = False
            raise
        self.reached = True

    def close(self) -> None:
        self.raw.close()


class _Reader:
    """``db.conn``: each statement runs on a connection borrowed from the pool for it alone
    (after the database's session settings, when it has any)."""

    def __init__(self, pool: Pool, settings: dict[str, str]):
        self._pool, self._settings = pool, settings

    def execute(self, sql: str, params: Sequence | dict = ()) -> Cursor:
        with self._pool.connection() as conn:
            _apply(conn, self._settings, local=False)
            return _run(conn, sql, params)


# the session settings each pooled connection holds (set by a reader: ``local=False``)
_HELD: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def _apply(conn, settings: dict[str, str], local: bool) -> None:
    """``settings`` on ``conn``: for its session (a reader's autocommit statement), or for its
    transaction (``local``). Nothing is sent when the connection's session already holds them —
    a pooled connection mostly serves one scope, and each round trip costs a search ~0.2 ms."""
    held = _HELD.get(conn, {})
    todo = {k: v for k, v in settings.items() if held.get(k) != v}
    if not todo:
        return
    conn.execute("SELECT " + ", ".join(["set_config(%s, %s, %s)"] * len(todo)),
                 [x for item in todo.items() for x in (*item, local)])
    if not local:
        _HELD[conn] = {**held, **todo}


UNPARSEABLE = "(a DSN psycopg cannot parse)"


def shown_dsn(dsn: str) -> str:
    """A DSN without its password (nor any other secret, :func:`kernel.config.masked`), for
    output."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # not parseable: say nothing of it but that
        return UNPARSEABLE
    return masked(make_conninfo(**parts))


# what the server says when it refuses a role (SQLSTATE 28P01, 28000: libpq gives no code for
# a failed connection, only the server's text) or libpq has no password to give it
_SIGN_IN = re.compile(r"authentication failed|no pg_hba\.conf entry|role \"[^\"]*\" does not "
                      r"exist|no password supplied|password authentication")


def cannot_connect(dsn: str, ex: Exception) -> str:
    """One line saying why no connection to ``dsn`` could be made — the server refused the
    sign-in, or it is out of reach — with psycopg's reason and no password; a DSN psycopg
    cannot parse is said to be that (its reason may quote the password)."""
    shown = shown_dsn(dsn)
    if shown == UNPARSEABLE:
        return ("the database DSN is not one psycopg reads: write postgresql://user:password@"
                "host/db, or key=value pairs such as host=… dbname=…")
    reason = " ".join(str(ex).split())
    if getattr(ex, "sqlstate", None) in ("28P01", "28000") or _SIGN_IN.search(reason):
        return (f"the database at {shown} refused the sign-in: {reason}: check the user and "
                "password the DSN gives ([storage] dsn, --dsn or NEURALMIND_DATABASE_URL) and "
                "that pg_hba.conf lets that user connect from here")
    return f"the database at {shown} cannot be reached: {reason}"


def unreachable(dsn: str, timeout_s: int = 10,
                check: Callable[[Any], str | None] | None = None) -> str | None:
    """Why ``dsn`` cannot be used now (one connection tried): out of reach, a sign-in refused,
    or what ``check`` finds wrong on that connection (:func:`missing_vector`); None when
    nothing is."""
    import psycopg
    try:
        with psycopg.connect(dsn, connect_timeout=timeout_s) as conn:
            return check(conn) if check else None
    except psycopg.Error as ex:
        return cannot_connect(dsn, ex)


VECTOR = """SELECT current_database(), current_user, e.extversion, a.default_version, v.trusted,
    r.rolsuper OR ((v.trusted OR NOT v.superuser)
                   AND has_database_privilege(current_database(), 'CREATE'))
FROM pg_roles r
LEFT JOIN pg_extension e ON e.extname = 'vector'
LEFT JOIN pg_available_extensions a ON a.name = 'vector'
LEFT JOIN pg_available_extension_versions v ON v.name = a.name AND v.version = a.default_version
WHERE r.rolname = current_user"""


def missing_vector(conn) -> str | None:
    """Why the memory plugin could not make its tables here: pgvector is not in the database
    and this role may not create it (only a superuser may, unless the build marks it trusted).
    Said before a server forks or a copy begins — a worker would fail to boot, a copy stop
    halfway. ``conn``: a psycopg connection or a :class:`PgDatabase`'s ``conn``."""
    database, role, installed, available, trusted, may = conn.execute(VECTOR).fetchone()
    run = f"run `CREATE EXTENSION vector;` in database {database} as"
    if installed or (available and may):
        return None
    if not available:
        return (f"the database server has no pgvector extension to create in database "
                f"{database}: install pgvector there (or use the pgvector/pgvector image), "
                f"then {run} a superuser")
    why = ("it may not create objects in the database" if trusted else
           f"pgvector {available} is not a trusted extension: only a superuser may create it")
    return (f"the pgvector extension is not in database {database} and role {role} cannot "
            f"create it ({why}): {run} {'its owner or ' if trusted else ''}a superuser")


class PgBackend:
    """One kernel's pool of connections to the shared database."""

    def __init__(self, dsn: str, pool_size: int):
        self.dsn = dsn
        self.pool = Pool(dsn, pool_size)
        self.pool.raw.wait(timeout=30)

    def database(self, component: str, migrations: Sequence[PgMigration] | None) -> PgDatabase:
        """``component``'s view, migrated — or as it is, for a reader (``migrations=None``)."""
        db = PgDatabase(self.pool, component)
        if migrations is not None:
            db.migrate(migrations)
        return db

    def close(self) -> None:
        self.pool.close()


def open_shared(settings, component: str, migrations: Sequence[PgMigration] | None
                ) -> PgDatabase | None:
    """For a command that runs without a server (the CLI): ``component``'s view of the shared
    database when the settings name PostgreSQL, else None (``migrations=None``: read it as it
    is, creating nothing)."""
    storage = settings.storage
    if storage.backend != "postgres":
        return None
    return PgBackend(storage.dsn, 1).database(component, migrations)


class PgDatabase:
    """A component's view of the shared database, with the interface of a SQLite Database."""

    def __init__(self, pool: Pool, component: str, settings: dict[str, str] | None = None):
        self.pool = pool
        self.component = component
        self.settings = dict(settings or {})
        # what names this view in logs and per-view caches (a SQLite Database's is its file)
        scope = "/".join([component, *self.settings.values()])
        self.path = "postgresql:" + scope
        self.conn = _Reader(pool, self.settings)
        self._serial_key = zlib.crc32(scope.encode())

    def scoped(self, settings: dict[str, str]) -> PgDatabase:
        """This component's view with session ``settings`` (``{"neuralmind.project": id}``)
        set for each of its statements and transactions: the same SQL then reads one tenant's
        rows when the tables it names are views keyed by ``current_setting`` (the memory
        plugin's store per project). Its serial writers queue apart from other scopes'."""
        return PgDatabase(self.pool, self.component, {**self.settings, **settings})

    @contextmanager
    def transaction(self, serial: bool = False) -> Iterator[Connection]:
        """A write transaction on one connection: committed on exit, rolled back on error.
        ``serial``: this component's serial writers go one at a time, in every server, as
        SQLite's writers always do (appends whose ids must commit in order, chains)."""
        with self.pool.connection() as raw, raw.transaction():
            conn = Connection(raw)
            _apply(raw, self.settings, local=True)
            if serial:
                conn.execute("SELECT pg_advisory_xact_lock(?)", (self._serial_key,))
            yield conn

    def migrate(self, migrations: Sequence[PgMigration]) -> int:
        """Bring the component to ``len(migrations)``; step *n* runs when its recorded version
        is below n, all in one transaction holding the migration lock. A version past them
        (a newer release migrated it) is :class:`NewerSchema`."""
        with self.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATE_LOCK,))
            conn.raw.execute(SCHEMA)
            row = conn.execute("SELECT version FROM nm_schema WHERE component = ?",
                               (self.component,)).fetchone()
            version = row[0] if row else 0
            if version > len(migrations):  # never run steps again, never write under them
                raise NewerSchema(f"{self.component} in the database", self.component,
                                  version, len(migrations))
            for number, step in enumerate(migrations, start=1):
                if number <= version:
                    continue
                if callable(step):
                    step(conn)
                else:
                    conn.raw.execute(step)
            conn.execute("INSERT INTO nm_schema (component, version) VALUES (?, ?) "
                         "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                         (self.component, len(migrations)))
        return len(migrations)

    def version(self) -> int:
        row = self.conn.execute("SELECT version FROM nm_schema WHERE component = ?",
                                (self.component,)).fetchone()
        return row[0] if row else 0

    def replaced(self) -> bool:
        """Never: a database, not a file that can be deleted under the server."""
        return False

    def close(self) -> None:
        """The pool belongs to the kernel's backend; nothing to close per component."""
