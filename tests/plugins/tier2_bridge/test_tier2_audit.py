"""The audit trail end to end: 4 gunicorn workers writing at once make one unbroken chain
holding every kernel event; the admin route pages and filters it; verify and export read it."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import redirect_stdout

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuralmind import encode_cursor
from plugins.tier2_bridge.audit import GENESIS, chain_hash
from tests.plugins.tier2_bridge.helpers import MEMORIES, PLUGINS, PROJECTS, audit_cli, \
    audit_rows, copy_db, kernel_events, verify
from tests.support import pythonpath


def test_concurrent_writers_make_one_chain_with_every_event(busy):
    rows = audit_rows(busy.home)
    events = kernel_events(busy.home)
    # registrations, memory creates and removals, each with its api.call
    assert len(events) == 2 * (PROJECTS + MEMORIES + PROJECTS // 2)
    assert [r["seq"] for r in rows] == list(range(1, len(events) + 1))
    assert [(r["action"], r["request_id"], r["actor"], r["project"], r["at"]) for r in rows] == \
        [(e["kind"], e["request_id"], e["actor"], e["project_id"], e["at"]) for e in events]
    prev = GENESIS
    for row in rows:
        assert row["prev_hash"] == prev and row["hash"] == chain_hash(prev, row)
        prev = row["hash"]
    code, verdict = verify(busy.home)
    assert code == 0 and verdict["whole"] is True
    assert (verdict["records"], verdict["head_hash"]) == (len(rows), rows[-1]["hash"])


def test_records_name_their_target(busy):
    rows = audit_rows(busy.home)
    calls = [r for r in rows if r["action"] == "api.call"]
    assert len(calls) == PROJECTS + MEMORIES + PROJECTS // 2
    assert sum(r["target"] == "POST /v1/projects 201" for r in calls) == PROJECTS
    deletes = [r for r in calls if r["target"].startswith("DELETE /v1/projects/p_")]
    assert len(deletes) == PROJECTS // 2 and all(r["target"].endswith(" 204") for r in deletes)
    creates = [r for r in rows if r["action"] == "memory.created"]
    assert len(creates) == MEMORIES and len({r["target"] for r in creates}) == MEMORIES
    for rec in creates[:5]:
        r = busy.get(f"/v1/projects/{rec['project']}/memories/{rec['target']}")
        assert r.status == 200 and r.json["id"] == rec["target"]


def test_admin_route_pages_through_the_whole_trail(busy):
    rows = audit_rows(busy.home)
    seen, cursor = [], None
    while True:
        r = busy.get("/v1/admin/audit?limit=50" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200
        seen += r.json["items"]
        cursor = r.json["next_cursor"]
        if cursor is None:
            break
    # the GETs themselves are not writes, so the trail did not grow while we paged
    assert seen == rows


def test_admin_route_filters(busy):
    rows = audit_rows(busy.home)
    removed = [r for r in rows if r["action"] == "project.removed"]
    r = busy.get("/v1/admin/audit?action=project.removed&limit=200")
    assert r.json["items"] == removed
    r = busy.get("/v1/admin/audit?action=project.*&limit=200")
    assert [i["action"] for i in r.json["items"]] == [x["action"] for x in rows
                                                      if x["action"].startswith("project.")]
    pid = removed[0]["project"]  # a removed project never had memories
    r = busy.get(f"/v1/admin/audit?project={pid}")
    assert [i["action"] for i in r.json["items"]] == ["project.registered", "project.removed",
                                                      "api.call"]  # the DELETE names the project
    assert busy.get("/v1/admin/audit?actor=someone-else").json["items"] == []
    assert len(busy.get("/v1/admin/audit?actor=local&limit=200").json["items"]) == 200
    middle = rows[len(rows) // 2]["at"]
    r = busy.get(f"/v1/admin/audit?since={middle}&limit=200")
    assert r.json["items"] == [x for x in rows if x["at"] >= middle][:200]
    last = rows[-3]["seq"]  # a poller keeps the last seq it read and asks for what came after
    assert busy.get(f"/v1/admin/audit?after={last}").json["items"] == rows[-2:]
    r = busy.get(f"/v1/admin/audit?after=1&cursor={encode_cursor(5)}")
    assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["query", "after"]
    between = middle[:-1] + "1Z"  # 0.1 ms after a record's time: that record is before it
    r = busy.get(f"/v1/admin/audit?since={between}&limit=200")
    assert r.json["items"] == [x for x in rows if x["at"] > middle][:200]
    assert busy.get("/v1/admin/audit?since=2999-01-01T00:00:00Z").json["items"] == []
    day = middle[:10]
    extended = busy.get(f"/v1/admin/audit?since={day}&limit=200").json["items"]
    assert extended == [x for x in rows if x["at"] >= day][:200]
    basic = day.replace("-", "")  # ISO 8601's basic forms, as `token create --expires` reads them
    for since in (basic, f"{basic}T000000Z", f"{basic}T000000%2B00:00"):
        assert busy.get(f"/v1/admin/audit?since={since}&limit=200").json["items"] == extended


def test_admin_route_refuses_bad_queries_with_the_envelope(busy):
    huge = [f"cursor={encode_cursor(n)}" for n in (2 ** 63, 10 ** 20, -1)]  # no row's number
    huge += ["after=-1", f"after={2 ** 63}", "after=x"]
    for query in ("limit=0", "limit=201", "since=yesterday", "cursor=%%%", "cursor=ImEi",
                  "since=0001-01-01T00:00:00%2B01:00", *huge):
        r = busy.get(f"/v1/admin/audit?{query}")
        assert r.status == 422, query
        assert r.error["code"] == "validation_error"
    # pydantic's Unix times, and eight digits that are no day (a basic date is YYYYMMDD)
    for unix in ("0", "1780000000", "-1", "0.5", "1780000000.5", "12345678",
                 "%EF%BC%92%EF%BC%90%EF%BC%92%EF%BC%96%EF%BC%91%EF%BC%92%EF%BC%90%EF%BC%92"):
        r = busy.get(f"/v1/admin/audit?since={unix}")  # the last: ２０２６１２０２
        assert (r.status, r.error["code"]) == (422, "validation_error"), unix
        [error] = r.error["details"]["errors"]
        assert error["loc"] == ["query", "since"] and "never as a Unix time" in error["msg"], error
    assert busy.get("/v1/admin/audit", auth=False).status == 401


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(params=st.dictionaries(st.sampled_from(["actor", "action", "project", "since", "cursor",
                                               "limit"]),
                              st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]),
                                      max_size=30)))
def test_admin_route_never_fails_on_any_query(busy, params):
    from urllib.parse import urlencode
    r = busy.get("/v1/admin/audit?" + urlencode(params))
    assert r.status in (200, 422), r.body
    if r.status == 200:
        for item in r.json["items"]:
            for key in ("actor", "project"):
                if key in params:
                    assert item[key] == params[key]
    else:
        assert r.error["code"] == "validation_error"


def test_export_writes_every_record_as_json_lines(busy, tmp_path):
    out = tmp_path / "audit.jsonl"
    done = audit_cli(busy.home, "export", "--home", str(busy.home), "--out", str(out))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == audit_rows(busy.home)
    assert out.stat().st_mode & 0o777 == 0o600
    to_stdout = audit_cli(busy.home, "export", "--home", str(busy.home))
    assert [json.loads(x) for x in to_stdout.stdout.splitlines()] == lines


def test_export_to_dev_stdout_writes_where_the_shell_sent_it(busy, tmp_path):
    """`--out /dev/stdout > FILE`: /dev/stdout leads to a regular file, so export made its
    temporary file in /dev and renamed it over /dev/stdout (as root: the link replaced by a
    file, FILE left empty). A name in /dev, or a link leading there, is written as it is."""
    env = {**os.environ, "NEURALMIND_PLUGINS": ",".join(PLUGINS), "PYTHONPATH": pythonpath()}
    export = [sys.executable, "-m", "neuralmind.cli", "audit", "export", "--home", str(busy.home)]
    into = tmp_path / "into.jsonl"
    with into.open("w") as shell:  # `… --out /dev/stdout > into.jsonl`
        done = subprocess.run([*export, "--out", "/dev/stdout"], stdout=shell,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("exported ") and done.stderr.endswith(" to /dev/stdout\n")
    assert [json.loads(x) for x in into.read_text().splitlines()] == audit_rows(busy.home)
    assert os.path.islink("/dev/stdout")  # still the link it was
    link = tmp_path / "out"  # a link to /dev/stdout, the output a pipe
    link.symlink_to("/dev/stdout")
    done = subprocess.run([*export, "--out", str(link)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == into.read_text() and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["into.jsonl", "out"]


class ClosedPipe(io.StringIO):
    """Standard output whose reader has gone (``neuralmind audit export | head -1``)."""

    def __init__(self, spare_fd: int):
        super().__init__()
        self.spare_fd = spare_fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self.spare_fd


def test_export_to_a_reader_that_stopped_reading_ends_quietly(busy, tmp_path, monkeypatch,
                                                               capsys):
    from neuralmind.cli import main
    monkeypatch.setenv("NEURALMIND_PLUGINS", ",".join(PLUGINS))
    with open(tmp_path / "spare", "w") as spare, redirect_stdout(ClosedPipe(spare.fileno())):
        code = main(["audit", "export", "--home", str(busy.home)])
    assert (code, capsys.readouterr().err) == (0, "")


def test_the_trail_refuses_updates_and_deletes(busy, tmp_path):
    copy_db(busy.home / "audit.db", tmp_path / "audit.db")
    conn = sqlite3.connect(tmp_path / "audit.db")
    try:
        for sql in ("UPDATE audit SET actor = 'x' WHERE seq = 1",
                    "DELETE FROM audit WHERE seq = 1"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(sql)
    finally:
        conn.close()


def test_tokens_made_before_the_first_start_are_in_the_trail(tmp_path):
    """The bootstrap the server's start-up message recommends: `token create` (and `revoke`)
    in a home no server has used yet. The CLI makes the kernel's event log (its migrations)
    to record them, so the first server's trail holds the creation of its first admin token.
    (The events were dropped when kernel.db did not exist yet, without a word.)"""
    from tests.plugins.auth.helpers import cli, create_token, server_config
    from tests.support import LocalServer
    home = tmp_path / "home"
    config = tmp_path / "server.toml"
    config.write_text(server_config(tmp_path, {"a": tmp_path / "repo-a"}))
    admin = create_token(home, config, "boss", "admin")
    spare = create_token(home, config, "spare", "reader")
    assert cli(home, "token", "revoke", spare["id"], config=config).stderr == ""
    assert (home / "kernel.db").exists()
    assert [(e["kind"], json.loads(e["data"])["token_id"], e["actor"].startswith("cli:"))
            for e in kernel_events(home)] == [("token.created", admin["id"], True),
                                             ("token.created", spare["id"], True),
                                             ("token.revoked", spare["id"], True)]
    with LocalServer(home, config=config.read_text(), plugins=PLUGINS) as server:
        r = server.get("/v1/admin/audit", token=admin["token"])
        assert r.status == 200
        assert [(x["seq"], x["action"], x["target"]) for x in r.json["items"]] == [
            (1, "token.created", admin["id"]), (2, "token.created", spare["id"]),
            (3, "token.revoked", spare["id"])]
    code, verdict = verify(home)
    assert code == 0 and verdict["records"] == 3
