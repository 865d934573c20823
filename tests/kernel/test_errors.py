"""An uncaught exception becomes 500 internal_error: no exception text, traceback logged with
the request id. Driven in-process: the behaviour is the serializer's, not the server's."""

import logging
import types

import falcon.testing

from kernel.api import operation
from kernel.app import Kernel
from kernel.config import load_settings
from kernel.plugins import hookimpl


class Boom:
    @operation(permission=None)
    def on_get(self, req, resp):
        raise RuntimeError("secret-db-password in /etc/passwd")


def test_uncaught_exception_is_an_opaque_500(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path))
    monkeypatch.setenv("NEURALMIND_EMBEDDINGS_WARM", "0")  # no model to derive for this home
    plugin = types.SimpleNamespace(register_routes=hookimpl(lambda kernel: [("/v1/boom", Boom())]))
    kernel = Kernel(load_settings(), plugins=[], extra_plugins=[plugin], load_entrypoints=False)
    client = falcon.testing.TestClient(kernel.app, headers={"Host": "localhost"})
    with caplog.at_level(logging.ERROR, logger="neuralmind.errors"):
        r = client.simulate_get("/v1/boom", headers={"X-Request-Id": "trace-me"})
    assert r.status_code == 500
    assert r.json == {"error": {"code": "internal_error", "message": "internal error", "status": 500,
                                "request_id": "trace-me", "details": {}}}
    assert "secret" not in r.text and "RuntimeError" not in r.text
    record = next(rec for rec in caplog.records if "trace-me" in rec.getMessage())
    assert record.exc_info and "secret-db-password" in str(record.exc_info[1])


class Writes:
    """Routes whose writes a real SQLite file refuses: one at its size cap (what a full disk
    answers), one opened read-only (a read-only file system or file)."""

    def __init__(self, folder):
        self.folder = folder

    @operation(permission=None)
    def on_post_full(self, req, resp):
        import sqlite3
        conn = sqlite3.connect(self.folder / "full.db")
        conn.execute("CREATE TABLE IF NOT EXISTS t (x BLOB)")
        conn.execute("PRAGMA max_page_count = 4")
        for _ in range(100):
            conn.execute("INSERT INTO t VALUES (zeroblob(4000))")
            conn.commit()

    @operation(permission=None)
    def on_post_read_only(self, req, resp):
        import sqlite3
        sqlite3.connect(self.folder / "ro.db").execute("CREATE TABLE IF NOT EXISTS t (x)")
        conn = sqlite3.connect(f"{(self.folder / 'ro.db').as_uri()}?mode=ro", uri=True)
        conn.execute("INSERT INTO t VALUES (1)")


def test_a_full_disk_or_a_read_only_store_is_said_as_such(tmp_path, monkeypatch):
    """Not an opaque 500: the store refused the write, nothing was written, and what to do."""
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NEURALMIND_EMBEDDINGS_WARM", "0")
    routes = Writes(tmp_path)
    plugin = types.SimpleNamespace(register_routes=hookimpl(lambda kernel: [
        ("/v1/writes/full", routes, "full"), ("/v1/writes/read-only", routes, "read_only")]))
    kernel = Kernel(load_settings(), plugins=[], extra_plugins=[plugin], load_entrypoints=False)
    client = falcon.testing.TestClient(kernel.app, headers={"Host": "localhost"})
    r = client.simulate_post("/v1/writes/full")
    assert (r.status_code, r.json["error"]["code"]) == (507, "storage_full")
    assert r.json["error"]["message"] == ("the disk that holds NeuralMind's state is full; "
                                          "nothing was written — free space, then try again")
    r = client.simulate_post("/v1/writes/read-only")
    assert (r.status_code, r.json["error"]["code"]) == (503, "storage_read_only")
    assert "cannot be written here" in r.json["error"]["message"]
    assert "Retry-After" not in r.headers


def test_a_background_failure_of_the_stored_state_is_one_line_anything_else_its_traceback(
        tmp_path, caplog):
    """A backfill, a recall flush, a job meeting a full file logged a traceback each time for
    an expected condition; a bug keeps its traceback."""
    import sqlite3

    from neuralmind import log_failure
    conn = sqlite3.connect(tmp_path / "small.db")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.execute("PRAGMA max_page_count = 3")  # a real full file: SQLite refuses the insert
    try:
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    except sqlite3.DatabaseError as ex:
        full = ex
    logger = logging.getLogger("neuralmind.test")
    with caplog.at_level(logging.ERROR, logger="neuralmind.test"):
        log_failure(logger, "recording recalls for small.db", full)
        log_failure(logger, "memory backfill for small.db", ZeroDivisionError("division by zero"))
    said, bug = caplog.records
    assert said.levelno == logging.ERROR and said.exc_info is None
    assert said.getMessage() == ("recording recalls for small.db failed: the store refused it: "
                                 "database or disk is full")
    assert bug.levelno == logging.ERROR and bug.exc_info[0] is ZeroDivisionError
    assert bug.getMessage() == "memory backfill for small.db failed"


OUT_OF_FILES = """
import json, os, resource, sqlite3, sys
from kernel.errors import state_fault
held = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (held + 2, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
kept, said = [], {}
try:
    while True:
        kept.append(open(os.devnull))
except OSError as ex:
    said["open"] = ex
kept.pop().close()
try:
    sqlite3.connect(os.path.join(sys.argv[1], "new.db")).execute("CREATE TABLE t (x)")
except sqlite3.Error as ex:
    said["sqlite"] = ex
print(json.dumps({how: [state_fault(ex)[0].status, state_fault(ex)[0].code,
                        state_fault(ex)[0].message] for how, ex in said.items()}))
"""


def test_a_process_out_of_file_descriptors_says_so(tmp_path):
    """At its open-file limit a server answered 500 with a traceback (a file the OS refused)
    or 503 "the database cannot be reached; try again" (SQLite's "unable to open"), which sends
    an operator the wrong way. Run in a child whose limit is lowered to what it holds."""
    import json
    import subprocess
    import sys

    from tests.support import ROOT
    done = subprocess.run([sys.executable, "-c", OUT_OF_FILES, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert set(said) == {"open", "sqlite"}
    for status, code, message in said.values():
        assert (status, code) == (503, "too_many_open_files")
        assert "as many open files as it may" in message and "ulimit -n" in message


def test_a_value_off_its_pattern_is_refused_in_words(tmp_path):
    """``String should match pattern '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'`` told a CLI user
    typing ``--id "has space"`` nothing: a pattern declared with ``matching`` says what it
    takes, and the contract still publishes the pattern."""
    from tests.support import LocalServer
    (tmp_path / "repo").mkdir()
    with LocalServer(tmp_path / "home", plugins=["auth", "memory"]) as server:
        pid = server.register(tmp_path / "repo")
        memories = f"/v1/projects/{pid}/memories"
        for field, value, says in (
                ("id", "has space", "an id is 1 to 64 letters, digits and . _ : - (beginning "
                                    "with a letter or digit)"),
                ("commit_sha", "xyz", "a commit is its hexadecimal sha (0-9, a-f)")):
            r = server.post(memories, {"title": "Cache", "rationale": "Speed", field: value})
            assert r.status == 422 and r.error["details"]["errors"] == [
                {"loc": ["body", field], "msg": says, "type": "string_pattern_mismatch"}]
        r = server.get(memories + "?collection=a%20b")
        assert r.status == 422 and r.error["details"]["errors"] == [
            {"loc": ["query", "collection"], "type": "string_pattern_mismatch",
             "msg": "a name is 1 to 64 letters, digits and . _ - (beginning with a letter or "
                    "digit)"}]
        assert server.get(memories).json["items"] == []
        schema = server.get("/v1/openapi.json").json["components"]["schemas"]["MemoryIn"]
        assert schema["properties"]["id"]["anyOf"][0]["pattern"] == \
            "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
