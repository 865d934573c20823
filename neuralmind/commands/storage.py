"""``neuralmind storage check`` and ``neuralmind storage migrate``: where the state lives, and
moving a SQLite home into the PostgreSQL database several servers share (docs/operations.md,
"Scaling out"). What each component stores comes from the kernel and the plugins' hook
``storage_components`` (kernel/stored.py)."""

from __future__ import annotations

import json
import sys

from kernel.config import load_settings
from kernel.pg import cannot_connect, shown_dsn


def add_commands(subparsers) -> None:
    from kernel.commands import command_group
    group = command_group(subparsers, "storage", help="where the state lives: check it, move "
                                                      "a home into PostgreSQL")
    check = group.add_parser("check", help="the backend, each component's schema version, "
                                           "pending migrations and sizes")
    check.add_argument("--config", help="TOML config (default $NEURALMIND_CONFIG)")
    check.add_argument("--json", action="store_true", help="print JSON for scripts")
    check.set_defaults(func=cmd_check)
    move = group.add_parser("migrate", help="copy the SQLite home into PostgreSQL (run it "
                                            "again to resume; it verifies what it copied)")
    move.add_argument("--to", required=True, choices=["postgres"], help="the target backend")
    move.add_argument("--dsn", help="postgresql://user:password@host:5432/db (default: the "
                                    "config's [storage] dsn, or $NEURALMIND_DATABASE_URL)")
    move.add_argument("--config", help="TOML config naming the home and plugins")
    move.add_argument("--json", action="store_true", help="print JSON for scripts")
    move.set_defaults(func=cmd_migrate)


def components(settings) -> list:
    """The kernel's component, then each enabled plugin's, once the config's sections are
    checked as a server checks them: a misspelt ``[storag]`` would otherwise check or copy the
    SQLite home it meant to leave."""
    from kernel.plugins import make_plugin_manager
    from kernel.stored import components as stored_components
    pm = make_plugin_manager(settings.kernel.plugins)
    settings.check_sections(pm)
    return stored_components(settings, pm)


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


# -- check -----------------------------------------------------------------------------------

def _check_sqlite(settings, found) -> list[dict]:
    from kernel.storage import remedy_of
    from kernel.stored import SqliteHome, file_size
    home, rows = SqliteHome(settings), []
    for component in found:
        for file in component.files(home):
            row = {"component": component.name, "file": str(file.path), "label": file.label,
                   "exists": file.path.exists(), "size": file_size(file.path),
                   "version": None, "latest": None, "pending": None, "newer": False,
                   "damaged": None, "remedy": None}
            if file.migrations is not None:
                row["latest"] = len(file.migrations)
            if file.migrations is not None and row["exists"]:  # a missing one is made whole
                row.update(_file_state(file.path, len(file.migrations)))
            if row["damaged"]:  # a derived store's file is made again, not restored
                row["remedy"] = remedy_of(file.migrations)
            rows.append(row)
    return rows


def _file_state(path, latest: int) -> dict:
    """A SQLite file's versions, or what SQLite's quick_check finds damaged in it."""
    from kernel.storage import damage, schema_version
    if why := damage(path):
        return {"damaged": why}
    return _versions(schema_version(path), latest)


def connect(dsn: str, pool_size: int):
    """A pool on ``dsn`` — after one plain connection, so a database that is down or a DSN
    that is wrong fails at once instead of after the pool's 30 s of retries."""
    import psycopg

    from kernel.pg import PgBackend
    psycopg.connect(dsn, connect_timeout=10).close()
    return PgBackend(dsn, pool_size)


def _check_postgres(settings, found) -> list[dict]:
    backend = connect(settings.storage.dsn, 1)
    try:
        rows = []
        for component in found:
            db = backend.database(component.name, None)
            version = db.conn.execute(
                "SELECT version FROM nm_schema WHERE component = ?", (component.name,)
            ).fetchone() if _has_schema(db) else None
            size = db.conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "WHERE c.relkind = 'r' AND c.relname = ANY(?) AND pg_table_is_visible(c.oid)",
                (list(component.tables),)).fetchone()[0]
            rows.append({"component": component.name,
                         **_versions(version[0] if version else 0, len(component.pg_migrations)),
                         "size": int(size), "tables": list(component.tables)})
        return rows
    finally:
        backend.close()


def _versions(version: int, latest: int) -> dict:
    """A stored schema's version against this release's: steps pending, or newer (a later
    NeuralMind's schema, nothing this one can run)."""
    return {"version": version, "latest": latest, "pending": max(latest - version, 0),
            "newer": version > latest}


def _has_schema(db) -> bool:
    return db.conn.execute("SELECT to_regclass('nm_schema') IS NOT NULL").fetchone()[0]


def cmd_check(args) -> int:
    from kernel.storage import NewerSchema, damage_said, damaged, database_errors
    from kernel.stored import unusable
    settings = load_settings(args.config)
    found = components(settings)
    storage = settings.storage
    where = shown_dsn(storage.dsn) if storage.backend == "postgres" else str(settings.home)
    try:
        rows = (_check_postgres if storage.backend == "postgres" else _check_sqlite)(settings,
                                                                                     found)
    except database_errors() as ex:  # kernel.db damaged past reading its projects, too
        why = (cannot_connect(storage.dsn, ex) if storage.backend == "postgres" else
               damage_said(ex) if damaged(ex) else
               f"the database at {where} cannot be reached: {ex}")
        print(f"neuralmind: {why}", file=sys.stderr)
        return 1
    newer = [r for r in rows if r["newer"]]
    broken = [r for r in rows if r.get("damaged")]
    # on PostgreSQL, why no server could start there: what an enabled component needs (pgvector)
    lacking = unusable(storage.dsn, found) if storage.backend == "postgres" else None
    if args.json:
        print(json.dumps({"backend": storage.backend, "where": where, "components": rows}))
    else:
        print(f"backend  {storage.backend}  {where}")
        if storage.backend == "postgres":
            print(_table(rows, ("component", "version", "latest", "pending", "size")))
        elif any(r["exists"] for r in rows):
            print(_table([{**r, "file": r["file"].removeprefix(f"{settings.home}/")}
                          for r in rows if r["exists"]],
                         ("component", "label", "file", "version", "latest", "pending", "size")))
        else:
            print("nothing is stored here yet: a server makes its files when it starts")
            return 0
        pending = sum(r["pending"] or 0 for r in rows)
        if pending:
            print(f"{pending} migration step(s) pending: they run when a server starts")
        elif not (newer or broken or lacking):
            print("every schema is at this version's" + (
                "" if storage.backend == "postgres" else ", and every file is whole"))
    if lacking:
        print(f"neuralmind: {lacking}", file=sys.stderr)
    for r in newer:
        where = r["file"] if "file" in r else f"{r['component']} in the database"
        print(f"neuralmind: {NewerSchema(where, r['component'], r['version'], r['latest'])}",
              file=sys.stderr)
    for r in broken:
        print(f"neuralmind: {r['file']} ({r['component']}) is damaged ({r['damaged']}): "
              f"{r['remedy']}", file=sys.stderr)
    return 1 if newer or broken or lacking else 0


def _unreadable(home, found) -> str | None:
    """Why a SQLite file of the home cannot be copied — not a database, or a newer
    NeuralMind's — said before anything is copied, naming the file; None when each can be."""
    import sqlite3

    from kernel.storage import newer_schema
    from kernel.stored import databases
    try:
        files = databases(home, found)
    except sqlite3.DatabaseError as ex:  # kernel.db, which lists the projects
        return f"{home.path / 'kernel.db'} cannot be read: {ex}"
    for name, file in files:
        try:
            if why := newer_schema(file.path, file.migrations):
                return why
        except sqlite3.DatabaseError as ex:
            return f"{file.path} ({name}) cannot be read: {ex}"
    return None


def _table(rows: list[dict], columns: tuple[str, ...]) -> str:
    """The CLI's table, a path never cut: what ``storage check`` shows of each cell."""
    from neuralmind.commands.common import table
    cells = [{c: _cell(c, r) for c in columns} for r in rows]
    return table(cells, columns, width=max(len(v) for r in cells for v in r.values()))


def _cell(column: str, row: dict) -> str:
    if column == "version" and row.get("damaged"):
        return "damaged"
    value = row.get(column)
    if value is None:
        return "-"
    if column == "pending" and row.get("newer"):
        return "newer"
    return _size(value) if column == "size" else str(value)


# -- migrate ---------------------------------------------------------------------------------

def cmd_migrate(args) -> int:
    from kernel import daemon
    settings = load_settings(args.config)
    dsn = args.dsn or settings.storage.dsn
    if not dsn:
        print("neuralmind: name the database: --dsn postgresql://user:password@host:5432/db "
              "(or [storage] dsn, or $NEURALMIND_DATABASE_URL)", file=sys.stderr)
        return 2
    found = components(settings)  # a misspelt section is said first
    if not settings.home.is_dir():  # a mistyped home: said before a lock file would make it
        return _nothing_to_copy(settings)
    try:  # held while it copies: a server started meanwhile would write what is not copied
        with daemon.holding(settings.home, daemon.MIGRATING), daemon.unserved(settings.home):
            return _copy(args, settings, dsn, found)
    except daemon.HomeBusy as ex:
        print(f"neuralmind: {ex}: nothing was copied; run it when that ends", file=sys.stderr)
        return 1
    except daemon.Served as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 1


def _nothing_to_copy(settings) -> int:
    print(f"neuralmind: {settings.home} holds no NeuralMind state (no kernel.db): nothing to "
          "copy. Is $NEURALMIND_HOME (or the config's [kernel] home) the right one?",
          file=sys.stderr)
    return 2


def _copy(args, settings, dsn: str, found) -> int:
    from kernel.storage import database_errors
    from kernel.stored import RowRefused, SqliteHome, foreign, unmet
    home = SqliteHome(settings)
    if not any(file.path.exists() for c in found for file in c.files(home)):
        return _nothing_to_copy(settings)
    if why := _unreadable(home, found):
        print(f"neuralmind: {why}; nothing was copied", file=sys.stderr)
        return 1
    report: list[dict] = []
    try:
        backend = connect(dsn, 2)
    except database_errors() as ex:
        print(f"neuralmind: {cannot_connect(dsn, ex)}", file=sys.stderr)
        return 1
    try:
        reader = backend.database("kernel", None).conn
        if why := unmet(reader, found):
            print(f"neuralmind: {why}; nothing was copied", file=sys.stderr)
            return 2
        if why := foreign(home, reader):
            print(f"neuralmind: the database at {shown_dsn(dsn)} {why}. Nothing was copied: "
                  "migrate into a new database (or a schema of its own), or serve that one as "
                  "it is", file=sys.stderr)
            return 2
        for component in found:
            target = backend.database(component.name, component.pg_migrations)
            for check in component.copy(home, target):
                report.append({"component": component.name, "what": check.what,
                               "home": check.home, "database": check.database, "ok": check.ok,
                               "mended": list(check.mended)})
                if not args.json:
                    print(f"{component.name:<12} {check.what:<48} home {check.home!s:<18} "
                          f"database {check.database!s:<18} {'ok' if check.ok else 'MISMATCH'}",
                          *(f"\n{'':<12} {line}" for line in check.mended), sep="", flush=True)
    except RowRefused as ex:
        print(f"neuralmind: the copy stopped: {ex}.\n{ex.remedy}", file=sys.stderr)
        return 1
    except database_errors() as ex:
        print(f"neuralmind: the copy stopped: {ex}\nWhat was copied stays; run the same "
              "command again to resume.", file=sys.stderr)
        return 1
    finally:
        backend.close()
    whole = all(r["ok"] for r in report)
    if args.json:
        print(json.dumps({"from": str(settings.home), "to": shown_dsn(dsn), "verified": whole,
                          "checks": report}))
    elif whole:
        print(f"verified: {settings.home} is in {shown_dsn(dsn)}. Point every server at it: "
              '[storage] backend = "postgres" and dsn (or NEURALMIND_DATABASE_URL).')
    else:
        print("neuralmind: the database does not hold what the home holds (MISMATCH above): "
              "a token added to the home's file after the first copy is added with `neuralmind "
              "token create --config` naming the database; else migrate into a new database "
              "(or a schema of its own)", file=sys.stderr)
    return 0 if whole else 1
