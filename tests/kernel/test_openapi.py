"""The OpenAPI document is generated from the route table and valid under a real validator."""

from openapi_spec_validator import validate


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
