"""The kernel on PostgreSQL (kernel/pg.py): the same store SQL runs on both engines, migrations
run once under their lock, leases hold across holders, and the kernel's projects, jobs and
events live in the shared database — two kernels on one database see each other's."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from kernel import storage
from kernel.leases import Leases
from kernel.pg import PgBackend, translate
from tests.support import (ROOT, LocalServer, Server, free_port, fresh_pg_dsn, pg_uri,
                           run_cli)

pytestmark = pytest.mark.sqlite_only("it names its engines and databases itself")


@pytest.fixture
def dsn() -> str:
    return fresh_pg_dsn()


@pytest.fixture
def pg(dsn):
    backend = PgBackend(dsn, 4)
    yield backend
    backend.close()


SCRIPT = ["CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL, n INTEGER)"]


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path, pg):
    if request.param == "sqlite":
        database = storage.Database(tmp_path / "t.db", SCRIPT + [
            """CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL,
            pid INTEGER NOT NULL, job_id TEXT, heartbeat REAL NOT NULL,
            state TEXT NOT NULL DEFAULT '{}', stop_requested INTEGER NOT NULL DEFAULT 0)"""])
    else:
        from kernel.leases import PG_MIGRATION
        database = pg.database("test", SCRIPT + [PG_MIGRATION])
    yield database
    database.close()


def test_placeholders_translate_to_psycopgs_spelling():
    assert translate("SELECT * FROM t WHERE a = ? AND b LIKE '%x'", False) == (
        "SELECT * FROM t WHERE a = %s AND b LIKE '%%x'")
    assert translate("SELECT x::text FROM t WHERE d < :today", True) == (
        "SELECT x::text FROM t WHERE d < %(today)s")


def test_one_sql_text_serves_both_engines(db):
    with db.transaction() as conn:
        conn.executemany("INSERT INTO notes (id, text, n) VALUES (?, ?, ?)",
                         [(1, "a%b", 10), (2, "c", 20)])
        ids = conn.execute("INSERT INTO notes (id, text) VALUES (?, ?) RETURNING id",
                           (3, "d")).fetchone()
        assert ids[0] == 3
    row = db.conn.execute("SELECT * FROM notes WHERE text LIKE ? ORDER BY id", ("a%",)).fetchone()
    assert (row["id"], row[1], row["n"]) == (1, "a%b", 10)
    assert [r["id"] for r in db.conn.execute("SELECT id FROM notes WHERE n > :low ORDER BY id",
                                             {"low": 15})] == [2]
    with pytest.raises(Exception), db.transaction() as conn:
        conn.execute("UPDATE notes SET text = ? WHERE id = ?", ("changed", 1))
        conn.execute("INSERT INTO notes (id, text) VALUES (?, ?)", (1, "duplicate"))
    assert db.conn.execute("SELECT text FROM notes WHERE id = 1").fetchone()[0] == "a%b"


def test_migrations_run_once_whoever_starts_first(pg):
    ran = []

    def step(conn):
        ran.append(1)
        conn.execute("CREATE TABLE once_only (x INTEGER)")

    errors = []

    def migrate():
        try:
            pg.database("racing", [step])
        except Exception as ex:  # pragma: no cover - the assertion below names it
            errors.append(ex)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and ran == [1]
    assert pg.database("racing", [step]).version() == 1 and ran == [1]


def test_an_older_release_refuses_a_newer_schema_and_leaves_it_as_it_is(tmp_path, pg):
    """A server of an older release started on a database a newer one migrated refuses it,
    naming it (it would write what the newer one cannot read), and records nothing: the
    newer release then runs none of its steps again."""
    ran = {"sqlite": [], "postgres": []}

    def steps(engine, count):
        def step(n):
            def run(conn):
                ran[engine].append(n)
                conn.execute(f"CREATE TABLE step{n} (x INTEGER)")
            return run
        return [step(n) for n in range(1, count + 1)]

    pg.database("versions", steps("postgres", 2))
    storage.Database(tmp_path / "v.db", steps("sqlite", 2)).close()
    with pytest.raises(storage.NewerSchema) as refused:
        pg.database("versions", steps("postgres", 1))
    assert str(refused.value) == ("versions in the database is at schema version 2, "
                                  "newer than this NeuralMind's 1: upgrade NeuralMind before "
                                  "serving it")
    with pytest.raises(storage.NewerSchema) as refused:
        storage.Database(tmp_path / "v.db", steps("sqlite", 1))
    assert refused.value.public == ("the v data is at schema version 2, newer than this "
                                    "NeuralMind's 1: upgrade NeuralMind")
    assert pg.database("versions", steps("postgres", 2)).version() == 2
    storage.Database(tmp_path / "v.db", steps("sqlite", 2)).close()
    assert ran == {"sqlite": [1, 2], "postgres": [1, 2]}


def test_a_lease_has_one_live_holder_and_passes_on_when_it_lapses(db):
    leases = Leases(db)
    assert leases.acquire("build:p1", "one", ttl_s=30, job_id="j1") is None
    holder = leases.acquire("build:p1", "two", ttl_s=30)
    assert holder["owner"] == "one" and holder["job_id"] == "j1"
    assert leases.heartbeat("build:p1", "one", {"queued": 2})
    assert not leases.heartbeat("build:p1", "two")
    assert leases.acquire("build:p1", "two", ttl_s=0) is None  # "one" lapsed: taken over
    assert not leases.heartbeat("build:p1", "one") and leases.get("build:p1")["owner"] == "two"
    assert leases.request_stop("build:p1") and leases.get("build:p1")["stop_requested"] == 1
    leases.release("build:p1", "one")  # not its lease any more: nothing happens
    assert leases.get("build:p1")["owner"] == "two"
    leases.release("build:p1", "two")
    assert leases.get("build:p1") is None


def test_two_takers_of_a_lapsed_lease_never_both_win(db):
    leases = Leases(db)
    assert leases.acquire("sender", "old", ttl_s=30) is None
    with db.transaction() as conn:  # its holder stopped beating long ago
        conn.execute("UPDATE leases SET heartbeat = 0, host = 'elsewhere' WHERE name = ?",
                     ("sender",))
    winners, start = [], threading.Barrier(6)

    def take(owner):
        start.wait()
        if leases.acquire("sender", owner, ttl_s=30) is None:
            winners.append(owner)

    threads = [threading.Thread(target=take, args=(f"t{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and leases.get("sender")["owner"] == winners[0]


def test_two_kernels_on_one_database_share_projects_jobs_and_events(tmp_path, dsn):
    storage_ = {"backend": "postgres", "dsn": dsn}
    one = LocalServer(tmp_path / "one", plugins=["auth"], storage=storage_).start()
    two = LocalServer(tmp_path / "two", plugins=["auth"], storage=storage_).start()
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        pid = one.register(repo)
        assert [p["id"] for p in two.get("/v1/projects").json["items"]] == [pid]
        assert two.post("/v1/projects", {"path": str(repo)}).status == 200  # already there
        job = one.kernel.jobs.submit("probe", lambda ctx: {"ok": True}, project_id=pid,
                                     wait=True)
        assert two.get(f"/v1/jobs/{job.id}").json["status"] == "done"
        kinds = [e.kind for e in two.kernel.events.after(0)]
        assert "project.registered" in kinds
        assert not (tmp_path / "one" / "kernel.db").exists()
    finally:
        one.stop()
        two.stop()


def test_an_unreachable_database_is_a_503_and_the_server_recovers_without_a_restart(tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    # pgserver runs the server as its own user, which cannot enter pytest's 0700 folders
    folder = Path(tempfile.mkdtemp(prefix="neuralmind-test-pg-down-"))
    db = pgserver.get_server(folder, cleanup_mode="stop")
    server = LocalServer(tmp_path / "home", plugins=["auth"],
                         storage={"backend": "postgres", "dsn": db.get_uri()}).start()
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        pid = server.register(repo)
        gate = threading.Event()
        job = server.kernel.jobs.submit("probe", lambda ctx: gate.wait(30) and {"ok": True})
        while server.get(f"/v1/jobs/{job.id}").json["status"] != "running":
            time.sleep(0.05)
        db.cleanup()  # the database goes away
        for _ in range(3):  # each answer at once, not after the pool's 30 s wait: a worker's
            began = time.monotonic()  # threads would all be held, /v1/health queued behind
            down = server.get("/v1/projects")
            assert down.status == 503 and down.error["code"] == "storage_unavailable"
            assert time.monotonic() - began < 2 and down.headers["retry-after"] == "2"
        assert "nothing was written" in down.error["message"]
        gate.set()  # the job ends while it is away
        time.sleep(0.5)
        db = pgserver.get_server(folder, cleanup_mode="stop")  # and comes back
        statuses = [server.get("/v1/projects").status for _ in range(10)]
        assert statuses[-1] == 200 and set(statuses) <= {200, 503}  # each stale connection once
        assert [p["id"] for p in server.get("/v1/projects").json["items"]] == [pid]
        deadline = time.monotonic() + 30
        while (ended := server.get(f"/v1/jobs/{job.id}").json)["status"] == "running":
            assert time.monotonic() < deadline, "the job's end was never recorded"
            time.sleep(0.2)
        assert (ended["status"], ended["result"]) == ("done", {"ok": True})
    finally:
        server.stop()
        db.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def owned():
    """A database as an operator makes one for a team (CREATE ROLE …, CREATE DATABASE … OWNER
    …): its owner is no superuser, and pgvector is not in it. ``(the owner's DSN, a
    superuser's DSN of it, the line that says who must create pgvector)``."""
    name = "owner_" + secrets.token_hex(4)
    with psycopg.connect(pg_uri(), autocommit=True) as conn:
        version, trusted = conn.execute("SELECT version, trusted FROM "
                                        "pg_available_extension_versions WHERE name = 'vector'"
                                        ).fetchone()
        if trusted:
            pytest.skip(f"pgvector {version} is trusted here: its database's owner may create it")
        conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'secret'")
        conn.execute(f"CREATE DATABASE {name} OWNER {name}")
    said = (f"the pgvector extension is not in database {name} and role {name} cannot create "
            f"it (pgvector {version} is not a trusted extension: only a superuser may create "
            f"it): run `CREATE EXTENSION vector;` in database {name} as a superuser")
    try:
        yield (make_conninfo(pg_uri(), user=name, password="secret", dbname=name),
               make_conninfo(pg_uri(), dbname=name), said)
    finally:
        with psycopg.connect(pg_uri(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
            conn.execute(f"DROP ROLE {name}")


def create_vector(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")


def test_serve_and_the_daemon_say_who_must_create_pgvector_before_any_worker(tmp_path, owned):
    """A database's owner may not create pgvector (not a trusted extension): serve and the
    daemon say so in one line and exit 2 before any worker starts — not a worker that fails
    to boot after "listening at". Once a superuser created it, the owner serves."""
    owner, superuser, said = owned
    env = {"NEURALMIND_HOME": str(tmp_path / "home"), "NEURALMIND_DATABASE_URL": owner,
           "NEURALMIND_PLUGINS": "auth,memory", "NEURALMIND_EMBEDDINGS_WARM": "0"}
    serve = subprocess.run([sys.executable, "-m", "neuralmind.cli", "serve", "--port",
                            str(free_port())], cwd=ROOT, env={**os.environ, **env},
                           capture_output=True, text=True, timeout=90)
    assert (serve.returncode, serve.stderr) == (2, f"neuralmind: {said}\n")
    code, out, err = run_cli("daemon", "start", "--port", "0", env=env)
    assert (code, out) == (2, "") and err.startswith(
        f"neuralmind: the daemon exited with code 2: {said}; see "), err
    create_vector(superuser)
    server = Server(tmp_path / "served", plugins=["auth", "memory"],
                    env={"NEURALMIND_DATABASE_URL": owner}).start()
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        made = server.post(f"/v1/projects/{server.register(repo)}/memories",
                           {"title": "Use WAL", "rationale": "readers never block"})
        assert made.status == 201, made.body
    finally:
        server.stop()


def test_without_the_memory_plugin_no_pgvector_is_asked_for(tmp_path, owned):
    """pgvector is the memory plugin's need alone: with it disabled, a database that lacks the
    extension (and whose role may not create it) passes the start-up checks and storage
    check, and a home moves into it."""
    from kernel.config import load_settings
    from kernel.serving import check_bind
    owner, _, _ = owned
    home = tmp_path / "home"
    with LocalServer(home, plugins=["auth", "index"]) as server:
        repo = tmp_path / "repo"
        repo.mkdir()
        server.register(repo)
    env = {"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth,index"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {**env, "NEURALMIND_DATABASE_URL": owner}.items():
            mp.setenv(key, value)
        check_bind(load_settings())  # raises CannotServe when it finds something missing
    code, out, err = run_cli("storage", "check", env={**env, "NEURALMIND_DATABASE_URL": owner})
    assert (code, err) == (0, ""), out
    code, out, err = run_cli("storage", "migrate", "--to", "postgres", "--dsn", owner, env=env)
    assert code == 0 and "verified: " in out, err


def test_storage_check_and_migrate_say_who_must_create_pgvector_copying_nothing(tmp_path,
                                                                                 owned):
    """migrate into a database whose role may not create pgvector stops before it copies
    anything (it copied the kernel's tables, then stopped in the memory plugin's: a partial
    copy in a database that can never serve); check says the same, and both pass once a
    superuser created it."""
    owner, superuser, said = owned
    home = tmp_path / "home"
    with LocalServer(home, plugins=["auth", "memory"]) as server:
        repo = tmp_path / "repo"
        repo.mkdir()
        made = server.post(f"/v1/projects/{server.register(repo)}/memories",
                           {"title": "Use WAL", "rationale": "readers never block"})
        assert made.status == 201, made.body
    env = {"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth,memory"}
    migrate = ("storage", "migrate", "--to", "postgres", "--dsn", owner)
    assert run_cli(*migrate, env=env) == (2, "", f"neuralmind: {said}; nothing was copied\n")
    with psycopg.connect(owner) as conn:
        assert conn.execute("SELECT to_regclass('nm_schema')").fetchone()[0] is None
    check = {**env, "NEURALMIND_DATABASE_URL": owner}
    code, out, err = run_cli("storage", "check", env=check)
    assert (code, err) == (1, f"neuralmind: {said}\n") and "every schema" not in out
    create_vector(superuser)
    code, out, err = run_cli(*migrate, env=env)
    assert code == 0 and out.startswith("kernel ") and "verified: " in out, err
    code, out, err = run_cli("storage", "check", env=check)
    assert (code, err) == (0, "") and out.endswith("every schema is at this version's\n")


def test_a_start_that_fails_on_postgres_closes_its_pool(tmp_path, dsn):
    """A plugin failing at start-up after the kernel opened its PostgreSQL pool left the
    pool's connections and worker threads open for the life of the process."""
    from kernel.app import Kernel
    from kernel.config import load_settings
    from kernel.plugins import StartupError
    from neuralmind import hookimpl

    class Failing:
        @hookimpl
        def startup(self, kernel):
            raise RuntimeError("cannot open my store")

    def pool_threads() -> int:
        return sum(t.name.startswith("pool-") for t in threading.enumerate())

    before = pool_threads()
    settings = load_settings(None, kernel={"home": str(tmp_path)}, embeddings={"warm": False},
                             storage={"backend": "postgres", "dsn": dsn})
    with pytest.raises(StartupError, match="cannot open my store"):
        Kernel(settings, plugins=[], extra_plugins=[Failing()], load_entrypoints=False)
    deadline = time.monotonic() + 5
    while pool_threads() != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool_threads() == before  # the pool closed, with its connections
