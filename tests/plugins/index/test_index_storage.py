"""A project's index files (``index.db``, ``usage.db``) as ``neuralmind storage`` and a start
see them: checked like every stored file (a newer schema refuses the start, a damaged page
is named), never copied into PostgreSQL (each machine derives its own), and a damaged one
said as what it is — derived data a build makes again, not a file to restore."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from kernel.storage import Database
from plugins.index import usage
from tests.kernel.test_storage_faults import junk, root_page
from tests.support import LocalServer, fresh_pg_dsn, run_cli

CONFIG = '[kernel]\nplugins = ["auth", "index"]\n'
REMEDY = ("delete it (with the server stopped, and its -wal and -shm), then build the project "
          "again: the code index is derived from the repository, never restored; but the "
          "documents ingested into it (`project ingest`) and the ignore rules added to it are "
          'kept nowhere else: ingest and add them again (docs/operations.md, "Storage")')


def storage(home, *args: str) -> tuple[int, str, str]:
    return run_cli("storage", *args, "--config", str(home / "config.toml"),
                   env={"NEURALMIND_HOME": str(home)})


def built_home(tmp_path):
    """A home whose one project is built: ``(home, project id, its state folder)``."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir()
    (repo / "prices.py").write_text("def round_money(value):\n    return round(value, 2)\n")
    with LocalServer(home, config=CONFIG) as server:
        pid = server.register(repo)
        assert server.post(f"/v1/projects/{pid}/build", {"wait": True}).status == 200
    return home, pid, repo / ".neuralmind"


def test_check_and_a_start_read_each_projects_index_files(tmp_path, monkeypatch):
    from kernel.config import load_settings
    from kernel.serving import CannotServe, gunicorn_options
    home, pid, state = built_home(tmp_path)
    Database(state / "usage.db", usage.MIGRATIONS).close()  # what learning keeps, once used
    code, out, err = storage(home, "check", "--json")
    rows = {r["file"].rsplit("/", 1)[-1]: r for r in json.loads(out)["components"]
            if r["component"] == "index"}
    assert code == 0 and sorted(rows) == ["index.db", "usage.db"], err
    assert all(r["label"] == pid and r["pending"] == 0 and not r["newer"] for r in rows.values())

    index = state / "index.db"
    latest = rows["index.db"]["latest"]
    with closing(sqlite3.connect(index)) as conn:  # a newer NeuralMind migrated it
        conn.execute(f"PRAGMA user_version = {latest + 1}")
    newer = (f"{index} is at schema version {latest + 1}, newer than this NeuralMind's "
             f"{latest}: upgrade NeuralMind before serving it")
    code, out, err = storage(home, "check")
    assert (code, err) == (1, f"neuralmind: {newer}\n") and "newer" in out
    monkeypatch.setenv("NEURALMIND_HOME", str(home))
    with pytest.raises(CannotServe) as refused:  # serve and the daemon: before any worker
        gunicorn_options(load_settings(home / "config.toml"))
    assert str(refused.value) == newer

    with closing(sqlite3.connect(index)) as conn:
        conn.execute(f"PRAGMA user_version = {latest}")
    junk(index, root_page(index, "nodes"))  # a failing disk
    code, out, err = storage(home, "check")
    assert code == 1 and "damaged" in out.split("index.db")[1].splitlines()[0]
    assert err.startswith(f"neuralmind: {index} (index) is damaged (")
    assert err.endswith(f"): {REMEDY}\n") and "backup" not in err  # derived: built again
    code, out, _ = storage(home, "check", "--json")
    damaged = next(r for r in json.loads(out)["components"] if r["file"] == str(index))
    assert code == 1 and damaged["remedy"] == REMEDY
    with LocalServer(home, config=CONFIG) as server:
        r = server.post(f"/v1/projects/{pid}/search", {"query": "round money"})
        assert (r.status, r.error["code"]) == (500, "storage_damaged")
        assert r.error["message"] == (f"the index database of NeuralMind's state is damaged: "
                                      f"{REMEDY}; the server log names the file")
        assert f"{index} is damaged (database disk image is malformed): {REMEDY}" in \
            server.output()
    for path in state.glob("index.db*"):  # as the answer says: the server stopped
        path.unlink()
    with LocalServer(home, config=CONFIG) as server:
        assert server.post(f"/v1/projects/{pid}/build", {"wait": True}).status == 200
        found = server.post(f"/v1/projects/{pid}/search", {"query": "round money"})
        assert found.status == 200 and found.json["results"], found.body


def test_migrate_leaves_the_index_on_the_machine(tmp_path):
    """The index is derived from each machine's checkout: a migrate copies none of it and
    records nothing of it in the database, whose check then lists no index."""
    import psycopg
    home, _, state = built_home(tmp_path)
    dsn = fresh_pg_dsn()
    code, out, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn, "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"], err
    assert {c["component"] for c in report["checks"]} == {"kernel", "auth"}
    with psycopg.connect(dsn) as conn:
        assert "index" not in {r[0] for r in conn.execute("SELECT component FROM nm_schema")}
    code, out, err = run_cli("storage", "check", "--json", "--config", str(home / "config.toml"),
                             env={"NEURALMIND_HOME": str(home), "NEURALMIND_DATABASE_URL": dsn})
    assert code == 0 and {c["component"] for c in json.loads(out)["components"]} == {
        "kernel", "auth"}, err
    assert (state / "index.db").is_file()  # where each machine's server reads it
