"""What the server says is true: a project the config declares has no registration time
(null, not ``""``), ``GET /v1/jobs`` lists the jobs ``GET /v1/jobs/{id}`` shows the same
caller, those of a removed project included, and uptime is the server's, not a worker's."""

import re
import time

from neuralmind.client import NeuralMindClient
from tests.plugins.auth.helpers import create_token
from tests.support import run_cli

MILLIS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_a_config_project_has_no_registration_time(make_server, tmp_path):
    repo = tmp_path / "api"
    repo.mkdir()
    server = make_server(config=f'[server]\nallow_remote = true\ninsecure_http = true\n'
                                f'[kernel]\nstate_dir = "{tmp_path / "state"}"\n'
                                f'[[projects]]\nid = "api"\npath = "{repo}"\n')
    token = create_token(server.home, server.home / "config.toml", "alice", "admin")["token"]
    item = server.get("/v1/projects/api", token=token).json
    assert item["alias"] is True and item["registered_at"] is None
    assert server.get("/v1/projects", token=token).json["items"][0]["registered_at"] is None
    schema = server.get("/v1/openapi.json", token=token).json["components"]["schemas"]["ProjectOut"]
    field = schema["properties"]["registered_at"]
    assert {t.get("type") for t in field["anyOf"]} == {"string", "null"}
    assert "registered_at" in schema["required"] and "config" in field["description"]
    # the client and the CLI's printers take it: `-` where there is no time
    url = f"http://127.0.0.1:{server.port}"
    assert NeuralMindClient(url, token=token).projects.get("api").registered_at is None
    code, out, err = run_cli("project", "show", "--project", "api", "--url", url, "--token", token)
    assert code == 0, err
    assert re.search(r"^registered_at\s+-$", out, re.M)
    code, out, err = run_cli("project", "list", "--url", url, "--token", token)
    assert code == 0 and re.search(r"^api\s+api\s+\S+\s+-$", out, re.M), out + err


def test_a_registered_project_has_its_registration_time(make_server, repo):
    server = make_server()
    pid = server.register(repo)
    assert MILLIS.fullmatch(server.get(f"/v1/projects/{pid}").json["registered_at"])


def listed(server, token=None) -> set[str]:
    r = server.get("/v1/jobs?limit=200", token=token or server.token)
    assert r.status == 200, r.body
    return {job["id"] for job in r.json["items"]}


def test_the_jobs_listing_shows_a_removed_projects_job_as_the_job_does(make_server, tmp_path):
    server = make_server()
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a, b = server.register(tmp_path / "a"), server.register(tmp_path / "b")
    job_a, job_b = (server.kernel.jobs.submit("sleep", lambda ctx: None, project_id=pid,
                                              wait=True).id for pid in (a, b))
    assert server.delete(f"/v1/projects/{a}").status == 204
    assert server.get(f"/v1/jobs/{job_a}").status == 200
    assert listed(server) >= {job_a, job_b}
    assert server.get("/v1/status").json["projects"] == 1


def test_a_token_limited_to_projects_lists_the_jobs_it_may_read(make_server, tmp_path):
    """A project dropped from the config: its job is shown, listed or not, to a token of every
    project only (``GET /v1/jobs/{id}``'s rule); a token limited to projects sees the jobs of
    those it may read now."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    both = (f'[server]\nallow_remote = true\ninsecure_http = true\n'
            f'[kernel]\nstate_dir = "{tmp_path / "state"}"\n'
            f'[[projects]]\nid = "b"\npath = "{tmp_path / "b"}"\n')
    first = make_server(config=both + f'[[projects]]\nid = "a"\npath = "{tmp_path / "a"}"\n')
    home, config = first.home, first.config
    admin = create_token(home, config, "ann", "admin")["token"]
    limited = create_token(home, config, "rita", "reader", "a,b")["token"]
    job_a, job_b = (first.kernel.jobs.submit("sleep", lambda ctx: None, project_id=pid,
                                             wait=True).id for pid in "ab")
    assert listed(first, limited) == {job_a, job_b}
    first.stop()
    server = make_server(home=home, config=both)
    assert server.get(f"/v1/jobs/{job_a}", token=admin).status == 200
    assert listed(server, admin) == {job_a, job_b}
    assert server.get(f"/v1/jobs/{job_a}", token=limited).error["code"] == "job_not_found"
    assert server.get(f"/v1/jobs/{job_b}", token=limited).status == 200
    assert listed(server, limited) == {job_b}


def test_status_counts_the_active_jobs_of_a_removed_project(make_server, tmp_path):
    server = make_server()
    (tmp_path / "a").mkdir()
    a = server.register(tmp_path / "a")
    jid = server.kernel.jobs.create("sleep", project_id=a)  # queued: never started
    try:
        assert server.get("/v1/status").json["jobs"]["queued"] == 1
        assert server.delete(f"/v1/projects/{a}").status == 204
        assert server.get(f"/v1/jobs/{jid}").json["status"] == "queued"
        assert server.get("/v1/status").json["jobs"]["queued"] == 1
        assert [job["id"] for job in server.get("/v1/jobs?status=queued").json["items"]] == [jid]
    finally:
        server.kernel.jobs.discard(jid)


def test_uptime_is_the_servers_not_the_workers(make_server, monkeypatch):
    """Under gunicorn the master's start reaches every worker as ``NEURALMIND_STARTED``: a
    worker started again answers the server's uptime, not its own."""
    server = make_server()
    assert server.get("/v1/health").json["uptime_s"] < 100  # in-process: this kernel's start
    monkeypatch.setenv("NEURALMIND_STARTED", str(time.monotonic() - 100))
    assert 100 <= server.get("/v1/health").json["uptime_s"] < 200
    assert 100 <= server.get("/v1/status").json["uptime_s"] < 200
