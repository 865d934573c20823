"""Guards and the error envelope over HTTP: in process, and through a real 2-worker gunicorn
for chunked bodies (gunicorn decodes them; the in-process server does not)."""

import json
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.support import request


def assert_envelope(r, status, code=None):
    assert r.status == status, r.body
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    err = r.error
    assert set(err) == {"code", "message", "status", "request_id", "details"}
    assert err["status"] == status
    assert err["request_id"] == r.headers["x-request-id"]
    if code:
        assert err["code"] == code


def test_request_id_echoed_when_valid_else_generated(kapp):
    assert kapp.get("/v1/hello", headers={"X-Request-Id": "Req-1"}).headers["x-request-id"] == "Req-1"
    for bad in ["has space", "x" * 65, "semi;colon", "ünï"]:
        rid = kapp.get("/v1/hello", headers={"X-Request-Id": bad}).headers["x-request-id"]
        assert rid != bad and len(rid) == 32


def test_version_and_content_type_on_success_and_error(kapp):
    for r in (kapp.get("/v1/hello"), kapp.get("/v1/nope")):
        assert r.headers["neuralmind-api-version"] == "1"
        assert r.headers["content-type"] == "application/json; charset=utf-8"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:1", "[::1]:8765", "LOCALHOST"])
def test_loopback_hosts_accepted(kapp, host):
    assert kapp.get("/v1/hello", headers={"Host": host}).status == 200


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.nip.io", "10.0.0.1", ""])
def test_other_hosts_refused(kapp, host):
    assert_envelope(kapp.get("/v1/hello", headers={"Host": host}), 403, "host_not_allowed")


def test_no_token_is_401_before_validation(kapp):
    r = kapp.request("POST", "/v1/hello/jobs", auth=False, body=b"{bad", headers={
        "Content-Type": "application/json"})
    assert_envelope(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"


def test_wrong_token_and_wrong_scheme(kapp):
    assert_envelope(kapp.get("/v1/hello", token="nm_wrong"), 401)
    assert_envelope(kapp.get("/v1/hello", auth=False, headers={
        "Authorization": f"Basic {kapp.token}"}), 401)


@pytest.mark.parametrize("param", ["token", "access_token", "api_key"])
def test_token_in_query_refused_even_when_valid(kapp, param):
    r = kapp.request("GET", f"/v1/hello?{param}={kapp.token}", auth=False)
    assert_envelope(r, 400, "token_in_query")


def test_body_over_cap_by_content_length(kapp):
    body = json.dumps({"seconds": 0, "pad": "x" * (1024 * 1024)}).encode()
    assert_envelope(kapp.post("/v1/hello/jobs", body=body, headers={
        "Content-Type": "application/json"}), 413, "payload_too_large")


def test_chunked_body_over_cap_refused_without_reading_it_all(kserver):
    token = kserver.token
    with socket.create_connection(("127.0.0.1", kserver.port), timeout=10) as sock:
        head = (f"POST /v1/hello/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        sock.sendall(head.encode())
        chunk = b"x" * 65536
        sent = 0
        try:
            while sent < 1024 * 1024 + 2 * 65536:
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may answer and close before we finish: that is the point
        reply = ""
        while '"payload_too_large"' not in reply:  # the body may follow the head separately
            chunk = sock.recv(65536).decode(errors="replace")
            if not chunk:
                break
            reply += chunk
    assert reply.startswith("HTTP/1.1 413"), reply[:200]
    assert '"payload_too_large"' in reply


def test_small_chunked_body_accepted(kserver):
    token = kserver.token
    body = b'{"seconds": 0, "wait": true}'
    with socket.create_connection(("127.0.0.1", kserver.port), timeout=10) as sock:
        sock.sendall((f"POST /v1/hello/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                      "Connection: close\r\n\r\n").encode()
                     + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    assert b'"status":"done"' in reply


@pytest.mark.parametrize("chunks", [b"zz\r\n{}\r\n0\r\n\r\n", b"-2\r\n{}\r\n0\r\n\r\n",
                                    b"2\r\n{}}}\r\n0\r\n\r\n"])
def test_a_malformed_chunked_body_is_a_400(kserver, chunks):
    status, _, body = raw_exchange(kserver.port, (
        f"POST /v1/hello/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        f"{kserver.token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n").encode() + chunks)
    error = json.loads(body)["error"]
    assert status == 400 and error["code"] == "bad_request", body[:300]
    assert error["message"] == "the request's chunked body is malformed"
    assert error["details"]["reason"] in ("InvalidChunkSize", "ChunkMissingTerminator")


def test_a_body_too_large_for_the_server_is_a_413_to_the_client_not_a_dead_daemon(kserver):
    """gunicorn answers 413 and closes under an upload it will not read: the client's send
    breaks, and the client says why rather than that no server is there."""
    from neuralmind.client import NeuralMindAPIError, NeuralMindClient
    nm = NeuralMindClient(url=kserver.url, token=kserver.token)
    with pytest.raises(NeuralMindAPIError) as refused:
        nm.request("POST", "/v1/hello/jobs", data=b"x" * (24 * 1024 * 1024),
                   headers={"Content-Type": "application/json"})
    assert (refused.value.status, refused.value.code) == (413, "payload_too_large")
    assert "larger than the" in refused.value.message and "max_body_bytes" in refused.value.message


def raw_exchange(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``data`` as it is and read the answer to its end (gunicorn closes after an error)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("what, status, code", [
    ("line", 414, "uri_too_long"), ("headers", 431, "headers_too_large"),
    ("garbage", 400, "bad_request")])
def test_what_gunicorn_refuses_is_answered_with_the_envelope(kserver, what, status, code):
    """Issue 13 item 4: gunicorn answers a request it cannot parse before the app sees it;
    that answer is the error envelope too, never its HTML page."""
    request = {
        "line": b"GET /v1/health?q=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "headers": b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   + b"".join(b"X-Pad-%d: x\r\n" % i for i in range(120)) + b"\r\n",
        "garbage": b"GET /v1/health NOT-HTTP\r\nHost: 127.0.0.1\r\n\r\n"}[what]
    got, headers, body = raw_exchange(kserver.port, request)
    assert got == status, body[:300]
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert (error["code"], error["status"]) == (code, status)
    assert set(error) == {"code", "message", "status", "request_id", "details"}
    assert error["message"] == {  # ours; gunicorn's words only as details.reason
        414: "the request line is longer than 8,190 bytes",
        431: "the request has more than 100 headers, or one longer than 8,190 bytes",
        400: "the request is not HTTP/1.x the server can read"}[status]
    assert error["details"]["reason"]


def test_a_long_request_line_within_8k_reaches_the_kernel(kserver):
    """gunicorn's default request-line cap (4094 bytes) would refuse a long query string the
    kernel can answer: the cap is gunicorn's maximum, 8190, so the kernel answers first."""
    r = request(kserver.port, "GET", "/v1/health?q=" + "a" * 6000)
    assert r.status == 200 and r.json["status"] == "ok"


def test_no_control_socket_is_shared_between_servers(kserver):
    """Issue 13 item 5: gunicorn's default control socket (~/.gunicorn/gunicorn.ctl) is one
    per user, so two servers would share it and delete each other's: ours runs without one."""
    home = Path(kserver.env["HOME"])
    assert list(home.rglob("gunicorn.ctl")) == []
    assert "control socket" not in kserver.output().lower()


def test_body_must_be_json(kapp):
    r = kapp.post("/v1/hello/jobs", body=b"seconds=1", headers={"Content-Type": "text/plain"})
    assert_envelope(r, 415, "unsupported_media_type")


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe{}", b"{'a': 1}", b"[1,"])
def test_malformed_or_non_utf8_json_is_400(kapp, raw):
    r = kapp.post("/v1/hello/jobs", body=raw, headers={"Content-Type": "application/json"})
    assert_envelope(r, 400, "invalid_json")


@pytest.mark.parametrize("raw", [rb'{"seconds": 1, "note": "rocket \ud83d"}',
                                 rb'{"seconds": 1, "note": "\ude00 alone"}'])
def test_a_lone_surrogate_escape_is_named_as_such(kapp, raw):
    """Valid JSON to Python's reader, what JavaScript writes of a string cut inside an emoji,
    and no character: said so, not "not valid UTF-8 JSON"."""
    r = kapp.post("/v1/hello/jobs", body=raw, headers={"Content-Type": "application/json"})
    assert_envelope(r, 400, "invalid_json")
    assert r.error["message"] == ("the body holds a lone surrogate escape (\\ud800–\\udfff "
                                  "without its pair), which is no character: send whole "
                                  "characters")


def test_validation_error_lists_each_error(kapp):
    r = kapp.post("/v1/hello/jobs", {"seconds": -1, "wait": "not-a-bool"})
    assert_envelope(r, 422, "validation_error")
    errors = r.error["details"]["errors"]
    assert {tuple(e["loc"]) for e in errors} == {("body", "seconds"), ("body", "wait")}
    assert all(set(e) == {"loc", "msg", "type"} for e in errors)


@pytest.mark.parametrize("body", [{"wait": 0}, {"wait": "true"}, {"seconds": "0"},
                                  {"seconds": False}, {"seconds": [0]}])
def test_a_body_of_the_wrong_type_is_refused_not_coerced(kapp, body):
    """Issue 13 item 8: a JSON body is validated strictly (``"wait": 0`` was read as false,
    ``"seconds": "0"`` as 0): a wrong type there is a client bug, and the answer says so."""
    r = kapp.post("/v1/hello/jobs", body)
    assert_envelope(r, 422, "validation_error")
    assert [e["loc"] for e in r.error["details"]["errors"]] == [["body", next(iter(body))]]


def test_an_integral_float_passes_as_an_integer_and_every_other_rule_still_holds(make_server,
                                                                                tmp_path):
    """``221.0`` is an integer in JSON Schema; validated again leniently, a body that then
    breaks a rule between fields (impact needs files or nodes) is a 422, not a 500."""
    server = make_server(plugins=["auth", "index"])
    (tmp_path / "r").mkdir()
    base = f"/v1/projects/{server.register(tmp_path / 'r')}"
    r = server.post(base + "/impact", {"limit": 221.0})
    assert r.status == 422 and "files or nodes" in r.error["details"]["errors"][0]["msg"]
    assert server.post(base + "/search", {"query": "x", "n": 5.0}).status != 422


def test_the_issues_examples_are_refused(make_server, tmp_path):
    server = make_server(plugins=["auth", "memory"])
    (tmp_path / "r").mkdir()
    base = f"/v1/projects/{server.register(tmp_path / 'r')}/memories"
    for path, body, field in [(base, {"title": "t", "rationale": "r", "confidence": False},
                               "confidence"),
                              (base + "/search", {"query": "t", "limit": "5"}, "limit")]:
        r = server.post(path, body)
        assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["body", field]
    assert server.get(base).json["items"] == []
    assert server.get(base + "?cursor=").status == 200


def test_a_query_string_is_still_read_as_text(kapp):
    """Query parameters are text on the wire: ``limit=5`` is a number, and an empty cursor
    is the first page."""
    first = kapp.get("/v1/projects?limit=5")
    assert first.status == 200
    assert kapp.get("/v1/projects?limit=5&cursor=").json == first.json
    assert kapp.get("/v1/jobs?cursor=").status == 200


def test_unknown_fields_are_ignored(kapp):
    r = kapp.post("/v1/hello/jobs", {"seconds": 0, "wait": True, "actor": "mallory"})
    assert r.status == 200 and r.json["status"] == "done"


def test_falcon_404_and_405_use_the_envelope(kapp):
    r = kapp.get("/v1/does-not-exist")
    assert_envelope(r, 404, "not_found")
    assert r.error["message"] == ("no route GET /v1/does-not-exist (GET /v1/openapi.json lists "
                                  "them)")
    # an id holding a slash reaches no route: the answer names the path it was read as
    r = kapp.get("/v1/jobs/..%2Fx")
    assert r.error["message"].startswith("no route GET /v1/jobs/../x ")
    r = kapp.request("PUT", "/v1/hello", body=b"")
    assert_envelope(r, 405, "method_not_allowed")
    allowed = r.error["details"]["allowed"]
    assert "GET" in allowed and "PUT" not in allowed
    assert r.error["message"] == f"/v1/hello takes {', '.join(allowed)}, not PUT"


def test_head_answers_as_get_without_the_body(kapp):
    for path in ("/v1/openapi.json", "/v1/hello", "/v1/projects/p_000000000000"):  # fixed sizes
        got, head = kapp.get(path), kapp.request("HEAD", path)
        assert (head.status, head.body) == (got.status, b""), path
        assert head.headers["content-length"] == str(len(got.body)), path
    health = kapp.request("HEAD", "/v1/health")  # its uptime moves its length
    assert (health.status, health.body) == (200, b"") and int(health.headers["content-length"])
    assert kapp.request("HEAD", "/v1/hello", auth=False).status == 401


header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=80)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e,
                                  blacklist_characters="#?%"), max_size=40),
       method=st.sampled_from(["GET", "POST", "PATCH", "DELETE", "PUT"]),
       body=st.one_of(st.binary(max_size=300), st.builds(lambda v: json.dumps(v).encode(),
                      st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=20),
                                   lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                                   max_leaves=10))),
       ctype=st.sampled_from(["application/json", "text/plain", "", "application/json; charset=latin-1"]),
       rid=header_text, auth=st.booleans())
def test_random_requests_never_500_and_always_enveloped(kapp, path, method, body, ctype, rid, auth):
    target = "/v1/" + path.lstrip("/")
    for p in (target, "/v1/hello/jobs", "/v1/projects"):
        headers = {"X-Request-Id": rid}
        if ctype:
            headers["Content-Type"] = ctype
        r = kapp.request(method, p, body=body if method != "GET" else None, headers=headers,
                            auth=auth)
        assert r.status < 500, (p, r.body)
        if r.status >= 400:
            assert set(r.error) == {"code", "message", "status", "request_id", "details"}
            assert r.error["status"] == r.status
