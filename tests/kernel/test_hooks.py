"""Every hook of kernel/hookspecs.py, exercised by a plugin written as a third-party author
writes one (``from neuralmind import …``) and seen from outside: a request, the OpenAPI
document, the CLI. ``test_every_hook_has_a_test`` keeps this module in step with the specs
(datasette's idea): a new hook needs a ``test_hook_<name>…`` here."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from contextlib import closing

import falcon.testing
import pytest
from pydantic import BaseModel

from kernel import hookspecs
from kernel.app import StartupError
from neuralmind import Actor, EventKind, Permission, hookimpl, operation
from tests.embeddings.fake_embedder import FakeEmbedderPlugin
from tests.support import fresh_pg_dsn, make_kernel, plugin_site, run_cli

SPECS = sorted(name for name, fn in vars(hookspecs).items()
               if callable(fn) and hasattr(fn, "neuralmind_spec"))


@pytest.mark.parametrize("hook", SPECS)
def test_every_hook_has_a_test(hook):
    tests = [name for name in globals() if name.startswith(f"test_hook_{hook}")]
    assert tests, f"hook {hook!r} has no test_hook_{hook}… in {__name__}"


class Echo(BaseModel):
    actor: str


class WhoResource:
    @operation(permission="probe.read", response=Echo)
    def on_get(self, req, resp):
        return Echo(actor=req.context.actor.id)


class Probe:
    """Hook implementations the tests pick from, recording what the kernel hands them."""

    def __init__(self):
        self.calls: list[tuple[str, object]] = []

    @hookimpl
    def register_permissions(self, kernel):
        return [Permission("probe.read", "Read the probe", ("reader", "admin"))]

    @hookimpl
    def register_routes(self, kernel):
        return [("/v1/probe", WhoResource())]


@pytest.fixture
def kernels(tmp_path):
    """``kernels(plugins, *extra)``: kernels in tmp homes, shut down after the test."""
    made = []

    def make(plugins, *extra, **sections):
        kernel = make_kernel(tmp_path / f"home{len(made)}", plugins=plugins,
                             extra_plugins=list(extra), **sections)
        made.append(kernel)
        return kernel

    yield make
    for kernel in made:
        kernel.shutdown()


def client(kernel, token: str | None = None) -> falcon.testing.TestClient:
    headers = {"Host": "127.0.0.1"}
    if token is None and (kernel.home / "token").exists():
        token = (kernel.home / "token").read_text().strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return falcon.testing.TestClient(kernel.app, headers=headers)


def test_hook_startup_runs_once_with_the_routes_mounted(kernels):
    class OnStart(Probe):
        @hookimpl
        def startup(self, kernel):
            self.calls.append(("startup", kernel))
            self.routes = [uri for uri, *_ in kernel.routes]

    probe = OnStart()
    kernel = kernels(["auth"], probe)
    assert probe.calls == [("startup", kernel)]
    assert "/v1/probe" in probe.routes and "/v1/projects" in probe.routes


def test_hook_shutdown_runs_when_the_kernel_stops(kernels, caplog, backend):
    class OnStop(Probe):
        @hookimpl
        def shutdown(self, kernel):
            self.calls.append(("shutdown", kernel))

    class Broken:
        @hookimpl
        def shutdown(self, kernel):
            raise RuntimeError("cannot stop")

    probe = OnStop()
    kernel = kernels(["auth"], probe, Broken())  # pluggy calls the last registered first
    kernel.emit("probe.stopping")  # a write the kernel's own shutdown folds into its file
    assert probe.calls == []
    with caplog.at_level(logging.ERROR, logger="neuralmind.kernel"):
        kernel.shutdown()
    assert probe.calls == [("shutdown", kernel)]  # the others still stop
    assert "shutdown of plugin 'Broken' failed" in caplog.text and "cannot stop" in caplog.text
    if backend == "postgres":  # and so does the kernel: its pool closed
        assert kernel._pg.pool.raw.closed
        return
    # its SQLite file alone (a copy without its -wal, as a backup takes it) holds the write:
    # its log was folded in (the -wal itself goes with the last connection, which a thread
    # of the kernel, its retention's, may still hold for a moment)
    copy = kernel.home / "copy.db"
    shutil.copyfile(kernel.home / "kernel.db", copy)
    with closing(sqlite3.connect(copy)) as db:
        assert db.execute("SELECT count(*) FROM events WHERE kind = 'probe.stopping'"
                          ).fetchone() == (1,)


def test_hook_register_routes_serves_and_documents_the_route(kernels):
    kernel = kernels(["auth"], Probe())
    r = client(kernel).simulate_get("/v1/probe")
    assert (r.status_code, r.json) == (200, {"actor": "local"})
    assert client(kernel, token="nm_wrong").simulate_get("/v1/probe").status_code == 401
    doc = kernel.openapi["paths"]["/v1/probe"]["get"]
    assert doc["x-permission"] == "probe.read"


def test_hook_register_permissions_adds_names_with_default_roles(kernels):
    kernel = kernels(["auth"], Probe())
    assert kernel.permissions["probe.read"].roles == ("reader", "admin")

    class Twice:
        @hookimpl
        def register_permissions(self, kernel):
            return [Permission("probe.read", "again")]

    with pytest.raises(StartupError, match="'probe.read' is registered twice"):
        kernels(["auth"], Probe(), Twice())


def test_hook_register_event_kinds_is_what_streams_and_webhooks_may_follow(kernels, caplog):
    class Kinds(Probe):
        @hookimpl
        def register_event_kinds(self, kernel):
            return [EventKind("probe.done", "a probe finished")]

    kernel = kernels(["auth", "webhooks"], Kinds())
    assert kernel.event_kinds["probe.done"].description == "a probe finished"
    assert {"project.registered", "webhook.created"} <= set(kernel.event_kinds)
    r = client(kernel).simulate_get("/v1/events?kind=probe.*&kind=probe.dnoe")
    assert r.status_code == 422
    assert r.json["error"]["details"]["errors"] == [{
        "loc": ["query", "kind"], "type": "value_error",
        "msg": "matches no event kind: probe.dnoe (did you mean probe.done?)"}]
    r = client(kernel).simulate_post("/v1/webhooks", json={
        "url": "https://hooks.example.com/h", "events": ["probe.done", "nothing.*"]})
    assert r.status_code == 422 and r.json["error"]["message"] == \
        "matches no event kind: nothing.*"
    assert client(kernel).simulate_get("/v1/webhooks").json["items"] == []
    with caplog.at_level(logging.WARNING, logger="neuralmind.kernel"):
        for kind in ("probe.done", "probe.undeclared", "probe.undeclared"):
            kernel.emit(kind)
    assert caplog.text.count("no plugin declares it") == 1
    assert "'probe.undeclared'" in caplog.text
    assert [e.kind for e in kernel.events.after(0, 10)][-3:] == [  # recorded all the same
        "probe.done", "probe.undeclared", "probe.undeclared"]

    class Twice:
        @hookimpl
        def register_event_kinds(self, kernel):
            return [EventKind("project.registered", "again")]

    with pytest.raises(StartupError, match=r"^event kind 'project\.registered' is registered "
                                           r"twice \(by kernel and "):
        kernels(["auth"], Twice())


def test_hook_register_middleware_runs_after_the_kernels_guards(kernels):
    class Stamp:
        def process_response(self, req, resp, resource, req_succeeded):
            resp.set_header("X-Probe", f"{req.context.request_id}/{req_succeeded}")

    class WithMiddleware(Probe):
        @hookimpl
        def register_middleware(self, kernel):
            return [Stamp()]

    kernel = kernels(["auth"], WithMiddleware())
    ok = client(kernel).simulate_get("/v1/probe", headers={"X-Request-Id": "mw-1"})
    assert ok.headers["X-Probe"] == "mw-1/True"
    refused = client(kernel).simulate_get("/v1/probe", headers={"Host": "evil.example"})
    assert refused.status_code == 403 and refused.headers["X-Probe"].endswith("/False")


class HeaderAuth(Probe):
    """Knows callers by an ``X-Probe-Actor`` header; lets them read the probe only."""

    @hookimpl
    def actor_from_request(self, kernel, request):
        name = request.get_header("X-Probe-Actor")
        return Actor(name, role="reader", kind="probe") if name else None

    @hookimpl
    def permission_allowed(self, kernel, actor, permission, project):
        return True if actor.kind == "probe" and permission == "probe.read" else None


def test_hook_actor_from_request_names_the_caller(kernels):
    kernel = kernels([], HeaderAuth())  # no auth plugin: this one is the only authenticator
    r = client(kernel).simulate_get("/v1/probe", headers={"X-Probe-Actor": "ada"})
    assert (r.status_code, r.json) == (200, {"actor": "ada"})
    anonymous = client(kernel).simulate_get("/v1/probe")
    assert (anonymous.status_code, anonymous.json["error"]["code"]) == (401, "unauthorized")


def test_hook_permission_allowed_a_false_denies_what_another_plugin_allows(kernels, tmp_path):
    kernel = kernels([], HeaderAuth())
    r = client(kernel).simulate_get("/v1/projects", headers={"X-Probe-Actor": "ada"})
    assert (r.status_code, r.json["error"]["code"]) == (403, "forbidden")  # nobody said True

    class NoWrites:
        @hookimpl
        def permission_allowed(self, kernel, actor, permission, project):
            return False if permission == "projects.write" else None

    kernel = kernels(["auth"], NoWrites())  # the loopback user holds every permission …
    r = client(kernel).simulate_post("/v1/projects", json={"path": str(tmp_path)})
    assert (r.status_code, r.json["error"]["details"]) == (403, {"permission": "projects.write"})
    assert client(kernel).simulate_get("/v1/projects").status_code == 200  # … but this one


def test_hook_refusal_says_why_in_the_403(kernels, tmp_path):
    class ReadOnlyFridays:
        @hookimpl
        def permission_allowed(self, kernel, actor, permission, project):
            return False if permission == "projects.write" else None

        @hookimpl
        def refusal(self, kernel, actor, permission, project):
            if permission == "projects.write":
                return "no new projects on Fridays", {"day": "friday"}
            return None

    kernel = kernels(["auth"], ReadOnlyFridays())
    r = client(kernel).simulate_post("/v1/projects", json={"path": str(tmp_path)})
    assert (r.status_code, r.json["error"]["message"], r.json["error"]["details"]) == (
        403, "no new projects on Fridays", {"permission": "projects.write", "day": "friday"})
    kernel = kernels([], HeaderAuth())  # no refusal answered: the kernel's own words
    r = client(kernel).simulate_get("/v1/projects", headers={"X-Probe-Actor": "ada"})
    assert r.json["error"]["message"] == "ada may not projects.read"


def test_hook_track_event_sees_committed_events_and_cannot_fail_a_request(kernels, tmp_path,
                                                                           caplog):
    class Tracker(Probe):
        @hookimpl
        def track_event(self, kernel, event):
            stored = kernel.events.after(event.id - 1, limit=1)
            self.calls.append((event.kind, [e.id for e in stored] == [event.id]))

    class Broken:
        @hookimpl
        def track_event(self, kernel, event):
            raise RuntimeError("tracker down")

    tracker = Tracker()
    kernel = kernels(["auth"], tracker, Broken())
    (tmp_path / "repo").mkdir()  # tmp_path holds the kernels' homes: never a project
    with caplog.at_level(logging.ERROR, logger="neuralmind.kernel"):
        r = client(kernel).simulate_post("/v1/projects", json={"path": str(tmp_path / "repo")})
    assert r.status_code == 201
    assert ("project.registered", True) in tracker.calls  # committed before it was told
    assert "tracker down" in caplog.text


def test_hook_forget_project_is_told_of_a_project_removed_or_registered_anew(kernels, tmp_path,
                                                                             caplog):
    class Keeper(Probe):
        @hookimpl
        def forget_project(self, kernel, project):
            self.calls.append(("forget", project.id, project.registered_at))

    class Broken:
        @hookimpl
        def forget_project(self, kernel, project):
            raise RuntimeError("keeper down")

    keeper = Keeper()
    kernel = kernels(["auth"], keeper, Broken())
    (tmp_path / "repo").mkdir()  # tmp_path holds the kernels' homes: never a project
    api = client(kernel)
    pid = api.simulate_post("/v1/projects", json={"path": str(tmp_path / "repo")}).json["id"]
    first = kernel.projects.get(pid)  # served: this process keeps something for it
    with caplog.at_level(logging.ERROR, logger="neuralmind.kernel"):
        assert api.simulate_delete(f"/v1/projects/{pid}").status_code == 204
    assert keeper.calls == [("forget", pid, first.registered_at)]  # at once, where removed
    assert "keeper down" in caplog.text
    api.simulate_post("/v1/projects", json={"path": str(tmp_path / "repo")})
    again = kernel.projects.get(pid)
    elsewhere = make_kernel(kernel.home, plugins=["auth"])  # another worker of the home
    try:  # removes it and registers it again: found at this process's next lookup
        client(elsewhere).simulate_delete(f"/v1/projects/{pid}")
        client(elsewhere).simulate_post("/v1/projects", json={"path": str(tmp_path / "repo")})
    finally:
        elsewhere.shutdown()
    assert kernel.projects.get(pid).registered_at != again.registered_at
    assert keeper.calls[1:] == [("forget", pid, again.registered_at)]


def test_hook_describe_project_adds_to_the_status(kernels, tmp_path, caplog):
    class Describer(Probe):
        @hookimpl
        def describe_project(self, kernel, project):
            return {"probe_name": project.name}

    class Broken:
        @hookimpl
        def describe_project(self, kernel, project):
            raise RuntimeError("describer down")

    class Listing:
        @hookimpl
        def describe_project(self, kernel, project):
            return ["not", "a", "dict"]

    kernel = kernels(["auth"], Describer(), Broken(), Listing())
    (tmp_path / "repo").mkdir()
    api = client(kernel)
    with caplog.at_level(logging.ERROR, logger="neuralmind.kernel"):
        registered = api.simulate_post("/v1/projects", json={"path": str(tmp_path / "repo")})
        pid = registered.json["id"]
        one = api.simulate_get(f"/v1/projects/{pid}")
        listed = api.simulate_get("/v1/projects")
    # the failing plugin is left out: the others' parts, and the routes, stand
    assert (registered.status_code, registered.json["status"]) == (201, {"probe_name": "repo"})
    assert (one.status_code, one.json["status"]) == (200, {"probe_name": "repo"})
    assert [p["status"] for p in listed.json["items"]] == [{"probe_name": "repo"}]
    assert caplog.text.count(f"describe_project of plugin 'Broken' for project {pid} "
                             "failed") == 1  # once, not at every listing
    assert "describer down" in caplog.text
    assert caplog.text.count(f"describe_project of plugin 'Listing' for project {pid} "
                             "failed") == 1 and "it answered list, not a dict" in caplog.text


def test_hook_query_context_adds_parts_to_l2_within_the_budget(kernels, tmp_path):
    class Notes(Probe):
        @hookimpl
        def query_context(self, kernel, project, question, hits, budget):
            self.calls.append(("query_context", (question, [h["label"] for h in hits], budget)))
            return [{"title": "Probe notes", "text": "the probe was here", "tokens": 5}]

    probe = Notes()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "tax.py").write_text("def sales_tax(amount):\n    return amount * 0.2\n")
    kernel = kernels(["auth", "index"], probe)
    api = client(kernel)
    pid = api.simulate_post("/v1/projects", json={"path": str(repo)}).json["id"]
    assert api.simulate_post(f"/v1/projects/{pid}/build", json={"wait": True}).status_code == 200
    out = api.simulate_post(f"/v1/projects/{pid}/query", json={"question": "sales tax"}).json
    assert "L2" in out["layers_used"] and "Probe notes\nthe probe was here" in out["context"]
    [(_, (question, labels, budget))] = probe.calls
    assert question == "sales tax" and "sales_tax" in labels and 0 < budget <= 8000


def test_hook_describe_files_attaches_records_to_impacted_and_next_files(kernels, tmp_path):
    class Tickets(Probe):
        @hookimpl
        def describe_files(self, kernel, project, paths):
            self.calls.append(("describe_files", sorted(paths)))
            return [{"path": p, "kind": "ticket", "id": "T-7", "title": "Tax rounding bug",
                     "status": "open", "files": ["tax.py", "notes.md"]}
                    for p in paths if p == "tax.py"]

    probe = Tickets()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "tax.py").write_text("def sales_tax(amount):\n    return amount * 0.2\n")
    (repo / "cart.py").write_text("from tax import sales_tax\n\n\ndef total(a):\n"
                                  "    return sales_tax(a)\n")
    (repo / "notes.md").write_text("# Notes\n")
    api = client(kernels(["auth", "index"], probe))
    pid = api.simulate_post("/v1/projects", json={"path": str(repo)}).json["id"]
    assert api.simulate_post(f"/v1/projects/{pid}/build", json={"wait": True}).status_code == 200
    out = api.simulate_post(f"/v1/projects/{pid}/impact", json={"files": ["tax.py"]}).json
    files = {f["path"]: f["decisions"] for f in out["files"]}
    assert files["tax.py"] == [{"kind": "ticket", "id": "T-7", "title": "Tax rounding bug",
                                "status": "open"}] and files["cart.py"] == []
    assert probe.calls[0] == ("describe_files", ["cart.py", "tax.py"])
    nxt = api.simulate_post(f"/v1/projects/{pid}/next", json={"files_open": ["tax.py"]}).json
    notes = next(f for f in nxt["files"] if f["path"] == "notes.md")
    assert notes["why"][0]["kind"] == "decision" and notes["why"][0]["id"] == "T-7"


def test_hook_embedder_replaces_the_packaged_model(kernels):
    kernel = kernels(["auth"], FakeEmbedderPlugin("probe-model@1"))
    assert kernel.embedder.model_id == "probe-model@1"
    status = client(kernel).simulate_get("/v1/embeddings/status").json
    assert (status["model_id"], status["loaded"]) == ("probe-model@1", True)


def test_hook_answer_provider_writes_the_answers_of_ask(kernels, tmp_path, caplog):
    class Provider:
        name, model = "probe", "probe-1"

        def __init__(self, failure=None):
            self.failure = failure

        def answer(self, question, sources, stream):
            if self.failure is not None:
                raise self.failure
            yield f"{len(sources)} sources for {question!r} "
            yield "[1]"

    class Answers(Probe):
        def __init__(self, provider):
            super().__init__()
            self.provider = provider

        @hookimpl
        def answer_provider(self, kernel, project):
            self.calls.append(("answer_provider", project.id))
            return self.provider

    probe = Answers(Provider())
    repo = tmp_path / "repo"  # not tmp_path: it holds the kernels' homes, never a project
    repo.mkdir()
    kernel = kernels(["auth", "ask"], probe)
    api = client(kernel)
    pid = api.simulate_post("/v1/projects", json={"path": str(repo)}).json["id"]
    out = api.simulate_post(f"/v1/projects/{pid}/ask", json={"question": "why?"}).json
    assert (out["answer"], out["provider"], out["model"]) == ("0 sources for 'why?' [1]", "probe",
                                                             "probe-1")
    assert probe.calls == [("answer_provider", pid)] and out["cited"] == []  # no source [1]
    for failure, status, code in ((TimeoutError(), 504, "provider_timeout"),
                                  (RuntimeError("secret internals"), 502, "provider_error")):
        kernel = kernels(["auth", "ask"], Answers(Provider(failure)))
        api = client(kernel)
        pid = api.simulate_post("/v1/projects", json={"path": str(repo)}).json["id"]
        with caplog.at_level(logging.ERROR, logger="neuralmind.ask"):
            r = api.simulate_post(f"/v1/projects/{pid}/ask", json={"question": "why?"})
        assert (r.status_code, r.json["error"]["code"]) == (status, code)
        assert "secret" not in r.text and "'probe'" in r.json["error"]["message"]
    assert "secret internals" in caplog.text  # the server log has what the client does not


@pytest.fixture
def probe_installed(tmp_path, monkeypatch):
    """tests/kernel/hook_probe.py behind an entry point named ``probe``."""
    site = plugin_site(tmp_path / "probe-site", "neuralmind-hook-probe",
                       {"probe": "tests.kernel.hook_probe"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    return {"NEURALMIND_PLUGINS": "probe"}


def test_hook_register_commands_adds_a_cli_command(probe_installed):
    assert run_cli("probe", "hello", env=probe_installed) == (0, "probe says hello\n", "")
    code, _, err = run_cli("probe", "hello", env={"NEURALMIND_PLUGINS": "auth"})
    assert code == 2 and "comes with the probe plugin, which neither this configuration nor " \
        "the running daemon enables" in err


def test_hook_server_settings_come_before_the_configs_server_section(probe_installed, tmp_path,
                                                                      monkeypatch):
    from neuralmind.commands.server import _plugin_server_settings
    monkeypatch.setenv("NEURALMIND_PLUGINS", "probe")
    config = tmp_path / "config.toml"
    config.write_text("[probe]\nport = 9001\n[server]\nworkers = 5\n")
    assert _plugin_server_settings(str(config), {}) == {"port": 9001, "workers": 5}
    assert _plugin_server_settings(str(config), {"port": 9002}) == {"port": 9002, "workers": 5}


def test_hook_config_sections_are_checked_before_the_server_forks(probe_installed, tmp_path,
                                                                  monkeypatch):
    from kernel.config import ConfigError, load_settings
    from kernel.serving import gunicorn_options
    monkeypatch.setenv("NEURALMIND_PLUGINS", "probe")
    config = tmp_path / "config.toml"
    config.write_text("[probe]\nprot = 9001\n")
    with pytest.raises(ConfigError, match="prot"):  # no gunicorn below when it holds
        gunicorn_options(load_settings(config))
    assert run_cli("serve", "--config", str(config), env=probe_installed) == (
        2, "", f"neuralmind: [probe] in {config}: prot: Extra inputs are not permitted "
               "(got 9001)\n")


@pytest.mark.sqlite_only("a SQLite home is the copy's source; the test names its database")
def test_hook_storage_components_are_checked_and_copied_into_postgres(probe_installed,
                                                                       tmp_path):
    from kernel.pg import PgBackend
    from kernel.storage import Database
    from tests.kernel.hook_probe import MIGRATIONS
    db = Database(tmp_path / "home" / "probe.db", MIGRATIONS)
    with db.transaction() as conn:
        conn.executemany("INSERT INTO probe_notes (id, text) VALUES (?, ?)",
                         [(1, "a"), (2, "b"), (3, "c")])
    db.close()
    code, out, _ = run_cli("storage", "check", "--json", env=probe_installed)
    probe = [c for c in json.loads(out)["components"] if c["component"] == "probe"]
    assert code == 0 and [(c["file"].rsplit("/", 1)[-1], c["version"], c["pending"])
                          for c in probe] == [("probe.db", 1, 0)]
    dsn = fresh_pg_dsn()
    code, out, err = run_cli("storage", "migrate", "--to", "postgres", "--dsn", dsn, "--json",
                             env=probe_installed)
    checks = [c for c in json.loads(out)["checks"] if c["component"] == "probe"]
    assert code == 0 and [(c["what"], c["home"], c["database"]) for c in checks] == [
        ("probe_notes rows", 3, 3)], err
    backend = PgBackend(dsn, 1)
    try:
        rows = backend.database("probe", None).conn.execute(
            "SELECT id, text FROM probe_notes ORDER BY id").fetchall()
    finally:
        backend.close()
    assert [tuple(r) for r in rows] == [(1, "a"), (2, "b"), (3, "c")]
