"""The kernel and every bundled plugin served by real gunicorn, as a user runs them: one
smoke test each (the rest of their tests run in process), guards and the envelope as a client
sees them."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import ROOT, Server

PLUGINS = ["auth", "memory", "index", "tier2_bridge", "ask", "ui"]


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    with Server(tmp_path_factory.mktemp("smoke") / "home", plugins=PLUGINS, workers=2) as srv:
        yield srv


def test_health_is_public_and_carries_headers(server):
    r = server.request("GET", "/v1/health", auth=False, headers={"X-Request-Id": "abc-123"})
    assert r.status == 200
    assert r.json["status"] == "ok"
    assert r.headers["x-request-id"] == "abc-123"
    assert r.headers["neuralmind-api-version"] == "1"
    assert r.headers["content-type"] == "application/json; charset=utf-8"


def test_auth_projects_need_a_token(server, repo):
    assert server.request("GET", "/v1/projects", auth=False).status == 401
    r = server.post("/v1/projects", {"path": str(repo)})
    assert r.status == 201
    assert r.headers["location"] == f"/v1/projects/{r.json['id']}"
    assert server.post("/v1/projects", {"path": str(repo)}).status == 200


def test_memory_writes_and_finds_a_decision(server, repo):
    pid = server.register(repo)
    made = server.post(f"/v1/projects/{pid}/memories", {"title": "Serve with gunicorn",
                                                        "rationale": "workers share SQLite"})
    assert made.status == 201
    found = server.post(f"/v1/projects/{pid}/memories/search", {"query": "gunicorn",
                                                                 "mode": "keyword"})
    assert [m["id"] for m in found.json["results"]] == [made.json["id"]]


def test_index_builds_and_searches_with_the_model(server, repo):
    (repo / "tax.py").write_text("def sales_tax(amount):\n    return amount * 0.2\n")
    pid = server.register(repo)
    built = server.post(f"/v1/projects/{pid}/build", {"wait": True})
    assert built.status == 200 and built.json["job"]["result"]["semantic"] is True
    hits = server.post(f"/v1/projects/{pid}/search", {"query": "tax owed on an amount",
                                                      "mode": "semantic"}).json["results"]
    assert hits[0]["label"] == "sales_tax"


def test_tier2_bridge_audits_what_the_workers_did(server, tmp_path):
    (tmp_path / "audited").mkdir()
    server.register(tmp_path / "audited")
    seats = server.get("/v1/admin/seats")
    assert seats.status == 200 and seats.json["active_actors"] == 0  # loopback is no seat
    deadline = time.monotonic() + 10  # the copier may still be on its way
    while "project.registered" not in {
            r["action"] for r in server.get("/v1/admin/audit").json["items"]}:
        assert time.monotonic() < deadline, "the registration never reached the audit trail"
        time.sleep(0.05)


def test_ask_streams_its_answer_through_gunicorn(server, repo):
    pid = server.register(repo)
    server.post(f"/v1/projects/{pid}/memories", {"title": "Serve with gunicorn",
                                                 "rationale": "Workers share SQLite."})
    r = server.post(f"/v1/projects/{pid}/ask", {"question": "how do workers share state?",
                                                "sources": ["memories"], "stream": True})
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
    kinds = [line[7:] for line in r.body.decode().splitlines() if line.startswith("event: ")]
    assert kinds[0] == "sources" and kinds[-1] == "done" and "delta" in kinds
    assert b"Workers share SQLite [1]." in r.body


def test_ui_page_and_sign_in_code_under_gunicorn(server):
    page = server.request("GET", "/ui", auth=False)
    assert page.status == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    code = server.post("/v1/ui/sign-in-codes").json["code"]  # made by one worker,
    first, again = (server.post("/v1/ui/sign-in", {"code": code}, auth=False) for _ in range(2))
    assert (first.status, first.json) == (200, {"token": server.token})  # redeemed by any,
    assert again.status == 401  # once


@pytest.mark.sqlite_only("imports, whatever the storage")
def test_the_master_imports_what_workers_use_and_builds_nothing(tmp_path):
    """gunicorn's ``on_starting`` loads the kernel's and the enabled plugins' modules in the
    master, so workers fork with them; it must leave what does not survive a fork alone: no
    Kernel (``kernel.wsgi`` builds one), no thread (onnxruntime starts some on import)."""
    script = (
        "import sys, threading\n"
        "from kernel.config import load_settings\n"
        "from kernel.serving import gunicorn_options\n"
        "gunicorn_options(load_settings())['on_starting'](None)\n"
        "print(sorted(m for m in ('plugins.memory.service', 'plugins.index.search',"
        " 'plugins.auth.tokens', 'plugins.mcp.tools', 'plugins.webhooks.service',"
        " 'kernel.wsgi', 'onnxruntime', 'tokenizers', 'anyio') if m in sys.modules),"
        " threading.active_count())\n")
    # every default plugin; webhooks is not one, so its modules stay out
    env = {**os.environ, "NEURALMIND_HOME": str(tmp_path / "home"),
           "NEURALMIND_SERVER_OVERRIDES": '{"port": 0}'}
    env.pop("NEURALMIND_PLUGINS", None)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("]")[0] + "]" == str(
        ["plugins.auth.tokens", "plugins.index.search", "plugins.mcp.tools",
         "plugins.memory.service"])
    assert done.stdout.split("]")[1].strip() == "1"


def test_uptime_is_the_servers_when_a_worker_starts_again(server):
    """/v1/health's ``uptime_s`` counts from the master's start: a worker killed and started
    again answered with its own few seconds, between its sibling's larger ones. Last in the
    module: it kills a worker of the module's server."""
    def uptimes(n: int = 8) -> list[float]:
        return [server.request("GET", "/v1/health", auth=False).json["uptime_s"]
                for _ in range(n)]
    before = min(uptimes())
    children = f"/proc/{server.proc.pid}/task/{server.proc.pid}/children"
    workers = open(children).read().split()
    os.kill(int(workers[0]), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (len(now := open(children).read().split()) < 2 or workers[0] in now) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workers[0] not in now and len(now) == 2, now
    assert min(uptimes(16)) >= before
