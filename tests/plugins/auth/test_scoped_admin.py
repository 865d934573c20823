"""A token limited to projects never holds a permission that reaches beyond them
(``Permission.beyond_projects``): an admin of project "a" (`token create --role admin
--projects a`) neither lists nor revokes tokens (every token: `*` admins, other projects'
members), nor reads events of no project (`token.created` for project b's members), nor stops
the server, nor uses a third-party plugin's server-wide permission — 403 saying why; the
unrestricted admin still can. Served from this process, tokens made by the CLI
(docs/security.md, "Tokens limited to projects")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from neuralmind import Model, Permission, hookimpl, operation
from tests.plugins.auth.helpers import cli, create_token, replay_events, server_config
from tests.support import DEFAULT_PLUGINS, LocalServer, make_kernel, request

EXTRA = """
[kernel]
sse_heartbeat_s = 0.5
[auth.roles]
auditor = ["events.read", "events.global", "system.read"]
"""


class Pong(Model):
    pong: bool


class PingResource:
    @operation(permission="gate.ping", response=Pong, summary="Ping the whole server")
    def on_get(self, req, resp):
        return Pong(pong=True)


class Gate:
    """A third-party plugin whose permission reaches beyond any project."""

    @hookimpl
    def register_permissions(self, kernel):
        return [Permission("gate.ping", "Ping the whole server", ("admin",),
                           beyond_projects=True)]

    @hookimpl
    def register_routes(self, kernel):
        return [("/v1/gate/ping", PingResource())]


@dataclass
class Lab:
    server: LocalServer
    config: Path
    root: dict  # admin of every project
    admin_a: dict  # admin of project "a" only
    bea: dict  # builder of project "b"

    def token(self, actor: str, role: str, projects: str = "*") -> dict:
        return create_token(self.server.home, self.config, actor, role, projects)

    @property
    def beyond_projects(self) -> set[str]:
        return {name for name, perm in self.server.kernel.permissions.items()
                if perm.beyond_projects}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, backend):
    root = tmp_path_factory.mktemp("scoped")
    config = server_config(root, {"a": root / "repo-a", "b": root / "repo-b"}, EXTRA)
    with LocalServer(root / "home", config=config, plugins=list(DEFAULT_PLUGINS),
                     extra_plugins=[Gate()]) as server:
        cfg = server.home / "config.toml"
        made = [create_token(server.home, cfg, actor, role, projects)
                for actor, role, projects in [("root", "admin", "*"), ("alice-a", "admin", "a"),
                                              ("bea", "builder", "b")]]
        yield Lab(server, cfg, *made)


def refused_as_scoped(r, permission: str, projects: list[str]) -> None:
    """The 403 names the token's projects and why it is refused, not just the permission."""
    assert (r.status, r.error["code"]) == (403, "forbidden"), (r.status, r.json)
    assert r.error["details"] == {"permission": permission, "projects": projects}
    message = r.error["message"]
    assert f"a token limited to projects {', '.join(projects)} cannot" in message, message
    assert permission in message and "every project" in message, message


def test_a_project_limited_admin_cannot_list_tokens(lab):
    r = lab.server.get("/v1/auth/tokens", token=lab.admin_a["token"])
    refused_as_scoped(r, "tokens.manage", ["a"])
    assert "(List and revoke server-mode tokens)" in r.error["message"]
    said = json.dumps({k: v for k, v in r.error.items() if k != "request_id"})  # random hex
    assert set(r.json) == {"error"} and "root" not in said and "bea" not in said  # no listing
    # the unrestricted admin still lists every token
    listing = lab.server.get("/v1/auth/tokens", token=lab.root["token"])
    assert listing.status == 200
    assert {lab.root["id"], lab.admin_a["id"], lab.bea["id"]} <= {
        t["id"] for t in listing.json["items"]}


def test_a_project_limited_admin_cannot_revoke_any_token(lab):
    own_member = lab.token("ann-a", "reader", "a")
    for target in (lab.root, lab.bea, own_member, lab.admin_a):
        r = lab.server.delete(f"/v1/auth/tokens/{target['id']}", token=lab.admin_a["token"])
        refused_as_scoped(r, "tokens.manage", ["a"])
    # nothing was revoked: the `*` admin and the others still get in
    for who in (lab.root, lab.bea, own_member, lab.admin_a):
        assert lab.server.get("/v1/auth/whoami", token=who["token"]).status == 200, who["actor"]
    # an unknown id is the same 403, so the refusal says nothing about which ids exist
    r = lab.server.delete("/v1/auth/tokens/0000ffff", token=lab.admin_a["token"])
    refused_as_scoped(r, "tokens.manage", ["a"])
    # the unrestricted admin still revokes
    assert lab.server.delete(f"/v1/auth/tokens/{own_member['id']}",
                             token=lab.root["token"]).status == 204
    assert lab.server.get("/v1/auth/whoami", token=own_member["token"]).status == 401


def test_no_token_is_created_over_http(lab):
    """Tokens are made only by the CLI: no route takes a new one, for any admin."""
    for who in (lab.admin_a, lab.root):
        r = lab.server.post("/v1/auth/tokens", {"actor": "mallory", "role": "admin",
                                                "projects": "*"}, token=who["token"])
        assert r.status == 405, (who["actor"], r.status)
    listed = json.loads(cli(lab.server.home, "token", "list", "--json", config=lab.config).stdout)
    assert "mallory" not in {t["actor"] for t in listed}


def test_creating_a_project_limited_admin_says_what_it_cannot_do(lab):
    done = cli(lab.server.home, "token", "create", "--actor", "adam-a", "--role", "admin",
               "--projects", "a", config=lab.config)
    note = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(note) == 1, done.stderr
    assert note[0].startswith("note: limited to projects a, this admin token holds the role's "
                              "permissions in those projects only: not events.global, "
                              "system.shutdown, tokens.manage, nor any plugin's permission")
    token = done.stdout.strip().splitlines()[-1]  # still alone on the last line
    assert lab.server.get("/v1/auth/tokens", token=token).status == 403
    # an auditor (events.global by config) limited to a project is told so too
    audit = cli(lab.server.home, "token", "create", "--actor", "aud-a", "--role", "auditor",
                "--projects", "a", "--json", config=lab.config)
    assert "events.global" in audit.stderr and "tokens.manage" not in audit.stderr
    assert json.loads(audit.stdout)["projects"] == ["a"]
    # no note where nothing is withheld: an admin of every project, a builder of one
    for role, projects in (("admin", "*"), ("builder", "a")):
        quiet = cli(lab.server.home, "token", "create", "--actor", f"q-{role}", "--role", role,
                    "--projects", projects, "--json", config=lab.config)
        assert "note:" not in quiet.stderr, (role, quiet.stderr)


def test_whoami_of_a_project_limited_admin_lists_no_global_permission(lab):
    limited = lab.server.get("/v1/auth/whoami", token=lab.admin_a["token"]).json
    everything = lab.server.get("/v1/auth/whoami", token=lab.root["token"]).json
    assert limited["projects"] == ["a"] and everything["projects"] is None
    assert lab.beyond_projects == {"tokens.manage", "events.global", "system.shutdown",
                                   "gate.ping"}  # server mode: no ui.sign_in
    assert not set(limited["permissions"]) & lab.beyond_projects
    assert lab.beyond_projects <= set(everything["permissions"])
    # within its projects it is still an admin
    assert set(limited["permissions"]) == set(everything["permissions"]) - lab.beyond_projects
    assert {"memories.delete", "jobs.cancel", "index.admin"} <= set(limited["permissions"])


def test_a_project_limited_admin_reads_no_global_events(lab):
    b_member = lab.token("bo", "reader", "b")  # token.created naming project b: no project
    r = lab.server.post("/v1/projects/a/memories", {"title": "scoped", "rationale": "seen"},
                        token=lab.admin_a["token"])
    assert r.status == 201  # memory.created in project a
    limited = replay_events(lab.server.port, lab.admin_a["token"])
    assert "memory.created" in {e["kind"] for e in limited}
    assert all(e["project_id"] == "a" for e in limited), [
        (e["kind"], e["project_id"]) for e in limited if e["project_id"] != "a"]
    # the unrestricted admin sees the global ones: project b's member among them
    everything = replay_events(lab.server.port, lab.root["token"])
    created = [e for e in everything if e["kind"] == "token.created" and e["project_id"] is None]
    assert b_member["id"] in {e["data"]["token_id"] for e in created}
    assert "memory.created" in {e["kind"] for e in everything}


def test_every_global_route_refuses_a_project_limited_token_saying_why(lab):
    """Each route whose permission reaches beyond any project (tokens.manage,
    system.shutdown, a third-party plugin's gate.ping, …: whatever plugins run) is a 403 for
    the admin of "a", and not a `forbidden` for the admin of every project."""
    doc = request(lab.server.port, "GET", "/v1/openapi.json").json
    ops = [(method, template.replace("{token_id}", "0000ffff"), op["x-permission"])
           for template, methods in doc["paths"].items() for method, op in methods.items()
           if op.get("x-permission") in lab.beyond_projects]
    assert {"tokens.manage", "system.shutdown", "gate.ping"} <= {perm for _, _, perm in ops}
    for method, path, perm in ops:
        body = {} if method in ("post", "put", "patch") else None
        r = lab.server.request(method.upper(), path, json_body=body, token=lab.admin_a["token"])
        refused_as_scoped(r, perm, ["a"])
        r = lab.server.request(method.upper(), path, json_body=body, token=lab.root["token"])
        assert r.status < 500, (method, path, r.status)
        assert r.status < 400 or r.error["code"] != "forbidden", (method, path, r.error)
    # a role that lacks the permission keeps the kernel's own message
    r = lab.server.get("/v1/auth/tokens", token=lab.bea["token"])
    assert (r.status, r.error["code"]) == (403, "forbidden")
    assert "limited to projects" not in r.error["message"] and "projects" not in r.error["details"]


def test_the_bundled_permissions_that_reach_beyond_projects_declare_it(tmp_path):
    """The kernel's, the auth plugin's, the dashboard's sign-in and tier2's (loopback mode,
    where ui.sign_in exists)."""
    kernel = make_kernel(tmp_path / "home", plugins=["auth", "ui", "tier2_bridge"])
    try:
        assert {name for name, perm in kernel.permissions.items() if perm.beyond_projects} == {
            "events.global", "system.shutdown", "tokens.manage", "ui.sign_in", "audit.read",
            "seats.read"}
    finally:
        kernel.shutdown()
