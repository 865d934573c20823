"""The storage helper: pragmas, migrations by schema version, concurrent writers."""

import multiprocessing
import sqlite3
import threading

import pytest

pytestmark = pytest.mark.sqlite_only("kernel/storage.py's SQLite files themselves")

from kernel.storage import Database, connect, migrate

V1 = "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);"


def v2(conn):
    conn.execute("ALTER TABLE notes ADD COLUMN tag TEXT")
    conn.execute("UPDATE notes SET tag = 'old'")


def test_pragmas(tmp_path):
    conn = connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_migrates_an_old_version_database_and_is_idempotent(tmp_path):
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(V1 + "INSERT INTO notes (text) VALUES ('kept'); PRAGMA user_version = 1;")
    old.close()
    db = Database(path, [V1, v2])
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert [tuple(r) for r in db.conn.execute("SELECT text, tag FROM notes")] == [("kept", "old")]
    assert migrate(db.conn, [V1, v2]) == 2  # running again changes nothing
    assert db.conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 1


def test_failed_step_leaves_the_previous_version(tmp_path):
    def broken(conn):
        conn.execute("ALTER TABLE notes ADD COLUMN tag TEXT")
        raise RuntimeError("half-way")

    db = Database(tmp_path / "b.db", [V1])
    with pytest.raises(RuntimeError):
        migrate(db.conn, [V1, broken])
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 1
    cols = [r[1] for r in db.conn.execute("PRAGMA table_info(notes)")]
    assert cols == ["id", "text"]


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "c.db"
    Database(path, [V1])
    errors = []

    def writer(n):
        db = Database(path, [V1])  # its own connections, like another process
        try:
            for i in range(100):
                with db.transaction() as conn:
                    conn.execute("INSERT INTO notes (text) VALUES (?)", (f"{n}-{i}",))
        except Exception as ex:  # surfaced by the assertion below
            errors.append(ex)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    assert Database(path, [V1]).conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 800


def _boot(path, barrier, failures):
    barrier.wait()
    try:
        Database(path, [V1])
    except Exception as ex:  # reported to the parent, which asserts on it
        failures.put(repr(ex))


def test_many_first_connections_to_a_new_file_at_once(tmp_path):
    """Processes booting together on a database nobody has opened yet, as gunicorn workers
    do: every one connects and migrates (switching a file to WAL does not wait on the busy
    timeout by itself)."""
    ctx = multiprocessing.get_context("fork")
    failures = ctx.Queue()
    for n in range(10):
        barrier = ctx.Barrier(6)
        procs = [ctx.Process(target=_boot, args=(tmp_path / f"fresh{n}.db", barrier, failures))
                 for _ in range(6)]
        [p.start() for p in procs]
        [p.join(30) for p in procs]
        assert [p.exitcode for p in procs] == [0] * 6
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert found == []


def test_reading_needs_no_writer_lock_file(tmp_path):
    """The side file writers lock is made by the first write, not by opening: a store on a
    read-only file system can still be read."""
    Database(tmp_path / "a.db", [V1]).close()
    reader = Database(tmp_path / "a.db", [V1])
    reader.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    assert not (tmp_path / "a.db-writer").exists()
    with reader.transaction() as conn:
        conn.execute("PRAGMA user_version")
    assert (tmp_path / "a.db-writer").exists()
    reader.close()


def test_a_commit_that_fails_ends_its_transaction_and_the_next_one_writes(tmp_path):
    """A COMMIT can fail (here a deferred foreign key, checked only then): the transaction is
    rolled back, not left open on the thread's connection, where every later write failed
    with "cannot start a transaction within a transaction" and the write lock stayed held."""
    db = Database(tmp_path / "t.db", ["""
        CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)
    """])
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        with db.transaction() as conn:
            conn.execute("INSERT INTO child VALUES (7)")
    assert not db.conn.in_transaction
    with db.transaction() as conn:
        conn.execute("INSERT INTO parent VALUES (7)")
        conn.execute("INSERT INTO child VALUES (7)")
    assert [tuple(r) for r in db.conn.execute("SELECT parent FROM child")] == [(7,)]
