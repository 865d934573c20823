"""CORS: exact origins only, checked at start-up; preflights answered for allowed origins
(in this process; ``neuralmind serve --allow-origin`` with a bad one, under gunicorn)."""

from __future__ import annotations

import pytest

from kernel.config import ConfigError
from plugins.auth.cors import check_origin
from tests.support import LocalServer, Server

ALLOWED = "https://app.example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    config = f'[server]\nallow_origins = ["{ALLOWED}", "http://localhost:3000"]\n'
    with LocalServer(tmp_path_factory.mktemp("cors") / "home", plugins=["auth"],
                     config=config) as s:
        yield s


def preflight(server, origin: str):
    return server.request("OPTIONS", "/v1/projects", auth=False, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})


def test_preflight_for_an_allowed_origin(server):
    r = preflight(server, ALLOWED)
    assert r.status == 204
    assert r.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "Authorization" in r.headers["access-control-allow-headers"]
    assert "Origin" in r.headers["vary"]
    assert "access-control-allow-credentials" not in r.headers


def test_preflight_for_another_origin_is_refused(server):
    for origin in ("https://evil.example", "https://app.example.com.evil.example",
                   "http://app.example.com", "null"):
        r = preflight(server, origin)
        assert (r.status, r.error["code"]) == (403, "origin_not_allowed"), origin
        assert "access-control-allow-origin" not in r.headers


def test_actual_requests_carry_the_origin_only_when_allowed(server):
    ok = server.get("/v1/projects", headers={"Origin": "http://localhost:3000"})
    assert ok.status == 200
    assert ok.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "X-Request-Id" in ok.headers["access-control-expose-headers"]
    denied = server.get("/v1/projects", auth=False, headers={"Origin": ALLOWED})
    assert denied.status == 401 and denied.headers["access-control-allow-origin"] == ALLOWED
    other = server.get("/v1/projects", headers={"Origin": "https://evil.example"})
    assert other.status == 200 and "access-control-allow-origin" not in other.headers


@pytest.mark.parametrize("origin", ["*", "https://*.example.com", "https://app.example.com/path",
                                    "https://app.example.com?x=1", "https://app.example.com#f",
                                    "https://user:pw@app.example.com", "ftp://app.example.com",
                                    "app.example.com", "https://", "https://app.example.com:99999"])
def test_bad_origins_are_refused(origin):
    with pytest.raises(ConfigError):
        check_origin(origin)


def test_origins_are_normalised():
    assert check_origin("HTTPS://App.Example.com/") == "https://app.example.com"
    assert check_origin("http://[::1]:8080") == "http://[::1]:8080"


@pytest.mark.sqlite_only("a start-up refusal, before any storage opens")
def test_a_bad_origin_stops_the_server_booting(tmp_path):
    s = Server(tmp_path / "home", plugins=["auth"], args=["--allow-origin", "https://*.example.com"])
    with pytest.raises(RuntimeError) as failed:
        s.start(timeout=30)
    s.stop()
    assert "wildcards are not allowed" in str(failed.value)
    assert "listening" not in str(failed.value)  # refused before gunicorn forks, not by a worker
