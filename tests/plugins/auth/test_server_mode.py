"""Server mode end to end, served from this process: tokens made by the CLI, and every
route of the generated OpenAPI document tried with every role. What takes several workers
(a revocation or a rate limit seen by all of them) is in test_server_mode_workers.py."""

from __future__ import annotations

import http.client
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kernel.auth import ROLES
from plugins.auth.tokens import TokenError, iso, now, parse_expiry
from tests.plugins.auth.helpers import (cli, create_token, events, replay_events,
                                        server_config)
from tests.support import DEFAULT_PLUGINS, ROOT, LocalServer, request

SECURITY_MD = ROOT / "docs" / "security.md"

LIMITED = """
limited = { rate = 0.5, burst = 3 }
[kernel]
sse_heartbeat_s = 0.5
[auth.roles]
limited = ["auth.whoami", "system.read"]
auditor = ["events.read", "events.global", "system.read"]
"""


@dataclass
class Team:
    server: LocalServer
    config: Path
    tokens: dict[str, str]  # role → token reaching every project
    only_a: dict[str, str]  # role → token reaching project "a" only
    permissions: dict[str, tuple[str, ...]]  # permission → default roles, as registered

    def token(self, actor: str, role: str, projects: str = "*", *extra: str) -> dict:
        return create_token(self.server.home, self.config, actor, role, projects, *extra)


def server_tokens(team: Team):
    """The server's token store: tokens.json, or the shared database's table."""
    return team.server.kernel.state("auth").tokens


@pytest.fixture(scope="module")
def team(tmp_path_factory, backend):
    root = tmp_path_factory.mktemp("team")
    plugins = list(DEFAULT_PLUGINS)
    config = server_config(root, {"a": root / "repo-a", "b": root / "repo-b"}, LIMITED)
    with LocalServer(root / "home", config=config, plugins=plugins) as server:
        cfg = server.home / "config.toml"
        tokens = {r: create_token(server.home, cfg, f"{r}-all", r)["token"] for r in ROLES}
        only_a = {r: create_token(server.home, cfg, f"{r}-a", r, "a")["token"] for r in ROLES}
        # the permissions and default roles the plugins registered, read from the kernel
        perms = {name: perm.roles for name, perm in server.kernel.permissions.items()}
        yield Team(server, cfg, tokens, only_a, perms)


def probe(port: int, method: str, path: str, token: str, body: bool) -> tuple[int, dict]:
    """One request; an event stream is judged by its status line and headers alone."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {token}"}
    if body:
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method.upper(), path, body=b"{}" if body else None, headers=headers)
        r = conn.getresponse()
        if "event-stream" in (r.getheader("Content-Type") or ""):
            return r.status, {}
        raw = r.read()
        import json
        return r.status, (json.loads(raw).get("error", {}) if raw and r.status >= 400 else {})
    finally:
        conn.close()


def operations(doc: dict):
    """``(method, concrete path, permission, has body)`` for every protected operation."""
    for template, methods in doc["paths"].items():
        for method, op in methods.items():
            if "x-permission" not in op:
                continue
            path = template.replace("{project_id}", "a")
            for param in op.get("parameters", []):
                if param["in"] == "path" and param["name"] != "project_id":
                    path = path.replace("{" + param["name"] + "}", "zz-missing")
            yield method, path, op["x-permission"], "requestBody" in op


def test_every_route_allows_and_denies_by_role(team):
    doc = request(team.server.port, "GET", "/v1/openapi.json").json
    ops = list(operations(doc))
    assert {"jobs.cancel", "tokens.manage", "projects.read"} <= {p for _, _, p, _ in ops}
    seen = []
    for role in ROLES:
        for method, path, perm, body in ops:
            status, err = probe(team.server.port, method, path, team.tokens[role], body)
            where = f"{role} {method.upper()} {path} ({perm}) → {status} {err}"
            assert status < 500, where
            if role in team.permissions[perm]:
                assert status != 401 and err.get("code") != "forbidden", where
            else:
                assert status == 403 and err["code"] == "forbidden", where
                assert err["details"]["permission"] == perm, where
            seen.append((role, method, path))
    assert len(seen) == 3 * len(ops)


def documented_roles() -> dict[str, set[str]]:
    """permission → the roles ticked for it in security.md's "Roles and permissions" table
    (backticked names outside the parenthesised remarks)."""
    table = SECURITY_MD.read_text().split("### Roles and permissions", 1)[1].split("###", 1)[0]
    out: dict[str, set[str]] = {}
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        names, *ticks = line.strip().strip("|").split("|")
        roles = {role for role, tick in zip(ROLES, ticks) if "✓" in tick}
        for name in re.findall(r"`([a-z_]+\.[a-z_]+)`", re.sub(r"\([^)]*\)", "", names)):
            out[name] = roles
    return out


def test_security_md_lists_every_registered_permission_with_its_roles(team):
    documented = documented_roles()
    wrong = {name: (sorted(roles), sorted(documented.get(name, ())))
             for name, roles in team.permissions.items() if documented.get(name) != set(roles)}
    assert not wrong, f"permission: (registered roles, documented roles) {wrong}"


def test_admin_only_operations(team):
    for name in ("jobs.cancel", "tokens.manage", "memories.delete"):
        if name in team.permissions:
            assert team.permissions[name] == ("admin",), name


def test_whoami_lists_exactly_the_role_permissions(team):
    for role in ROLES:
        r = team.server.get("/v1/auth/whoami", token=team.tokens[role])
        assert r.status == 200
        expected = sorted(p for p, roles in team.permissions.items() if role in roles)
        assert r.json["permissions"] == expected
        assert r.json["actor"] == f"{role}-all" and r.json["kind"] == "token"


def test_token_for_project_a_gets_404_on_project_b_on_every_route(team):
    doc = request(team.server.port, "GET", "/v1/openapi.json").json
    scoped = [(m, p, perm, b) for m, p, perm, b in operations(doc) if p.startswith("/v1/projects/a")]
    assert scoped
    for role in ROLES:
        for method, path, perm, body in scoped:
            other = path.replace("/v1/projects/a", "/v1/projects/b", 1)
            status, err = probe(team.server.port, method, other, team.only_a[role], body)
            assert (status, err.get("code")) == (404, "project_not_found"), (role, method, other)
            # indistinguishable from a project that does not exist: no existence leak
            unknown = path.replace("/v1/projects/a", "/v1/projects/nope", 1)
            status2, err2 = probe(team.server.port, method, unknown, team.only_a[role], body)
            assert (status2, err2["code"], err2["message"].replace("nope", "b")) == \
                (status, err["code"], err["message"])
        listing = team.server.get("/v1/projects", token=team.only_a[role])
        assert [p["id"] for p in listing.json["items"]] == ["a"]
        assert team.server.get("/v1/jobs?project=b", token=team.only_a[role]).error["code"] == \
            "project_not_found"


def test_reader_never_sees_project_paths(team):
    reader = team.server.get("/v1/projects/a", token=team.tokens["reader"]).json
    builder = team.server.get("/v1/projects/a", token=team.tokens["builder"]).json
    assert reader["path"] is None
    assert builder["path"].endswith("repo-a")
    assert all(p["path"] is None for p in
               team.server.get("/v1/projects", token=team.tokens["reader"]).json["items"])


def test_revoke_by_actor_and_list_never_shows_secrets(team):
    first, second = team.token("dave", "builder"), team.token("dave", "reader", "a")
    listing = cli(team.server.home, "token", "list", config=team.config).stdout
    assert first["id"] in listing and second["id"] in listing
    assert first["token"] not in listing and second["token"] not in listing
    stored = repr(server_tokens(team).listing())  # the hashes and records, as stored
    assert first["id"] in stored and first["token"] not in stored
    out = cli(team.server.home, "token", "revoke", "--actor", "dave", config=team.config).stdout
    assert first["id"] in out and second["id"] in out
    created = {e["data"]["token_id"]: e["data"] for e in events(team.server.home, "token.created")}
    revoked = {e["data"]["token_id"]: e["data"] for e in events(team.server.home, "token.revoked")}
    for made in (first, second):  # the same shape as token.created's, projects included
        assert revoked[made["id"]] == created[made["id"]] == {
            "token_id": made["id"], "token_actor": "dave", "role": made["role"],
            "projects": made["projects"]}
    for made in (first, second):
        assert team.server.get("/v1/projects", token=made["token"]).status == 401
    for args, says in ((("token", "revoke"), "give a token id (`neuralmind token list` shows "
                                             "them) or --actor"),
                       (("token", "revoke", first["id"], "--actor", "dave"),
                        "or --actor, not both"),
                       (("token", "revoke", "--actor", " "),
                        "--actor must not be empty: name whose tokens to revoke"),
                       (("token", "create", "--actor", "a" * 201, "--role", "reader"),
                        "--actor is 201 characters long: a name has at most 200 (it is shown "
                        "in every list, event and history entry)")):
        done = cli(team.server.home, *args, config=team.config, check=False)
        assert done.returncode == 2 and done.stderr.strip().endswith(says), done.stderr


def test_create_prints_the_token_alone_on_the_last_line(team):
    done = cli(team.server.home, "token", "create", "--actor", "erin", "--role", "reader",
               "--projects", "a,b", config=team.config)
    token = done.stdout.strip().splitlines()[-1]
    assert token.startswith("nm_") and " " not in token
    assert team.server.get("/v1/auth/whoami", token=token).json["projects"] == ["a", "b"]
    bad = cli(team.server.home, "token", "create", "--actor", "x", "--role", "root",
              config=team.config, check=False)
    assert bad.returncode == 2 and "--role" in bad.stderr
    bad = cli(team.server.home, "token", "create", "--actor", "x", "--role", "reader",
              "--projects", "a,zzz", config=team.config, check=False)
    assert bad.returncode == 2 and "zzz" in bad.stderr


def test_create_refuses_an_expiry_not_in_the_future_and_an_empty_actor(team):
    for expires in ("0d", "0m", "-3h", "2020-01-01"):
        done = cli(team.server.home, "token", "create", "--actor", "nobody", "--role", "reader",
                   f"--expires={expires}", config=team.config, check=False)
        assert done.returncode == 2 and f"--expires {expires!r} is not in the future" in \
            done.stderr, (expires, done.stderr)
    done = cli(team.server.home, "token", "create", "--actor", "nobody", "--role", "reader",
               "--expires=99999999999d", config=team.config, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--expires '99999999999d' is too far ahead" in done.stderr, done.stderr
    for actor in ("", "   "):
        done = cli(team.server.home, "token", "create", "--actor", actor, "--role", "reader",
                   config=team.config, check=False)
        assert done.returncode == 2 and "--actor must not be empty" in done.stderr, done.stderr
    listed = json.loads(cli(team.server.home, "token", "list", "--json", config=team.config).stdout)
    assert not {"nobody", "", "   "} & {t["actor"] for t in listed}


def test_create_refuses_an_expiry_past_the_year_9999_or_empty(team):
    for expires, says in (("9999-12-31", "--expires '9999-12-31' is too far ahead"),
                          ("9999-12-31T23:59:59-05:00", "is too far ahead: past the year 9999"),
                          ("", "--expires is empty: leave it out for a token that never expires"),
                          (" ", "--expires is empty")):
        done = cli(team.server.home, "token", "create", "--actor", "late", "--role", "reader",
                   f"--expires={expires}", config=team.config, check=False)
        [line] = done.stderr.splitlines()
        assert done.returncode == 2 and line.startswith("neuralmind: ") and says in line, done
    listed = json.loads(cli(team.server.home, "token", "list", "--json", config=team.config).stdout)
    assert "late" not in {t["actor"] for t in listed}


def test_create_refuses_names_that_do_not_print(team):
    """A newline or another control character in a name would break `token list`'s lines."""
    for args, says in ((("--actor", "a\nb"), "--actor 'a\\nb' holds a character that does not "
                                             "print"),
                       (("--actor", "a\x1b[2Jb"), "holds a character that does not print"),
                       (("--actor", "ok", "--projects", "a,b\tc"),
                        "--projects 'a,b\\tc' holds a character that does not print")):
        done = cli(team.server.home, "token", "create", "--role", "reader", *args,
                   config=team.config, check=False)
        [line] = done.stderr.splitlines()
        assert done.returncode == 2 and says in line, done
    listed = cli(team.server.home, "token", "list", config=team.config).stdout.splitlines()
    assert all(re.match(r"^[0-9a-f]{8}  ", line) for line in listed[1:]), listed


def test_loopback_token_commands_refuse_in_server_mode(team):
    """A team server neither reads nor makes the loopback token: printing one would hand out
    a credential it answers with 401."""
    for command in ("show", "rotate"):
        done = cli(team.server.home, "token", command, config=team.config, check=False)
        assert (done.returncode, done.stdout) == (2, ""), done
        assert "server mode" in done.stderr and "`neuralmind token create" in done.stderr
    assert not (team.server.home / "token").exists()
    assert events(team.server.home, "token.rotated") == []


def test_expired_and_expiring_tokens(team):
    token, _, _ = server_tokens(team).create("frank", "admin", "*", iso(now()))
    r = team.server.get("/v1/projects", token=token)
    assert (r.status, r.error["code"]) == (401, "token_expired")
    made = team.token("gina", "reader", "*", "--expires", "30d")
    assert made["expires_at"] and team.server.get("/v1/projects", token=made["token"]).status == 200
    today = now().date()  # a date, in any ISO form: through that day, so today's still serves
    year, week, weekday = today.isocalendar()
    for form in (today.isoformat(), today.strftime("%Y%m%d"), f"{year}-W{week:02}-{weekday}",
                 f"{year}W{week:02}{weekday}"):
        made = team.token("hana", "reader", "*", "--expires", form)
        assert made["expires_at"] == f"{today + timedelta(days=1)}T00:00:00.000Z", form
        assert team.server.get("/v1/projects", token=made["token"]).status == 200
    # a date stored by hand reads as --expires reads it: through that day
    for day, status in ((today, 200), (today - timedelta(days=1), 401)):
        token, _, _ = server_tokens(team).create("ivy", "reader", "*", day.isoformat())
        assert team.server.get("/v1/projects", token=token).status == status, day
    made = team.token("jo", "reader", "*", "--expires", "2099-01-01T00:00:00.600Z")
    assert made["expires_at"] == "2099-01-01T00:00:01.000Z"  # whole seconds, never cut short


def test_an_expiry_is_stored_in_whole_seconds_never_before_it():
    """A fraction cut off after the "is it ahead?" check would make a token born expired."""
    start = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
    assert parse_expiry("2026-12-02T13:00:00.600Z", start) == "2026-12-02T13:00:01Z"
    assert parse_expiry("2026-12-02T14:00:00.000001+01:00", start) == "2026-12-02T13:00:01Z"
    assert parse_expiry("15m", start + timedelta(microseconds=1)) == "2026-12-02T13:15:01Z"
    with pytest.raises(TokenError, match="not in the future"):  # not raised into the future
        parse_expiry("2026-12-02T12:59:59.5Z", start)


def test_credentials_only_in_the_header(team):
    token = team.tokens["admin"]
    for name in ("token", "access_token", "api_key"):
        r = team.server.get(f"/v1/projects?{name}={token}", auth=False)
        assert (r.status, r.error["code"]) == (400, "token_in_query")
        r = team.server.get(f"/v1/projects?{name}={token}", token=token)
        assert r.status == 400
    assert team.server.get("/v1/projects", auth=False).status == 401
    r = team.server.get("/v1/projects", auth=False, headers={"Authorization": f"Token {token}"})
    assert r.status == 401 and r.headers["www-authenticate"] == "Bearer"
    assert not (team.server.home / "token").exists()  # no loopback token in server mode


def test_host_check_uses_public_hosts(team):
    token = team.tokens["reader"]
    r = team.server.get("/v1/projects", token=token, headers={"Host": "evil.example"})
    assert (r.status, r.error["code"]) == (403, "host_not_allowed")
    assert team.server.get("/v1/projects", token=token, headers={"Host": "nm.internal:8765"}).status == 200


def test_two_mib_body_is_refused_and_changes_nothing(team):
    before = events(team.server.home, "api.call")
    r = team.server.request("POST", "/v1/projects", token=team.tokens["admin"],
                            body=b"{" + b" " * (2 * 1024 * 1024) + b"}",
                            headers={"Content-Type": "application/json"})
    assert (r.status, r.error["code"]) == (413, "payload_too_large")
    assert events(team.server.home, "api.call") == before


def test_a_body_claiming_actor_or_role_is_ignored(team, tmp_path):
    claim = {"path": str(tmp_path), "actor": "admin-all", "role": "admin", "projects": "*"}
    r = team.server.post("/v1/projects", claim, token=team.tokens["reader"],
                         headers={"X-Request-Id": "claim-reader"})
    assert (r.status, r.error["code"]) == (403, "forbidden")
    assert "reader-all" in r.error["message"]
    r = team.server.post("/v1/projects", claim, token=team.tokens["builder"],
                         headers={"X-Request-Id": "claim-builder"})
    assert (r.status, r.error["code"]) == (403, "registration_disabled")
    calls = {e["request_id"]: e for e in events(team.server.home, "api.call")}
    assert calls["claim-reader"]["actor"] == "reader-all"
    assert calls["claim-reader"]["data"]["role"] == "reader"
    assert calls["claim-builder"]["actor"] == "builder-all"


def test_api_call_events_record_who_did_what(team):
    r = team.server.delete("/v1/jobs/nope", token=team.tokens["admin"],
                           headers={"X-Request-Id": "cancel-1"})
    assert r.status == 404
    r = team.server.delete("/v1/projects/a", token=team.tokens["admin"],
                           headers={"X-Request-Id": "unregister-1"})
    assert r.status == 403
    team.server.get("/v1/projects", token=team.tokens["admin"], headers={"X-Request-Id": "read-1"})
    calls = {e["request_id"]: e for e in events(team.server.home, "api.call")}
    assert calls["cancel-1"]["data"] == {"permission": "jobs.cancel", "method": "DELETE",
                                         "path": "/v1/jobs/nope", "status": 404, "role": "admin",
                                         "token_id": calls["cancel-1"]["data"]["token_id"]}
    assert calls["cancel-1"]["actor"] == "admin-all" and calls["cancel-1"]["project_id"] is None
    assert calls["unregister-1"]["project_id"] == "a"
    assert calls["unregister-1"]["data"]["permission"] == "projects.write"
    assert "read-1" not in calls  # reads are not api.call events


def test_tokens_over_http_are_admin_only_and_revocable(team):
    made = team.token("hank", "reader")
    listing = team.server.get("/v1/auth/tokens", token=team.tokens["admin"]).json["items"]
    assert {"id": made["id"], "actor": "hank"}.items() <= next(
        t for t in listing if t["id"] == made["id"]).items()
    assert all("token" not in t for t in listing)
    assert team.server.get("/v1/auth/tokens", token=team.tokens["builder"]).status == 403
    assert team.server.delete(f"/v1/auth/tokens/{made['id']}", token=team.tokens["admin"]).status == 204
    assert team.server.get("/v1/projects", token=made["token"]).status == 401
    r = team.server.delete(f"/v1/auth/tokens/{made['id']}", token=team.tokens["admin"])
    assert (r.status, r.error["code"]) == (404, "token_not_found")
    revoked = [e for e in events(team.server.home, "token.revoked") if e["actor"] == "admin-all"]
    assert revoked[-1]["data"] == {"token_id": made["id"], "token_actor": "hank",
                                   "role": "reader", "projects": "*"}


def test_every_project_is_null_in_whoami_and_star_in_token_listings(team):
    """Two models, two spellings of "every project": ``WhoAmI.projects`` null (as for the
    loopback user), ``TokenOut.projects`` "*" (as the tokens file holds it); security.md says so."""
    made = team.token("ivy", "reader", "*")
    assert team.server.get("/v1/auth/whoami", token=made["token"]).json["projects"] is None
    listed = json.loads(cli(team.server.home, "token", "list", "--json", config=team.config).stdout)
    over_http = team.server.get("/v1/auth/tokens", token=team.tokens["admin"]).json["items"]
    for items in (listed, over_http):
        assert next(t for t in items if t["id"] == made["id"])["projects"] == "*"
    whoami = next(line for line in SECURITY_MD.read_text().splitlines()
                  if line.startswith("| `GET /v1/auth/whoami`"))
    assert "`null`" in whoami and '`"*"`' in whoami, whoami


def test_events_of_no_project_are_for_admins_and_auditors(team):
    """Token changes name actors, roles and other projects: a reader of project "a" sees the
    events of "a", never those of no project; an admin sees both, an auditor the global ones."""
    made = team.token("kim", "reader", "a")
    assert team.server.delete(f"/v1/auth/tokens/{made['id']}",
                              token=team.tokens["admin"]).status == 204  # token.revoked
    r = team.server.post("/v1/projects/a/memories", {"title": "events", "rationale": "seen"},
                         token=team.tokens["builder"])
    assert r.status == 201  # memory.created in project a
    auditor = team.token("olga", "auditor")["token"]
    reader = replay_events(team.server.port, team.only_a["reader"])
    assert {e["kind"] for e in reader} >= {"memory.created"}
    assert all(e["project_id"] == "a" for e in reader)
    admin = {e["kind"] for e in replay_events(team.server.port, team.tokens["admin"])}
    assert {"token.revoked", "memory.created"} <= admin
    # the auditor role (events.read, events.global) reads no project: global events only
    audited = replay_events(team.server.port, auditor)
    assert "token.revoked" in {e["kind"] for e in audited}
    assert all(e["project_id"] is None for e in audited)


def test_an_open_event_stream_ends_when_its_token_is_revoked(team):
    """Revoking a token ends what it has open: its event stream sends nothing more and
    closes (asked before each batch and heartbeat, without charging its rate limit), while
    another token's stream goes on."""
    from types import SimpleNamespace

    from tests.support import SSE
    gone, kept = team.token("erin", "reader", "a"), team.token("fred", "reader", "a")

    def follow(token: str) -> SSE:  # retried as the dashboard does while the module's
        deadline = time.monotonic() + 15  # earlier streams still hold the server's slots
        while (stream := SSE(SimpleNamespace(port=team.server.port, token=token),
                             "?kind=memory.created")).resp.status == 503:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert stream.resp.status == 200
        return stream

    streams = [follow(made["token"]) for made in (gone, kept)]
    try:
        team.server.kernel.emit("memory.created", project="a", data={"id": "before"})
        assert all(len(s.wait(1)) == 1 for s in streams)
        cli(team.server.home, "token", "revoke", gone["id"], config=team.config)
        deadline = time.monotonic() + 5
        while team.server.get("/v1/projects", token=gone["token"]).status != 401:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        team.server.kernel.emit("memory.created", project="a", data={"id": "after"})
        assert [e["data"]["data"]["id"] for e in streams[1].wait(2)] == ["before", "after"]
        streams[0].thread.join(5)
        assert not streams[0].thread.is_alive()  # the server ended it
        assert [e["data"]["data"]["id"] for e in streams[0].events] == ["before"]
    finally:
        for stream in streams:
            if stream.thread.is_alive():  # the ended one's connection is closed already
                stream.close()
