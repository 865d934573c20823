"""``neuralmind storage check`` and ``neuralmind storage migrate --to postgres``: a SQLite home
served for a while (a project with memories, jobs, events, a token, a webhook with
deliveries, the audit chain) moves into PostgreSQL whole — counts and the audit chain's head verified — again
without change, resumed after a cut, and a server on the database carries on from it."""

from __future__ import annotations

import json
import re
import time

import pytest

from plugins.tier2_bridge.plugin import bridge
from tests.plugins.auth.helpers import create_token
from tests.plugins.webhooks.receiver import Receiver
from tests.support import LocalServer, fresh_pg_dsn, run_cli

pytestmark = pytest.mark.sqlite_only("a SQLite home is the source; the test names its database")

PLUGINS = ["auth", "memory", "tier2_bridge", "webhooks"]
CONFIG = f"""[kernel]
plugins = {json.dumps(PLUGINS)}
[webhooks]
allow_private = ["127.0.0.1/32"]
poll_s = 0.05
"""


def storage(home, *args: str, dsn: str | None = None) -> tuple[int, dict | str, str]:
    env = {"NEURALMIND_HOME": str(home), **({"NEURALMIND_DATABASE_URL": dsn} if dsn else {})}
    code, out, err = run_cli("storage", *args, "--config", str(home / "config.toml"), env=env)
    assert out or "--json" not in args, err
    return code, json.loads(out) if "--json" in args else out, err


@pytest.fixture
def served_home(tmp_path):
    """A home a server used: a project, two jobs, a token, a hook with deliveries, the
    audit chain copied up to the last event. Returns (home, what the server saw)."""
    home = tmp_path / "home"
    receiver = Receiver()
    try:
        with LocalServer(home, config=CONFIG) as server:
            repo = tmp_path / "repo"
            repo.mkdir()
            pid = server.register(repo)
            memories = f"/v1/projects/{pid}/memories"
            made = [server.post(memories, body).json for body in (
                {"title": "Escape HTML in rendered templates",
                 "rationale": "Unescaped user names let scripts run in pages.", "tags": ["web"]},
                {"title": "Retry flaky network tests three times",
                 "rationale": "CI runners drop connections now and then."})]
            server.post(memories + f"/{made[0]['id']}/feedback", {"signal": "unhelpful"})
            made[0] = server.get(memories + f"/{made[0]['id']}").json
            made[0]["history"] = server.get(memories + f"/{made[0]['id']}/history").json["items"]
            server.post(memories + "/search", {"query": "pages", "mode": "semantic"})
            deadline = time.monotonic() + 60  # a search embeds for itself; the backfill stores
            while server.get(memories + "/stats").json["vectors"]["pending"]:
                assert time.monotonic() < deadline, "the backfill stored no vectors"
                time.sleep(0.05)
            for n in range(2):
                server.kernel.jobs.submit("probe", lambda ctx, n=n: {"n": n}, project_id=pid,
                                          wait=True)
            team = home.parent / "team.toml"  # per-user tokens are server mode's
            team.write_text("[server]\nallow_remote = true\n")
            create_token(home, team, "ann", "reader")
            hook = server.post("/v1/webhooks", {"url": receiver.url, "events": ["*"]})
            assert hook.status == 201, hook.body
            receiver.secret = hook.json["secret"]
            for n in range(3):
                server.kernel.emit("memory.created", project=pid, actor="alice", data={"n": n})
            receiver.wait(3)
            time.sleep(0.2)  # the hook's own events may still be queued
            bridge(server.kernel).trail.sync()
            seen = {"project": pid, "hook": hook.json["id"], "memories": made,
                    "events": [(e.id, e.kind) for e in server.kernel.events.after(0)],
                    "deliveries": server.get(f"/v1/webhooks/{hook.json['id']}/deliveries"
                                             ).json["items"]}
    finally:
        receiver.stop()
    return home, seen


def test_check_reports_each_components_file_version_and_size(served_home):
    home, _ = served_home
    code, report, _ = storage(home, "check", "--json")
    files = {(c["component"], c["file"].rsplit("/", 1)[-1]): c for c in report["components"]}
    assert code == 0 and report["backend"] == "sqlite"
    assert {("kernel", "kernel.db"), ("auth", "tokens.json"), ("webhooks", "webhooks.db"),
            ("memory", "memory.db"),
            ("tier2_audit", "audit.db"), ("tier2_seats", "seats.db")} <= set(files)
    kernel = files[("kernel", "kernel.db")]
    assert (kernel["version"], kernel["pending"]) == (kernel["latest"], 0) and kernel["size"] > 0
    code, text, _ = storage(home, "check")
    assert "backend  sqlite" in text and "every schema is at this version's" in text


def test_a_home_of_a_newer_neuralmind_is_said_once_and_never_served(tmp_path, monkeypatch):
    """A downgrade: this NeuralMind cannot read what a later one's kernel.db holds."""
    import sqlite3

    from kernel.config import load_settings
    from kernel.serving import CannotServe, gunicorn_options
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    LocalServer(home, plugins=["auth"]).start().stop()
    with sqlite3.connect(home / "kernel.db") as conn:
        latest = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.execute(f"PRAGMA user_version = {latest + 1}")
    code, text, err = storage(home, "check")
    assert code == 1 and "kernel.db  " in text and "newer" in text.split("kernel.db")[1]
    # no version shown as -1 (the home's path may hold "-1": pytest-1000)
    assert "every schema is at this version's" not in text and not re.search(r"\s-1\s", text)
    assert err == (f"neuralmind: {home / 'kernel.db'} is at schema version {latest + 1}, newer "
                   f"than this NeuralMind's {latest}: upgrade NeuralMind before serving it\n")
    code, report, _ = storage(home, "check", "--json")
    kernel = next(r for r in report["components"] if r["file"].endswith("kernel.db"))
    assert code == 1 and (kernel["pending"], kernel["newer"]) == (0, True)  # never -1
    monkeypatch.setenv("NEURALMIND_HOME", str(home))
    with pytest.raises(CannotServe) as refused:  # serve and the daemon: before any worker
        gunicorn_options(load_settings(home / "config.toml"))
    assert str(refused.value) == (f"{home / 'kernel.db'} is at schema version {latest + 1}, "
                                  f"newer than this NeuralMind's {latest}: upgrade NeuralMind "
                                  "before serving it")


def test_a_plugin_file_of_a_newer_neuralmind_is_never_served(tmp_path, monkeypatch):
    """Not kernel.db alone: a project's memory.db, or webhooks.db, that a later NeuralMind
    migrated is refused before any worker starts; and one a running server meets (a project
    registered later) answers 503 naming the component, writing nothing."""
    import sqlite3

    from kernel.config import load_settings
    from kernel.serving import CannotServe, gunicorn_options
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir(), repo.mkdir()
    (home / "config.toml").write_text(CONFIG)
    with LocalServer(home, config=CONFIG) as server:
        pid = server.register(repo)
        assert server.post(f"/v1/projects/{pid}/memories", {"title": "a", "rationale": "b"}
                           ).status == 201
    monkeypatch.setenv("NEURALMIND_HOME", str(home))
    for file in (repo / ".neuralmind" / "memory.db", home / "webhooks.db"):
        with sqlite3.connect(file) as conn:
            latest = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute(f"PRAGMA user_version = {latest + 1}")
        with pytest.raises(CannotServe) as refused:
            gunicorn_options(load_settings(home / "config.toml"))
        assert str(refused.value) == (f"{file} is at schema version {latest + 1}, newer than "
                                      f"this NeuralMind's {latest}: upgrade NeuralMind before "
                                      "serving it")
        with sqlite3.connect(file) as conn:
            conn.execute(f"PRAGMA user_version = {latest}")

    later = tmp_path / "later"  # a project a later NeuralMind kept memories in
    (later / ".neuralmind").mkdir(parents=True)
    with sqlite3.connect(later / ".neuralmind" / "memory.db") as conn:
        conn.execute("PRAGMA user_version = 99")
    with LocalServer(home, config=CONFIG) as server:
        r = server.post(f"/v1/projects/{server.register(later)}/memories",
                        {"title": "c", "rationale": "d"})
        assert r.status == 503 and r.error["code"] == "storage_newer"
        assert r.error["message"].startswith("the memory data is at schema version 99, newer "
                                             "than this NeuralMind's ")
        assert r.error["message"].endswith(": upgrade NeuralMind")
        assert str(later) not in r.body.decode()
    with sqlite3.connect(later / ".neuralmind" / "memory.db") as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_a_database_a_newer_neuralmind_migrated_is_never_served(tmp_path, monkeypatch):
    """On PostgreSQL too: a component whose recorded version is past this release's steps
    (a newer server migrated the shared database) is refused before any worker starts."""
    import psycopg

    from kernel.config import load_settings
    from kernel.serving import CannotServe, gunicorn_options
    home, dsn = tmp_path / "home", fresh_pg_dsn()
    home.mkdir()
    # port 0: the check below never probes the default port, which a daemon may hold
    config = CONFIG + f'[storage]\nbackend = "postgres"\ndsn = "{dsn}"\n[server]\nport = 0\n'
    LocalServer(home, config=config).start().stop()
    monkeypatch.setenv("NEURALMIND_HOME", str(home))
    gunicorn_options(load_settings(home / "config.toml"))  # as it is: served
    with psycopg.connect(dsn, autocommit=True) as conn:
        latest = conn.execute("UPDATE nm_schema SET version = version + 1 "
                              "WHERE component = 'memory' RETURNING version").fetchone()[0] - 1
    with pytest.raises(CannotServe) as refused:
        gunicorn_options(load_settings(home / "config.toml"))
    assert str(refused.value) == (f"memory in the database is at schema version {latest + 1}, "
                                  f"newer than this NeuralMind's {latest}: upgrade NeuralMind "
                                  "before serving it")


def test_a_file_that_is_no_database_is_named_before_anything_is_copied(tmp_path):
    import psycopg
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir(), repo.mkdir()
    (home / "config.toml").write_text(CONFIG)
    with LocalServer(home, plugins=PLUGINS) as server:
        pid = server.register(repo)
        assert server.post(f"/v1/projects/{pid}/memories", {"title": "Use WAL",
                                                            "rationale": "readers"}).status == 201
    broken = next(repo.glob("**/memory.db"))
    for path in broken.parent.glob("memory.db*"):  # a new file, whatever still holds the old
        path.unlink()
    broken.write_bytes(b"not a database " * 500)  # a disk that failed under it
    dsn = fresh_pg_dsn()
    code, out, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn)
    assert (code, out) == (1, ""), out
    assert err == f"neuralmind: {broken} (memory) cannot be read: file is not a database; " \
                  "nothing was copied\n"
    with psycopg.connect(dsn) as conn:  # not even the schema's bookkeeping
        assert conn.execute("SELECT to_regclass('nm_schema')").fetchone()[0] is None


def test_a_home_moves_into_postgres_whole_again_and_after_a_cut(served_home, tmp_path):
    home, seen = served_home
    dsn = fresh_pg_dsn()
    code, report, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn, "--json")
    checks = {(c["component"], c["what"]): (c["home"], c["database"]) for c in report["checks"]}
    assert code == 0 and report["verified"], err
    assert checks[("kernel", "events rows")] == (len(seen["events"]),) * 2
    assert checks[("kernel", "projects rows")] == (1, 1) and checks[("kernel", "jobs rows")] == (2, 2)
    assert checks[("auth", "tokens of the file in auth_tokens")] == (1, 1)
    assert checks[("webhooks", "deliveries rows")] == (len(seen["deliveries"]),) * 2
    pid = seen["project"]
    for table, n in (("memories", 2), ("memory_vectors", 2), ("memory_events", 3)):
        assert checks[("memory", f"all_{table} rows ({pid})")] == (n, n)
    head = checks[("tier2_audit", "audit chain head")]
    assert head[0] == head[1] and head[0].startswith(f"{len(seen['events'])}:")
    assert checks[("tier2_audit", "audit chain whole")] == ("yes", "yes")

    again = storage(home, "migrate", "--to", "postgres", "--dsn", dsn, "--json")[1]
    assert again["verified"] and again["checks"] == report["checks"]  # nothing doubled

    import psycopg
    with psycopg.connect(dsn, autocommit=True) as conn:  # a copy cut short
        conn.execute("DELETE FROM events WHERE id > 2")
        conn.execute("DELETE FROM jobs")
    code, text, _ = storage(home, "migrate", "--to", "postgres", "--dsn", dsn)
    assert code == 0 and "verified" in text and "MISMATCH" not in text

    code, check, _ = storage(home, "check", "--json", dsn=dsn)
    assert code == 0 and check["backend"] == "postgres"
    assert {c["component"]: c["pending"] for c in check["components"]} == {
        "kernel": 0, "auth": 0, "memory": 0, "webhooks": 0, "tier2_audit": 0, "tier2_seats": 0}
    assert all(c["size"] > 0 for c in check["components"])

    with LocalServer(tmp_path / "machine2", config=CONFIG,
                     storage={"backend": "postgres", "dsn": dsn}) as server:
        assert [p["id"] for p in server.get("/v1/projects").json["items"]] == [seen["project"]]
        assert [(e.id, e.kind) for e in server.kernel.events.after(0)] == seen["events"]
        # read before the event below, whose own delivery the hook queues on another thread
        moved = server.get(f"/v1/webhooks/{seen['hook']}/deliveries").json["items"]
        assert [(d["id"], d["status"]) for d in moved] == [
            (d["id"], d["status"]) for d in seen["deliveries"]]
        server.kernel.emit("memory.created", actor="alice")
        assert server.kernel.events.last_id() == seen["events"][-1][0] + 1  # ids go on
        memories = f"/v1/projects/{seen['project']}/memories"
        web, flaky = seen["memories"]
        for query, mode, mid in (("scripts in pages", "keyword", web["id"]),
                                 ("tests that fail when connections drop", "semantic", flaky["id"])):
            found = server.post(memories + "/search", {"query": query, "mode": mode}).json
            assert found["results"][0]["id"] == mid, (mode, found)
        moved = server.get(f"{memories}/{web['id']}").json
        assert {k: moved[k] for k in ("title", "tags", "confidence", "status", "updated_at")} == {
            k: web[k] for k in ("title", "tags", "confidence", "status", "updated_at")}
        assert server.get(f"{memories}/{web['id']}/history").json["items"] == web["history"]
        assert "ann" in [r.actor for r in server.kernel.state("auth").tokens.records().values()]
        # the team deletes on the database what the home still holds
        assert server.delete(f"{memories}/{flaky['id']}").status == 204
        assert server.delete(f"/v1/webhooks/{seen['hook']}").status == 204
        last = server.kernel.events.last_id()
    code, out, _ = run_cli("audit", "verify", "--json", env={
        "NEURALMIND_DATABASE_URL": dsn, "NEURALMIND_PLUGINS": ",".join(PLUGINS)})
    verdict = json.loads(out)
    assert code == 0 and verdict["whole"] and verdict["records"] >= len(seen["events"])

    # copying again would bring them back (the hook would deliver again): refused, one line
    code, out, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert (f"holds events up to #{last}, past this home's last (#{seen['events'][-1][0]}): "
            "a server wrote there since this home was copied") in err
    assert err.endswith("Nothing was copied: migrate into a new database (or a schema of its "
                        "own), or serve that one as it is\n")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM all_memories WHERE id = %s",
                            (flaky["id"],)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM hooks").fetchone()[0] == 0


def test_a_database_holding_another_homes_data_is_refused_copying_nothing(served_home,
                                                                          tmp_path):
    """A second home into a database a team already uses: its projects and memories would
    mix in and its events clash with the team's ids. Refused before anything is copied."""
    import psycopg
    home, seen = served_home
    dsn = fresh_pg_dsn()
    with LocalServer(tmp_path / "other", config=CONFIG,
                     storage={"backend": "postgres", "dsn": dsn}) as other:
        repo = tmp_path / "other-repo"
        repo.mkdir()
        theirs = other.register(repo)
    with psycopg.connect(dsn) as conn:
        last = conn.execute("SELECT id, kind, at FROM events ORDER BY id DESC").fetchone()
    assert last[0] <= seen["events"][-1][0]  # not past the home's own: the events differ
    code, text, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn)
    assert (code, text) == (2, "") and err.count("\n") == 1, err
    assert "holds data this home does not: its event #{} ({} at {}) is not this home's — " \
           "another home's data, or a server wrote there; copying would mix them. Nothing " \
           "was copied".format(*last) in err
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT id FROM projects").fetchall() == [(theirs,)]
        assert conn.execute("SELECT count(*) FROM all_memories WHERE project_id = %s",
                            (seen["project"],)).fetchone()[0] == 0


def test_wrong_input_says_what_is_wrong(tmp_path, served_home):
    home, _ = served_home
    code, _, err = storage(home, "migrate", "--to", "postgres")
    assert code == 2 and "--dsn postgresql://" in err
    code, _, err = storage(home, "migrate", "--to", "mysql", "--dsn", "x")
    assert code == 2 and "invalid choice: 'mysql'" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.toml").write_text(CONFIG)
    code, _, err = storage(empty, "migrate", "--to", "postgres", "--dsn", fresh_pg_dsn())
    assert code == 2 and "holds no NeuralMind state" in err
    typo = tmp_path / "typo"  # a mistyped NEURALMIND_HOME is not made
    assert run_cli("storage", "migrate", "--to", "postgres", "--dsn", fresh_pg_dsn(),
                   env={"NEURALMIND_HOME": str(typo)})[0] == 2 and not typo.exists()
    misspelt = tmp_path / "misspelt"
    misspelt.mkdir()
    (misspelt / "config.toml").write_text(CONFIG + '[storag]\nbackend = "postgres"\n')
    for argv in (("check",), ("migrate", "--to", "postgres", "--dsn", fresh_pg_dsn())):
        assert storage(misspelt, *argv) == (2, "", (
            f"neuralmind: [storag] in {misspelt / 'config.toml'} is no section of NeuralMind or "
            "of an installed plugin: did you mean [storage]?\n")), argv
    code, _, err = storage(home, "migrate", "--to", "postgres",
                           "--dsn", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    assert code == 1 and "cannot be reached" in err
    from psycopg.conninfo import make_conninfo
    stranger = make_conninfo(fresh_pg_dsn(), user="no_such_role", password="wrong")
    for argv, dsn in ((("migrate", "--to", "postgres", "--dsn", stranger), None),
                      (("check",), stranger)):  # a sign-in refused is no database down
        code, _, err = storage(home, *argv, dsn=dsn)
        assert code == 1 and "refused the sign-in: " in err and "cannot be reached" not in err
        assert 'role "no_such_role" does not exist' in err and "wrong" not in err, err
        assert err.endswith("check the user and password the DSN gives ([storage] dsn, --dsn "
                            "or NEURALMIND_DATABASE_URL) and that pg_hba.conf lets that user "
                            "connect from here\n"), err
    for argv, dsn in ((("migrate", "--to", "postgres", "--dsn", "notadsn secret"), None),
                      (("check",), "notadsn secret")):
        code, _, err = storage(home, *argv, dsn=dsn)
        assert code == 1 and "the database DSN is not one psycopg reads" in err, (argv, err)
        assert "secret" not in err


def test_a_nul_an_older_build_let_a_text_hold_is_copied_as_u_fffd_and_said(tmp_path):
    """An older home may hold a NUL in a text (SQLite keeps it, PostgreSQL's text cannot): the
    copy stopped there for ever, and no tool mends it — a title is fixed once written, SQLite's
    replace() stops at a NUL, and a delete writes the title into a history note. The copy
    writes each as U+FFFD and says which rows and columns it changed."""
    import sqlite3
    home = tmp_path / "home"
    (tmp_path / "repo").mkdir()
    with LocalServer(home, plugins=["auth", "memory"]) as server:
        pid = server.register(tmp_path / "repo")
        memories = f"/v1/projects/{pid}/memories"
        made = [server.post(memories, {"title": title, "rationale": "because"}).json["id"]
                for title in ("Escape HTML in templates", "Retry flaky network tests")]
    (home / "config.toml").write_text('[kernel]\nplugins = ["auth", "memory"]\n')
    file = tmp_path / "repo" / ".neuralmind" / "memory.db"
    with sqlite3.connect(file) as conn:  # written by a build before NUL was refused
        conn.execute("UPDATE memories SET title = ?, rationale = ? WHERE id = ?",
                     ("Retry\0flaky", "be\0cause", made[1]))
    dsn = fresh_pg_dsn()
    code, out, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn)
    assert code == 0 and "verified" in out, err
    said = f"memories id = '{made[1]}': title, rationale held a NUL character, copied as U+FFFD"
    assert f"\n{'':<12} {said}\n" in out
    code, report, _ = storage(home, "migrate", "--to", "postgres", "--dsn", dsn, "--json")
    assert code == 0 and report["verified"]
    [row] = [c for c in report["checks"] if c["what"] == f"all_memories rows ({pid})"]
    assert row["mended"] == [said]
    import psycopg
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT id, title, rationale FROM all_memories ORDER BY id").fetchall() \
            == sorted([(made[0], "Escape HTML in templates", "because"),
                       (made[1], "Retry\ufffdflaky", "be\ufffdcause")])


def test_a_row_postgres_refuses_is_named_where_it_is_mended(tmp_path):
    """A link to a record the home no longer holds (SQLite kept it: a file written with
    foreign keys off) breaks PostgreSQL's key: "run the same command again" failed the same
    way for ever. The copy names the file, table and row; mended there, it copies the rest."""
    import sqlite3
    home = tmp_path / "home"
    (tmp_path / "repo").mkdir()
    with LocalServer(home, plugins=["auth", "memory"]) as server:
        pid = server.register(tmp_path / "repo")
        mid = server.post(f"/v1/projects/{pid}/memories",
                          {"title": "Escape HTML", "rationale": "because"}).json["id"]
    (home / "config.toml").write_text('[kernel]\nplugins = ["auth", "memory"]\n')
    file = tmp_path / "repo" / ".neuralmind" / "memory.db"
    with sqlite3.connect(file) as conn:  # foreign keys are off unless a connection turns them on
        conn.execute("INSERT INTO memory_links (source, type, target, created_at) "
                     "VALUES (?, 'relates_to', 'gone', '2026-11-30T10:00:00.000Z')", (mid,))
    dsn = fresh_pg_dsn()
    code, out, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn)
    assert code == 1 and "verified" not in out
    head, advice = err.splitlines()
    assert head.startswith(f"neuralmind: the copy stopped: PostgreSQL refuses the row of "
                           f"memory_links in {file} where source = '{mid}' and type = "
                           "'relates_to' and target = 'gone': "), head
    assert advice == ("Mend that row in the file (with the home's server stopped), then run "
                      "the same command again: what was copied stays.")
    with sqlite3.connect(file) as conn:
        conn.execute("DELETE FROM memory_links WHERE target = 'gone'")
    code, report, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn, "--json")
    assert code == 0 and report["verified"], err


def test_an_audit_record_holding_a_nul_is_refused_not_mended(tmp_path):
    """An audit record an older build wrote with a NUL in its target (a refused request's
    path): written as U+FFFD, the copied chain would never verify — the hash covers the NUL.
    That row is named and nothing of the trail is changed."""
    import sqlite3
    from plugins.tier2_bridge.audit import GENESIS, chain_hash
    home = tmp_path / "home"
    (tmp_path / "repo").mkdir()
    with LocalServer(home, plugins=["auth", "tier2_bridge"]) as server:
        server.register(tmp_path / "repo")  # an event, and its audit record
        bridge(server.kernel).trail.sync()
    (home / "config.toml").write_text('[kernel]\nplugins = ["auth", "tier2_bridge"]\n')
    file = home / "audit.db"
    with sqlite3.connect(file) as conn:
        conn.row_factory = sqlite3.Row
        last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev = (last["seq"] + 1, last["hash"]) if last else (1, GENESIS)
        record = {"seq": seq, "at": "2026-11-30T10:00:00.000Z", "actor": "local",
                  "action": "api.call", "project": None, "target": "DELETE /v1/x/a\0b 422",
                  "request_id": "r1"}
        conn.execute("INSERT INTO audit (seq, at, actor, action, project, target, request_id, "
                     "prev_hash, hash) VALUES (:seq, :at, :actor, :action, :project, :target, "
                     ":request_id, :prev, :hash)",
                     {**record, "prev": prev, "hash": chain_hash(prev, record)})
    dsn = fresh_pg_dsn()
    code, out, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn)
    assert code == 1 and "U+FFFD" not in out, out
    assert err == (f"neuralmind: the copy stopped: PostgreSQL refuses the row of audit in {file} "
                   f"where seq = {seq}: PostgreSQL's text cannot hold its NUL character.\n"
                   "An audit record cannot be mended: the chain's hashes cover it. Keep the "
                   "trail as it is (`neuralmind audit export --out FILE`, and the head "
                   "`neuralmind audit verify` prints), move audit.db out of the home, then run "
                   "the same command again: the database's trail is made anew from the event "
                   "log.\n")
    import psycopg
    with psycopg.connect(dsn) as conn:  # none of the trail went in part
        assert conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 0
    file.rename(tmp_path / "audit.db")  # as the remedy says: the same command then goes through
    code, report, err = storage(home, "migrate", "--to", "postgres", "--dsn", dsn, "--json")
    assert code == 0 and report["verified"], err
