"""The published contract holds (issue 13 item 6): schemathesis with every check
(``--checks all``) over the bundled plugins in loopback mode, on a built project, with every
id in a path pinned to a real record so requests reach past 404 to the handlers. No server
error, no response outside its schema, and every status a route answers is listed in its
``responses``. The figures (operations, cases) are printed for docs/performance.md."""

from __future__ import annotations

import json

import pytest

from tests.plugins.index.conftest import build
from tests.support import DEFAULT_PLUGINS, LocalServer, schemathesis

MCP_VERSION = "2025-06-18"
MAX_EXAMPLES = 6  # per operation in the fuzzing phase; the coverage phase adds ~40 each
# bad input is refused by the route's pydantic model and the router, before any storage: one
# backend checks it; on the other, schema-valid requests check every handler over its store
MODES = {"sqlite": "all", "postgres": "positive"}
FILES = {
    "README.md": "# Shop\n\nA tiny shop.\n",
    "shop/cart.py": '"""Cart maths."""\n\n\ndef total(items):\n    """Sum the prices."""\n'
                    "    return sum(items)\n",
    "web/app.js": "function greet(name) { return 'hi ' + name; }\n",
}


@pytest.fixture(scope="module")
def pinned(tmp_path_factory, backend):
    """A server with a built project and one record of each kind, and spares for the
    operations that delete (each deletes its spare once, then answers 404)."""
    base = tmp_path_factory.mktemp("contract")
    repo, spare = base / "repo", base / "spare"
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    spare.mkdir()
    with LocalServer(base / "home", plugins=list(DEFAULT_PLUGINS)) as server:
        pid = server.register(repo)
        job = build(server, pid)
        memories = f"/v1/projects/{pid}/memories"
        mids = [server.post(memories, {"title": f"Decision {i}", "rationale": "because",
                                       "files_affected": ["shop/cart.py"]}).json["id"]
                for i in range(2)]
        rules = f"/v1/projects/{pid}/ignore-rules"
        rids = [server.post(rules, {"type": "extension", "value": f".x{i}"}).json["id"]
                for i in range(2)]
        job_id = server.get(f"/v1/jobs?project={pid}").json["items"][0]["id"]
        assert job and job_id
        sessions = [mcp_session(server) for _ in range(2)]
        yield server, {"project_id": pid, "spare_project": server.register(spare),
                       "memory_id": mids[0], "spare_memory": mids[1], "rule_id": rids[0],
                       "spare_rule": rids[1], "job_id": job_id, "mcp_session": sessions[0],
                       "spare_mcp_session": sessions[1]}


def mcp_session(server) -> str:
    r = server.post("/v1/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": MCP_VERSION, "capabilities": {},
        "clientInfo": {"name": "contract", "version": "1"}}})
    assert r.status == 200, r.body
    return r.headers["mcp-session-id"]


def config(ids: dict[str, str]) -> str:
    """schemathesis.toml: ids pinned everywhere, the spares for the DELETE operations, an
    indexed file for ``documents``; schemathesis' positive-data check replaced by ours
    (tests/kernel/contract_hooks.py says why)."""
    lines = ["[parameters]", *(f'"path.{k}" = "{v}"' for k, v in ids.items()
                               if k.endswith("_id") and not k.startswith("spare")),
             "[[operations]]", 'include-path = "/v1/projects/{project_id}/documents"',
             'parameters = { "query.path" = "shop/cart.py" }']
    for method, session in (("POST", ids["mcp_session"]), ("DELETE", ids["spare_mcp_session"])):
        headers = f'"header.Mcp-Session-Id" = "{session}", "header.MCP-Protocol-Version" = ' \
                  f'"{MCP_VERSION}"'
        lines += ["[[operations]]", 'include-path = "/v1/mcp"', f'include-method = "{method}"',
                  f"parameters = {{ {headers} }}"]
    for path, name, spare in (("/v1/projects/{project_id}", "project_id", "spare_project"),
                              ("/v1/projects/{project_id}/memories/{memory_id}", "memory_id",
                               "spare_memory"),
                              ("/v1/projects/{project_id}/ignore-rules/{rule_id}", "rule_id",
                               "spare_rule")):
        lines += ["[[operations]]", f'include-path = "{path}"', 'include-method = "DELETE"',
                  f'parameters = {{ "path.{name}" = "{ids[spare]}" }}']
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~30 s on a quiet machine; minutes when other work shares the cores
def test_every_route_keeps_its_published_contract(pinned, backend, tmp_path):
    server, ids = pinned
    done, result = schemathesis(server.url, server.token, tmp_path, "--checks", "all",
                                "--exclude-checks", "positive_data_acceptance",
                                "-n", str(MAX_EXAMPLES), "--request-timeout", "30",
                                "--mode", MODES[backend],
                                config=config(ids), hooks="tests.kernel.contract_hooks")
    counts = {"operations": result["operations"]["tested"], **result["test_cases"],
              "failures": len(result["failures"]), "errors": len(result["errors"])}
    print("schemathesis:", json.dumps(counts))
    assert done.returncode == 0, f"{tmp_path / 'schemathesis.out'}:\n{done.stdout[-6000:]}"
    assert result["failures"] == [] and result["errors"] == []
    assert counts["operations"] >= 40
    assert "unhandled error" not in server.output()
    assert "no plugin declares it" not in server.output()  # every kind emitted is declared
