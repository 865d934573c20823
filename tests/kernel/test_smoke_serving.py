"""The kernel served by real gunicorn: guards and the envelope as a client sees them."""


def test_health_is_public_and_carries_headers(make_server):
    server = make_server()
    r = server.request("GET", "/v1/health", auth=False, headers={"X-Request-Id": "abc-123"})
    assert r.status == 200
    assert r.json["status"] == "ok"
    assert r.headers["x-request-id"] == "abc-123"
    assert r.headers["neuralmind-api-version"] == "1"
    assert r.headers["content-type"] == "application/json; charset=utf-8"


def test_projects_need_a_token(make_server, repo):
    server = make_server()
    assert server.request("GET", "/v1/projects", auth=False).status == 401
    r = server.post("/v1/projects", {"path": str(repo)})
    assert r.status == 201
    assert r.headers["location"] == f"/v1/projects/{r.json['id']}"
    assert server.post("/v1/projects", {"path": str(repo)}).status == 200
