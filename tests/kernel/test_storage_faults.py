"""SQLite files the server cannot use as it would: a state folder on a file system remounted
read-only (reads go on, writes are ``storage_read_only``), a file with a page of junk (said as
``storage_damaged``, naming the file in the log, at start-up and in ``storage check``), and a
job that fails on either (its error says so, as a route does). Real files, a real tmpfs."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import types
from contextlib import closing, contextmanager
from pathlib import Path

import falcon.testing
import pytest

from kernel.api import operation
from kernel.plugins import hookimpl
from kernel.storage import Database, ProjectStores, damage
from tests.support import free_port, make_kernel, pythonpath, run_cli

pytestmark = pytest.mark.sqlite_only("SQLite files: their folder's file system and their pages")

MIGRATIONS = ["CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)"]
PAGE = 4096  # SQLite's default page size, which these files keep


class Notes:
    """A plugin's per-project store kept as the bundled ones keep theirs: ``notes.db`` in the
    project's state folder, opened through the kernel; closed at shutdown, as a stopped
    server's files are (SQLite then folds and removes their -wal and -shm)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.opened: list[Database] = []
        self.stores = ProjectStores(self._open)

    def _open(self, project) -> Database:
        self.opened.append(self.kernel.open_database(project.state_dir / "notes.db",
                                                     MIGRATIONS))
        return self.opened[-1]

    def db(self, project_id: str) -> Database:
        return self.stores.get(self.kernel.projects.get(project_id))

    @operation(permission=None)
    def on_get(self, req, resp, project_id):
        rows = self.db(project_id).conn.execute("SELECT text FROM notes ORDER BY id").fetchall()
        resp.media = {"items": [r["text"] for r in rows]}

    @operation(permission=None)
    def on_post(self, req, resp, project_id):
        with self.db(project_id).transaction() as conn:
            conn.execute("INSERT INTO notes (text) VALUES (?)", (req.get_param("text"),))
        resp.media = {"ok": True}


def notes_plugin() -> types.SimpleNamespace:
    notes: list[Notes] = []

    def register_routes(kernel):
        notes.append(Notes(kernel))
        return [("/v1/projects/{project_id}/notes", notes[0])]

    def shutdown(kernel):
        for db in notes[0].opened:
            db.close()

    return types.SimpleNamespace(register_routes=hookimpl(register_routes),
                                 shutdown=hookimpl(shutdown))


@contextmanager
def served(home: Path):
    """The kernel with the notes plugin, and an HTTP client of its app."""
    kernel = make_kernel(home, plugins=[], extra_plugins=[notes_plugin()])
    try:
        yield kernel, falcon.testing.TestClient(kernel.app, headers={"Host": "localhost"})
    finally:
        kernel.shutdown()


def write_notes(client, pid: str, *texts: str) -> None:
    for text in texts:
        r = client.simulate_post(f"/v1/projects/{pid}/notes", params={"text": text})
        assert r.status_code == 200, r.text


@contextmanager
def read_only_view(of: Path, at: Path):
    """``of`` seen at ``at`` through a bind mount remounted read-only: a file system mounted
    so (a write there fails with EROFS, root's too); ``remount("rw")`` lets writes in again.
    Skipped where mounting is not permitted."""
    at.mkdir()
    done = subprocess.run(["mount", "--bind", str(of), str(at)], capture_output=True)
    if done.returncode:
        pytest.skip(f"a bind mount cannot be made here: {done.stderr.decode().strip()}")
    try:
        def remount(mode: str) -> None:
            subprocess.run(["mount", "-o", f"remount,bind,{mode}", str(at)], check=True)

        remount("ro")
        yield remount
    finally:
        subprocess.run(["umount", "-l", str(at)], check=True)


def test_a_state_folder_on_a_read_only_file_system_serves_reads_and_refuses_writes(tmp_path):
    """A clean stop folds and removes the -wal and -shm; on a file system then remounted
    read-only SQLite could make no -shm, and every route answered "try again"."""
    repo = tmp_path / "disk" / "repo"
    repo.mkdir(parents=True)
    with served(tmp_path / "home") as (kernel, client):
        write_notes(client, kernel.projects.register(str(repo))[0].id, "before")
    assert sorted(p.name for p in (repo / ".neuralmind").iterdir()) == [
        ".gitignore", "notes.db", "notes.db-writer"]
    with read_only_view(tmp_path / "disk", tmp_path / "ro") as remount, \
            served(tmp_path / "home") as (kernel, client):
        pid = kernel.projects.register(str(tmp_path / "ro" / "repo"))[0].id
        r = client.simulate_get(f"/v1/projects/{pid}/notes")
        assert (r.status_code, r.json) == (200, {"items": ["before"]})
        r = client.simulate_post(f"/v1/projects/{pid}/notes", params={"text": "refused"})
        assert (r.status_code, r.json["error"]["code"]) == (503, "storage_read_only")
        assert "cannot be written here" in r.json["error"]["message"]
        remount("rw")  # writes go on without a restart
        write_notes(client, pid, "after")
        assert client.simulate_get(f"/v1/projects/{pid}/notes").json == {
            "items": ["before", "after"]}


def test_a_folder_it_may_not_write_is_read_read_only(tmp_path):
    """The same without a mount, by a process the folder's mode denies writing (root without
    the capabilities that let it write anywhere): the store reads, and a write is refused as
    read-only — never made in a folder it may not write."""
    folder = tmp_path / "state"
    db = Database(folder / "notes.db", MIGRATIONS)
    with db.transaction() as conn:
        conn.execute("INSERT INTO notes (text) VALUES ('kept')")
    db.close()
    assert sorted(p.name for p in folder.iterdir()) == ["notes.db", "notes.db-writer"]
    os.chmod(folder, 0o555)
    script = f"""
import sys
from kernel.storage import Database, StateReadOnly
db = Database({str(folder / 'notes.db')!r}, {MIGRATIONS!r})
print([r[0] for r in db.conn.execute("SELECT text FROM notes").fetchall()])
try:
    with db.transaction() as conn:
        conn.execute("INSERT INTO notes (text) VALUES ('refused')")
except StateReadOnly as ex:
    print("refused:", ex)
try:
    Database({str(folder / 'other.db')!r}, {MIGRATIONS!r})
except StateReadOnly as ex:
    print("not made:", ex)
"""
    bare = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"] \
        if os.geteuid() == 0 else []
    try:
        done = subprocess.run([*bare, sys.executable, "-c", script], capture_output=True,
                              text=True, timeout=60, env={**os.environ,
                                                          "PYTHONPATH": pythonpath()})
    finally:
        os.chmod(folder, 0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['kept']", f"refused: {folder / 'notes.db'} cannot be written here",
        f"not made: {folder / 'other.db'} cannot be made: its folder cannot be written"]
    assert sorted(p.name for p in folder.iterdir()) == ["notes.db", "notes.db-writer"]


def junk(path: Path, page: int) -> None:
    """Overwrite page ``page`` (from 1) of a SQLite file with junk, as a failing disk would
    (its -wal folded in first: what it holds would otherwise be read in place of the page)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(path, "r+b") as fh:
        fh.seek((page - 1) * PAGE)
        fh.write(b"\xa5junk" * (PAGE // 5) + b"\xa5" * (PAGE % 5))


def root_page(path: Path, table: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                            (table,)).fetchone()[0]


def test_a_damaged_file_is_said_as_such_naming_it_in_the_log_alone(tmp_path, caplog):
    repo = tmp_path / "repo"
    repo.mkdir()
    with served(tmp_path / "home") as (kernel, client):
        pid = kernel.projects.register(str(repo))[0].id
        write_notes(client, pid, "one", "two")
    path = repo / ".neuralmind" / "notes.db"
    junk(path, root_page(path, "notes"))
    with served(tmp_path / "home") as (kernel, client), \
            caplog.at_level(logging.ERROR, logger="neuralmind"):
        for r in (client.simulate_get(f"/v1/projects/{pid}/notes"),
                  client.simulate_post(f"/v1/projects/{pid}/notes", params={"text": "x"})):
            assert (r.status_code, r.json["error"]["code"]) == (500, "storage_damaged")
            assert r.json["error"]["message"] == (
                "the notes database of NeuralMind's state is damaged: restore it from a backup "
                '(docs/operations.md, "Storage"); the server log names the file')
    lines = [rec for rec in caplog.records if "damaged" in rec.getMessage()]
    assert len(lines) == 2 and not any(rec.exc_info for rec in caplog.records)
    assert lines[0].getMessage().endswith(
        f"{path} is damaged (database disk image is malformed): restore it from a backup "
        '(docs/operations.md, "Storage")')
    junk(path, 1)  # its header too: no SQLite file at all
    with served(tmp_path / "home") as (kernel, client):
        r = client.simulate_get(f"/v1/projects/{pid}/notes")
        assert (r.status_code, r.json["error"]["code"]) == (500, "storage_damaged")
        assert "the notes database" in r.json["error"]["message"]


def test_a_job_failing_on_its_stored_state_says_which_condition(tmp_path, caplog):
    """As a route says it (storage_full, storage_damaged), with one log line, no traceback."""
    full, broken = tmp_path / "full.db", tmp_path / "broken.db"
    Database(broken, MIGRATIONS).close()
    junk(broken, root_page(broken, "notes"))

    def fill(ctx):  # a real file at its size cap answers as a full disk does
        db = Database(full, MIGRATIONS)
        db.conn.execute("PRAGMA max_page_count = 8")
        for _ in range(100):
            with db.transaction() as conn:
                conn.execute("INSERT INTO notes (text) VALUES (?)", ("x" * 3000,))

    def read(ctx):
        return Database(broken, MIGRATIONS).conn.execute("SELECT * FROM notes").fetchall()

    with served(tmp_path / "home") as (kernel, client), \
            caplog.at_level(logging.ERROR, logger="neuralmind"):
        jobs = {code: kernel.jobs.submit("probe", work, wait=True).id
                for code, work in (("storage_full", fill), ("storage_damaged", read))}
        errors = {code: kernel.jobs.get(jid).error.model_dump() for code, jid in jobs.items()}
    assert errors == {
        "storage_full": {"code": "storage_full", "message": (
            "the disk that holds NeuralMind's state is full; nothing was written — free "
            "space, then try again")},
        "storage_damaged": {"code": "storage_damaged", "message": (
            "the broken database of NeuralMind's state is damaged: restore it from a backup "
            '(docs/operations.md, "Storage"); the server log names the file')}}
    failed = [rec.getMessage() for rec in caplog.records if rec.name == "neuralmind.jobs"]
    assert failed == [f"job {jobs['storage_full']} failed: the store refused it: database or "
                      "disk is full",
                      f"job {jobs['storage_damaged']} failed: {broken} is damaged (database "
                      'disk image is malformed): restore it from a backup (docs/operations.md, '
                      '"Storage")']
    assert not any(rec.exc_info for rec in caplog.records)


def test_a_file_a_failed_first_open_left_empty_is_no_damage(tmp_path):
    """A full disk can cut a file's first open short at 0 bytes: that is an empty database,
    made whole at the next open."""
    path = tmp_path / "notes.db"
    path.touch()
    assert damage(path) is None
    db = Database(path, MIGRATIONS)
    assert db.conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 0
    db.close()


def test_storage_check_reads_every_page_and_names_a_damaged_file(tmp_path):
    home = tmp_path / "home"
    env = {"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth,memory"}  # per project
    home.mkdir()
    (home / "kernel.db").touch()  # a first open cut short: not damage
    code, out, err = run_cli("storage", "check", env=env)
    assert (code, err) == (0, "") and "3 migration step(s) pending" in out
    with served(home) as (kernel, _):
        kernel.jobs.submit("probe", lambda ctx: None, wait=True)
    code, out, err = run_cli("storage", "check", env=env)
    assert (code, err) == (0, "")
    assert "every schema is at this version's, and every file is whole" in out
    junk(home / "kernel.db", root_page(home / "kernel.db", "jobs"))
    code, out, err = run_cli("storage", "check", "--json", env=env)
    kernel_db = next(r for r in json.loads(out)["components"]
                     if r["component"] == "kernel")
    assert code == 1 and kernel_db["damaged"] and kernel_db["version"] is None
    code, out, err = run_cli("storage", "check", env=env)
    assert code == 1 and "damaged" in out.split("kernel.db")[1].splitlines()[0]
    assert err.startswith(f"neuralmind: {home / 'kernel.db'} (kernel) is damaged (")
    assert err.endswith('): restore it from a backup (docs/operations.md, "Storage")\n')


def test_a_damaged_kernel_db_stops_the_daemon_in_one_line_naming_it(tmp_path):
    home = tmp_path / "home"
    with served(home) as (kernel, _):
        kernel.jobs.submit("probe", lambda ctx: None, wait=True)
    junk(home / "kernel.db", root_page(home / "kernel.db", "jobs"))
    start_refused(home)


def start_refused(home) -> int:
    """``daemon start`` on ``home``, whose kernel.db is damaged: exit 1 quoting the daemon's
    one line (its exit code 3), no traceback in its log. ``daemon status``'s exit code then."""
    env = {"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth",
           "NEURALMIND_EMBEDDINGS_WARM": "0"}
    try:
        # a port of its own: beside other tests' daemons, 8765's check and bind can race
        code, out, err = run_cli("daemon", "start", "--port", str(free_port()), env=env)
        status, _, _ = run_cli("daemon", "status", env=env)
    finally:
        run_cli("daemon", "stop", env=env)
    assert code == 1, (out, err)
    assert err == (f"neuralmind: the daemon exited with code 3: {home / 'kernel.db'} is damaged "
                   '(database disk image is malformed): restore it from a backup '
                   f'(docs/operations.md, "Storage"); see {home / "daemon.log"}\n')
    assert "Traceback" not in (home / "daemon.log").read_text()
    return status
