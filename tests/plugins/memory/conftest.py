"""Fixtures of the memory tests: one server per module (in this process), projects made on it.
Every test runs on both storage backends (tests/conftest.py ``backend``): a project's
memory.db, or its rows in the home's PostgreSQL schema."""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import LocalServer, Server, fresh_pg_dsn, stored_database

PLUGINS = ["auth", "memory"]


def start(home: Path, *, serving: bool = False, **kw) -> LocalServer | Server:
    """The auth and memory plugins on ``home``: in this process, or under gunicorn
    (``serving=True``, with ``workers``, ``env``) for what is about workers. The daily decay
    sweep is off in process unless a test asks for it (``memory={...}``)."""
    kw.setdefault("plugins", PLUGINS)
    if not serving:
        kw.setdefault("memory", {"decay_sweep_hours": 0})
    return (Server if serving else LocalServer)(home, **kw).start()


class Api:
    """A project's memory routes on a running server."""

    def __init__(self, server: LocalServer | Server, project_dir: Path):
        self.server = server
        self.dir = project_dir
        self.pid = server.register(project_dir)
        self.base = f"/v1/projects/{self.pid}/memories"

    def create(self, **fields):
        fields.setdefault("title", "A decision")
        fields.setdefault("rationale", "Because it was measured")
        r = self.server.post(self.base, fields)
        assert r.status == 201, r.body
        return r.json

    def url(self, mid: str = "", tail: str = "") -> str:
        return self.base + (f"/{mid}" if mid else "") + (f"/{tail}" if tail else "")

    def history(self, mid: str) -> list[dict]:
        r = self.server.get(self.url(mid, "history") + "?limit=200")
        assert r.status == 200, r.body
        return r.json["items"]

    def load(self, *recs: dict, links: tuple = ()) -> None:
        """Records as an import restores them (any timestamps and status), with history."""
        at = "2024-01-01T00:00:00.000Z"
        lines = [json.dumps({"memory": {"rationale": "r", "created_at": at, "updated_at": at,
                                        **rec},
                             "history": [], "links": [lk for lk in links
                                                      if lk["source"] == rec["id"]]})
                 for rec in recs]
        r = self.server.post(self.url(tail="import"), body="\n".join(lines).encode(),
                             headers={"Content-Type": "application/x-ndjson"})
        assert r.status == 200, r.body

    def embedded(self, timeout: float = 60) -> None:
        """Wait for the backfill to store every record's vectors (a search stores none)."""
        deadline = time.monotonic() + timeout
        while self.server.get(self.url(tail="stats")).json["vectors"]["pending"]:
            assert time.monotonic() < deadline, "the backfill stored no vectors"
            time.sleep(0.05)

    def get(self, mid: str) -> dict:
        r = self.server.get(self.url(mid))
        assert r.status == 200, r.body
        return r.json

    def job(self, tail: str, body: dict | None = None) -> dict:
        """A job route run with ?wait=true: its result."""
        r = self.server.post(self.url(tail=tail) + "?wait=true", body or {})
        assert r.status == 200 and r.json["job"]["status"] == "done", r.body
        return r.json["job"]["result"]

    def search(self, query: str, **kw):
        r = self.server.post(self.url(tail="search"), {"query": query, **kw})
        assert r.status == 200, r.body
        return r.json


@pytest.fixture(scope="module", autouse=True)
def both_backends(backend) -> str:
    return backend


@contextmanager
def memory_database(home: Path, project_dir: Path, pid: str):
    """The memory tables of one project of the server at ``home``, under the module's
    backend — the project's memory.db, or the home's schema seen as that project — for a
    test reading them beside the server (``db.conn.execute``)."""
    from plugins.memory.pgstore import SETTING
    from plugins.memory.store import MIGRATIONS
    with stored_database(home, project_dir / ".neuralmind" / "memory.db", "memory", MIGRATIONS,
                         {SETTING: pid}) as db:
        yield db


@pytest.fixture(scope="module")
def new_store(tmp_path_factory, backend):
    """``new_store(name)``: an empty store without a server, under the module's backend — a
    SQLite file, or a project of a fresh PostgreSQL schema."""
    from kernel.pg import PgBackend
    from kernel.storage import Database
    from plugins.memory.store import MIGRATIONS, MemoryStore
    opened = []

    def make(name: str):
        if backend == "sqlite":
            return MemoryStore(Database(tmp_path_factory.mktemp("store") / f"{name}.db",
                                        MIGRATIONS))
        from plugins.memory.pgstore import PG_MIGRATIONS, PgMemoryStore
        opened.append(PgBackend(fresh_pg_dsn(), 2))
        return PgMemoryStore(opened[-1].database("memory", PG_MIGRATIONS), name)

    yield make
    for backend in opened:
        backend.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    srv = start(tmp_path_factory.mktemp("memory-home"))
    yield srv
    srv.stop()


@pytest.fixture
def api(server, tmp_path) -> Api:
    """A fresh project (an empty directory) on the module's server."""
    path = tmp_path / "proj"
    path.mkdir()
    return Api(server, path)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), "-c", "user.email=t@example.com",
                           "-c", "user.name=t", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()
