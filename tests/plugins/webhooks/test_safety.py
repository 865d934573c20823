"""Where a hook may send (checked when it is made and at every try, as DNS can change), and
which events reach it: only those its creator may read. DNS is outside us, so a test that
needs a name to answer differently swaps the service's resolver for a table."""

from __future__ import annotations

import socket
import ssl
import time

import pytest
import trustme

from tests.plugins.auth.helpers import create_token, server_config
from tests.plugins.webhooks.conftest import FAST, SERVED, subscribe
from tests.plugins.webhooks.receiver import Receiver
from tests.plugins.webhooks.test_delivery import Clock, emit, settled
from tests.support import LocalServer

PUBLIC = "93.184.216.34"


class DNS:
    """A name server the test controls."""

    def __init__(self, **answers: str):
        self.answers = {k.replace("_", "."): [v] for k, v in answers.items()}

    def __call__(self, host: str, port: int) -> list[str]:
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.answers[host]


def refused(server, url: str) -> dict:
    r = server.post("/v1/webhooks", {"url": url, "events": ["*"]})
    assert r.status == 422, (url, r.status, r.body)
    errors = r.error["details"]["errors"]
    assert [e["loc"] for e in errors] == [["body", "url"]]
    assert r.error["message"] == errors[0]["msg"]
    return r.error


@pytest.mark.parametrize("url, why", [
    ("http://127.0.0.1:9/hook", "127.0.0.1, a loopback address"),
    ("http://localhost:9/hook", "localhost resolves to"),
    ("http://[::1]/hook", "::1, a loopback address"),
    ("http://[::ffff:127.0.0.1]/hook", "127.0.0.1, a loopback address"),
    ("http://10.1.2.3/hook", "10.1.2.3, a private address"),
    ("http://192.168.1.10/hook", "a private address"),
    ("http://169.254.169.254/latest/meta-data/", "a link-local address (cloud metadata"),
    ("http://[fd00:ec2::254]/", "a private address"),
    ("http://100.64.0.1/", "100.64.0.1, not a public address"),
    ("http://0.0.0.0/", "the unspecified address"),
    ("http://224.0.0.1/", "a multicast address"),
    ("http://2130706433/", "2130706433 resolves to 127.0.0.1, a loopback address"),
    ("http://0177.0.0.1/", "resolves to 127.0.0.1, a loopback address"),
    # IPv6 forms that carry an IPv4 address to the IPv4 internet: NAT64, 6to4, Teredo
    ("http://[64:ff9b::a9fe:a9fe]/", "169.254.169.254, a link-local address"),
    ("http://[2002:a9fe:a9fe::]/", "169.254.169.254, a link-local address"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "192.0.2.45, a private address"),
    # IPv4-compatible and SIIT forms, reserved and site-local ranges (they were accepted)
    ("http://[::a9fe:a9fe]/", "169.254.169.254, a link-local address"),
    ("http://[::127.0.0.1]:18970/", "127.0.0.1, a loopback address"),
    ("http://[::ffff:0:7f00:1]/", "127.0.0.1, a loopback address"),
    ("http://[fec0::1]/", "fec0::1, a private address"),
    ("http://[4000::1]/", "4000::1, a reserved address"),
])
def test_targets_inside_the_network_are_refused_by_default(make_server, url, why):
    server = make_server(plugins=["auth", "webhooks"])
    error = refused(server, url)
    assert why in error["message"] and "[webhooks] allow_private" in error["message"]
    assert server.get("/v1/webhooks").json["items"] == []


def test_a_listed_range_lets_its_addresses_in_and_no_others(served):
    assert served.post("/v1/webhooks", {"url": "http://127.0.0.1:9/h", "events": ["*"]}
                       ).status == 201
    assert "127.0.0.2, a loopback address" in refused(served, "http://127.0.0.2:9/h")["message"]


@pytest.mark.parametrize("url, why", [
    ("ftp://example.com/hook", "only http:// and https:// URLs"),
    ("file:///etc/passwd", "only http:// and https:// URLs"),
    ("example.com/hook", "not a URL without a scheme"),
    ("http:///no-host", "the URL has no host"),
    ("http://user:pw@example.com/hook", "credentials in the URL"),
    ("https://example.com/hook#part", "a URL fragment"),
    ("http://example.com:99999/hook", "not a valid URL: its port is not a number from 1 to 65535"),
    ("http://example.com:x/hook", "not a valid URL: its port is not a number from 1 to 65535"),
    ("http://[::1/hook", "not a valid URL: its IPv6 address is not one, or its [ ] are not closed"),
    ("https://no-such-host.invalid/hook", "cannot resolve no-such-host.invalid"),
    ("http://example.com/x y", "a URL cannot hold ' ' (percent-encode it: %20)"),
    ("http://example.com/x\r\nX-Evil: 1", "a URL cannot hold '\\r'"),
    ("http://example.com/x\u0000y", "a URL cannot hold '\\x00'"),
    ("http://example.com:0/hook", "not a valid URL: its port is not a number from 1 to 65535"),
])
def test_urls_that_cannot_be_targets_say_why(served, url, why):
    served.kernel.state("webhooks").policy.resolve = DNS(example_com=PUBLIC)
    assert why in refused(served, url)["message"]


def test_dns_is_checked_again_at_every_try_and_the_checked_address_is_used(served, receiver):
    service = served.kernel.state("webhooks")
    clock = Clock()
    service.clock = clock
    dns = service.policy.resolve = DNS(hooks_example_test=PUBLIC)
    url = f"http://hooks.example.test:{receiver.port}/hook"
    hook = subscribe(served, receiver, events=["memory.*"], url=url)
    dns.answers["hooks.example.test"] = ["127.0.0.2"]  # rebound inside: refused at the try
    emit(served, "memory.created", id="m1")
    first = settled(served, hook["id"], lambda items: items and items[0]["attempts"] == 1)[0]
    assert first["status"] == "pending" and first["last_status_code"] is None
    assert first["last_error"].startswith("refused: hooks.example.test resolves to 127.0.0.2, "
                                          "a loopback address")
    assert receiver.received == []
    dns.answers["hooks.example.test"] = ["127.0.0.1"]  # the listed range: sent there, by name
    clock.now += 60
    service.sender.notify()
    got = receiver.wait(1)
    assert got[0].verified and receiver.headers[0]["Host"] == f"hooks.example.test:{receiver.port}"


def test_https_checks_the_name_on_the_certificate_and_trusts_the_operators_ca(make_server,
                                                                              tmp_path):
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.example.test").configure_cert(context)
    ca_file = tmp_path / "internal-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    receiver = Receiver(tls=context)
    try:
        answers = {}
        for name, extra, host in [("untrusted", "", "hooks.example.test"),
                                  ("trusted", f'ca_file = "{ca_file}"\n', "hooks.example.test"),
                                  ("other name", f'ca_file = "{ca_file}"\n', "other.example.test")]:
            server = make_server(plugins=["auth", "webhooks"], config=FAST + extra)
            server.kernel.state("webhooks").policy.resolve = DNS(**{
                host.replace(".", "_"): "127.0.0.1"})
            hook = subscribe(server, receiver, events=["memory.*"],
                             url=f"https://{host}:{receiver.port}/hook")
            answers[name] = server.post(f"/v1/webhooks/{hook['id']}/test").json
        assert answers["trusted"]["status"] == "delivered"
        assert receiver.taken()[-1].verified and receiver.taken()[-1].event == "ping"
        assert "CERTIFICATE_VERIFY_FAILED" in answers["untrusted"]["last_error"]
        assert "Hostname mismatch" in answers["other name"]["last_error"]
    finally:
        receiver.stop()


# -- server mode: https, and who receives what -------------------------------------------------

TEAM = """
[webhooks]
allow_private = ["127.0.0.1/32"]
insecure_http = true
builders_manage = true
poll_s = 0.05
"""


@pytest.fixture(scope="module")
def team(tmp_path_factory, backend):
    root = tmp_path_factory.mktemp("team")
    config = server_config(root, {"a": root / "repo-a", "b": root / "repo-b"}, TEAM)
    with LocalServer(root / "home", config=config, **SERVED) as server:
        cfg = server.home / "config.toml"
        server.tokens = {name: create_token(server.home, cfg, name, role, projects)["token"]
                         for name, role, projects in [("admin", "admin", "*"),
                                                      ("ana", "builder", "a"),
                                                      ("reader", "reader", "*")]}
        yield server


def as_(server, who: str, method: str, path: str, body=None):
    return server.request(method, path, json_body=body, token=server.tokens[who])


def test_server_mode_sends_over_https_unless_the_operator_allows_http(team, tmp_path):
    config = server_config(tmp_path, {"a": tmp_path / "repo-a"})
    with LocalServer(tmp_path / "home", config=config, **SERVED) as strict:
        strict.kernel.state("webhooks").policy.resolve = DNS(hooks_example_com=PUBLIC)
        admin = create_token(strict.home, strict.home / "config.toml", "admin", "admin")["token"]
        r = strict.request("POST", "/v1/webhooks", token=admin, json_body={
            "url": "http://hooks.example.com/h", "events": ["*"]})
        assert r.status == 422 and "https only" in r.error["message"]
        assert "[webhooks] insecure_http = true" in r.error["message"]
        r = strict.request("POST", "/v1/webhooks", token=admin, json_body={
            "url": "https://hooks.example.com/h", "events": ["*"]})
        assert r.status == 201, r.body
    # the team server allows http
    r = as_(team, "admin", "POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/", "events": ["*"]})
    assert r.status == 201
    assert as_(team, "admin", "DELETE", f"/v1/webhooks/{r.json['id']}").status == 204


def test_a_subscriber_receives_only_what_its_creator_may_read(team, tmp_path):
    admin_rx, ana_rx = Receiver(), Receiver()
    try:
        r = as_(team, "admin", "POST", "/v1/webhooks", {"url": admin_rx.url,
                                                        "events": ["memory.*", "token.*"]})
        admin_rx.secret, admin_hook = r.json["secret"], r.json["id"]
        r = as_(team, "ana", "POST", "/v1/webhooks", {"url": ana_rx.url, "events": ["memory.*",
                                                                                    "token.*"],
                                                      "projects": ["a"]})
        assert r.status == 201, r.body
        ana_rx.secret, ana_hook = r.json["secret"], r.json["id"]
        emit(team, "memory.created", "b", id="in-b")
        emit(team, "token.revoked", None, token_id="0123abcd")
        emit(team, "memory.created", "a", id="in-a")
        assert [x.json["data"].get("id") for x in ana_rx.wait(1)] == ["in-a"]
        got = admin_rx.wait(2, kind="memory.created") + admin_rx.wait(1, kind="token.revoked")
        assert [(x.event, x.json["project_id"]) for x in got] == [
            ("memory.created", "b"), ("memory.created", "a"), ("token.revoked", None)]
        assert all(x.verified for x in admin_rx.taken() + ana_rx.taken())

        # an admin may point ana's hook at project b: still nothing of b reaches it,
        # because a hook delivers what its creator may read
        r = as_(team, "admin", "PATCH", f"/v1/webhooks/{ana_hook}", {"projects": ["a", "b"]})
        assert r.status == 200 and r.json["created_by"] == "ana"
        emit(team, "memory.created", "b", id="in-b-again")
        emit(team, "memory.created", "a", id="in-a-again")
        assert [x.json["data"]["id"] for x in ana_rx.wait(2)] == ["in-a", "in-a-again"]
        time.sleep(0.2)
        assert len(ana_rx.taken()) == 2

        # ana manages the hooks of her projects only: the admin's is not there for her
        listed = [h["id"] for h in as_(team, "ana", "GET", "/v1/webhooks").json["items"]]
        assert admin_hook not in listed
        for method, tail, body in [("GET", "", None), ("PATCH", "", {"description": "x"}),
                                   ("DELETE", "", None), ("POST", "/test", None),
                                   ("POST", "/rotate-secret", None),
                                   ("GET", "/deliveries", None)]:
            r = as_(team, "ana", method, f"/v1/webhooks/{admin_hook}{tail}", body)
            assert r.status == 404 and r.error["code"] == "webhook_not_found", (method, tail)
        # ana's hook now names b, which she cannot read: out of her reach as well
        assert as_(team, "ana", "GET", f"/v1/webhooks/{ana_hook}").status == 404
    finally:
        admin_rx.stop()
        ana_rx.stop()


def test_a_builder_names_projects_it_can_read(team):
    url = "http://127.0.0.1:9/h"
    r = as_(team, "ana", "POST", "/v1/webhooks", {"url": url, "events": ["*"]})
    assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["body", "projects"]
    assert "null means every project" in r.error["message"]
    r = as_(team, "ana", "POST", "/v1/webhooks", {"url": url, "events": ["*"],
                                                  "projects": ["a", "b"]})
    assert r.status == 422 and r.error["message"] == "no project with id b"
    assert r.error["details"]["errors"][0]["loc"] == ["body", "projects", 1]
    nowhere = as_(team, "ana", "POST", "/v1/webhooks", {"url": url, "events": ["*"],
                                                        "projects": ["zz"]})
    assert nowhere.error["message"] == "no project with id zz"  # b and zz look the same
    r = as_(team, "reader", "POST", "/v1/webhooks", {"url": url, "events": ["*"]})
    assert r.status == 403 and r.error["details"]["permission"] == "webhooks.manage"


def test_builders_manage_nothing_unless_the_operator_allows_it(tmp_path):
    config = server_config(tmp_path, {"a": tmp_path / "repo-a"})
    with LocalServer(tmp_path / "home", config=config, **SERVED) as server:
        token = create_token(server.home, server.home / "config.toml", "bo", "builder")["token"]
        r = server.request("GET", "/v1/webhooks", token=token)
        assert r.status == 403 and r.error["details"]["permission"] == "webhooks.manage"


def test_a_config_mistake_stops_start_up_with_its_reason(tmp_path):
    for bad, said in [('allow_private = ["10.0.0.0/33"]',
                       "'10.0.0.0/33' is not an address or CIDR"),
                      (f'ca_file = "{tmp_path / "none.pem"}"', "is not a readable PEM file"),
                      ("lease_s = 5\ntimeout_s = 10", "must be at least twice timeout_s"),
                      ("retry_after = 3", "retry_after")]:
        with pytest.raises(Exception) as caught:
            LocalServer(tmp_path / "home", config=f"[webhooks]\n{bad}\n",
                        plugins=["auth", "webhooks"]).start()
        assert said in str(caught.value) and "[webhooks]" in str(caught.value)


@pytest.mark.sqlite_only("the mode of the file holding the secrets")
def test_the_database_holding_secrets_is_private(served):
    files = sorted(served.home.glob("webhooks.db*"))
    assert [f.name for f in files if f.name != "webhooks.db-writer"][:2] == [
        "webhooks.db", "webhooks.db-shm"]
    assert {f.name: f.stat().st_mode & 0o777 for f in files} == dict.fromkeys(
        [f.name for f in files], 0o600)
