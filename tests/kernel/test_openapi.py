"""The OpenAPI document is generated from the route table and valid under a real validator."""

import json
import threading

import pytest
from openapi_spec_validator import validate

from neuralmind.cli import main


def test_document_is_valid_openapi_31(kapp):
    doc = kapp.get("/v1/openapi.json", auth=False).json
    assert doc["openapi"] == "3.1.0"
    validate(doc)


def test_every_operation_is_declared_with_id_security_and_errors(kapp):
    doc = kapp.get("/v1/openapi.json", auth=False).json
    ids = set()
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            assert op["operationId"] not in ids
            ids.add(op["operationId"])
            if path == "/v1/health":
                assert op["security"] == []
            else:
                assert op["security"] == [{"bearer": []}] and op["x-permission"]
                assert "401" in op["responses"]
            assert "500" in op["responses"]


def test_request_and_response_models_are_referenced(kapp):
    doc = kapp.get("/v1/openapi.json", auth=False).json
    post = doc["paths"]["/v1/projects"]["post"]
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert schema["required"] == ["path"]
    listing = doc["paths"]["/v1/projects"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"limit", "cursor"}


def test_docs_page_is_served_offline(kapp):
    page = kapp.get("/v1/docs", auth=False)
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert "/v1/docs/assets/swagger-ui-bundle.js" in page.body.decode()
    js = kapp.get("/v1/docs/assets/swagger-ui-bundle.js", auth=False)
    assert js.status == 200 and len(js.body) > 100_000
    assert "http" not in page.body.decode().replace("http-equiv", "")
    assert kapp.get("/v1/docs/assets/..%2F..%2F__init__.py", auth=False).status == 404


# -- issue 13 item 6: one component name, one model

def test_code_search_is_documented_with_its_own_models(make_server):
    """The index and memory plugins both had models named SearchIn/SearchOut, and the memory
    ones won: code search was documented with the memory search body and answer."""
    server = make_server(plugins=["auth", "memory", "index"])
    doc = server.get("/v1/openapi.json", auth=False).json
    schemas = doc["components"]["schemas"]

    def model(path, part):
        op = doc["paths"][path]["post"]
        media = (op["requestBody"] if part == "body" else op["responses"]["200"])["content"]
        return schemas[media["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]

    code_in = model("/v1/projects/{project_id}/search", "body")
    code_out = model("/v1/projects/{project_id}/search", "response")
    memory_in = model("/v1/projects/{project_id}/memories/search", "body")
    assert {"query", "n", "mode", "file_type"} <= set(code_in["properties"])
    assert "limit" not in code_in["properties"] and "limit" in memory_in["properties"]
    hit = schemas[code_out["properties"]["results"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert {"source_file", "line", "label", "file_type"} <= set(hit["properties"])


def test_two_models_with_one_component_name_stop_start_up(tmp_path):
    from kernel.app import StartupError
    from neuralmind import Model, hookimpl, operation
    from tests.support import make_kernel

    def resource(name, field):
        model = type(name, (Model,), {"__annotations__": {field: int}, "__module__": f"plugin_{field}"})

        class Resource:
            @operation(permission="projects.read", body=model, response=model)
            def on_post(self, req, resp):
                return req.context.body
        return Resource()

    class Clash:
        @hookimpl
        def register_routes(self, kernel):
            return [("/v1/one", resource("SearchIn", "a")), ("/v1/two", resource("SearchIn", "b"))]

    with pytest.raises(StartupError, match=r"SearchIn.*plugin_a.*plugin_b"):
        make_kernel(tmp_path, plugins=["auth"], extra_plugins=[Clash()])


def test_a_body_is_published_required_when_a_missing_one_is_refused(make_server, tmp_path):
    """Issue 13 item 7: bodies were all published ``required: false`` though a missing body
    of a model with required fields is a 422. Each operation's flag now says what it does."""
    server = make_server(plugins=["auth", "memory", "index"])
    (tmp_path / "r").mkdir()
    pid = server.register(tmp_path / "r")
    doc = server.get("/v1/openapi.json", auth=False).json
    seen = set()
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            if "requestBody" not in op or path.endswith(("/import", "/mcp")):
                continue  # JSONL and JSON-RPC bodies: their own tests
            # an id that does not exist: a refused body is 422 before the handler's 404
            r = server.request(method.upper(), path.replace("{project_id}", pid)
                               .replace("{rule_id}", "nope").replace("{memory_id}", "nope"))
            refused = r.status == 422
            assert op["requestBody"]["required"] is refused, (method, path, r.status)
            seen.add(refused)
    assert seen == {True, False}  # both kinds were checked
    assert doc["paths"]["/v1/projects"]["post"]["requestBody"]["required"] is True
    assert doc["paths"]["/v1/projects/{project_id}/build"]["post"]["requestBody"]["required"] is False


def _warming() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "embedder-warm"}


@pytest.mark.sqlite_only("the command's threads, whatever the store")
def test_the_cli_prints_the_document_without_loading_the_model(tmp_path, monkeypatch, capsys):
    """``neuralmind openapi`` exits as soon as it has printed: a model still loading in a
    thread at exit could abort the interpreter (exit 134). The home has no model yet, so a
    warm-up would still be deriving it when the command returns."""
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path))
    before = _warming()
    assert main(["openapi"]) == 0
    assert json.loads(capsys.readouterr().out)["openapi"] == "3.1.0"
    assert _warming() - before == set()
