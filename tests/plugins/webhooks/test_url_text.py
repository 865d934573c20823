"""URLs HTTP cannot send: a non-ASCII host, path or query is refused when a hook is made or
changed (http.client writes the request line as ASCII and the Host header as Latin-1, so such
a hook once raised at every try, before the try was recorded, and the sender retried it in a
loop at full speed, logging megabytes). A hook stored with one before, or a try that fails in
a way nobody foresaw, fails its deliveries like any other failed try: recorded, retried after
a back-off, failed after the last try, the hook disabled. Both backends, a real receiver."""

from __future__ import annotations

import socket
import time

import pytest

from tests.plugins.webhooks.conftest import FAST, emitted, subscribe
from tests.plugins.webhooks.test_delivery import deliveries, emit, settled

# three tries 0.2 s and 0.4 s apart, and a failure streak of 0.3 s disables the hook
QUICK = FAST + "attempts = 3\ndisable_after_s = 0.3\n"


@pytest.fixture
def quick(make_server):
    return make_server(plugins=["auth", "webhooks"], config=QUICK)


def url_error(r) -> str:
    """The message of a 422 refusing ``url``, checked to be that refusal."""
    assert r.status == 422, r.body
    errors = r.error["details"]["errors"]
    assert [(e["loc"], e["type"]) for e in errors] == [(["body", "url"], "url_refused")]
    assert r.error["code"] == "validation_error" and r.error["message"] == errors[0]["msg"]
    return r.error["message"]


NOT_ASCII = [
    ("/日本", "a URL's path and query must be ASCII; this one holds '日': percent-encode it "
              "as its UTF-8 bytes, %E6%97%A5"),
    ("/?x=é", "holds 'é': percent-encode it as its UTF-8 bytes, %C3%A9"),
    ("/\u202eh", "holds '\\u202e': percent-encode it as its UTF-8 bytes, %E2%80%AE"),
    ("/a\x80", "holds '\\x80': percent-encode it as its UTF-8 bytes, %C2%80"),
    ("/a\u3000b", "a URL cannot hold '\\u3000' (percent-encode it: %E3%80%80)"),
]


@pytest.mark.parametrize("tail, why", NOT_ASCII, ids=["cjk-path", "query", "bidi-override",
                                                     "c1-control", "ideographic-space"])
def test_a_path_or_query_that_is_not_ascii_is_refused_with_its_encoding(served, receiver,
                                                                        tail, why):
    url = f"http://127.0.0.1:{receiver.port}{tail}"
    message = url_error(served.post("/v1/webhooks", {"url": url, "events": ["*"]}))
    assert why in message and "no request could be sent to it" in message
    assert tail not in message  # the path may hold a token: only the character is named
    assert served.get("/v1/webhooks").json["items"] == []


@pytest.mark.parametrize("host, ascii_form", [
    ("ｌｏｃａｌｈｏｓｔ", "localhost"),
    ("１２７.０.０.１", "127.0.0.1"),
    ("bücher.example", "xn--bcher-kva.example"),
], ids=["full-width-name", "full-width-digits", "idn"])
def test_a_host_that_is_not_ascii_is_refused_with_its_punycode_form(served, host, ascii_form):
    message = url_error(served.post("/v1/webhooks", {"url": f"http://{host}:9/hook",
                                                     "events": ["*"]}))
    assert message == (f"the host '{host}' is not ASCII: write its ASCII (punycode) form, "
                       f"{ascii_form}; no request could be sent to it")
    assert served.get("/v1/webhooks").json["items"] == []


def test_a_change_to_a_url_that_is_not_ascii_is_refused_and_the_hook_kept(served, receiver):
    hook = subscribe(served, receiver, events=["memory.*"])
    for url in (f"http://127.0.0.1:{receiver.port}/日本", f"http://ｌｏｃａｌｈｏｓｔ:{receiver.port}/"):
        url_error(served.patch(f"/v1/webhooks/{hook['id']}", {"url": url}))
    after = served.get(f"/v1/webhooks/{hook['id']}").json
    assert after["url"] == receiver.url and after["updated_at"] == hook["updated_at"]
    emit(served, "memory.created", id="m1")  # it still delivers where it did
    assert receiver.wait(1)[0].event == "memory.created"


def fails_like_any_failed_try(server, hook_id: str, error: str) -> None:
    """The hook's one delivery tried three times with a back-off and failed, with ``error``;
    the hook disabled for it; the sender never failing to record a try."""
    def events(items: list[dict]) -> list[dict]:  # a ping the test sent aside
        return [d for d in items if d["kind"] == "memory.created"]

    failed = events(settled(server, hook_id, lambda items: events(items)
                            and events(items)[0]["status"] == "failed"))
    assert [(d["attempts"], d["last_status_code"]) for d in failed] == [(3, None)]
    assert failed[0]["last_error"].startswith(error)
    assert failed[0]["next_attempt_at"] is None
    first = failed[0]["created_at"]
    assert failed[0]["last_attempt_at"] > first  # tries spread by the back-off, not at once
    disabled = emitted(server, "webhook.disabled")
    assert [e.data["webhook_id"] for e in disabled] == [hook_id]
    got = server.get(f"/v1/webhooks/{hook_id}").json
    assert got["enabled"] is False and "every try failed for" in got["disabled_reason"]
    time.sleep(0.5)  # ten polls: nothing more is tried
    assert [d["attempts"] for d in events(deliveries(server, hook_id))] == [3]
    assert "recording delivery" not in server.output()


def test_a_hook_stored_with_a_url_that_is_not_ascii_fails_its_deliveries(quick, receiver):
    """As a release before the check stored it: written through the plugin's store."""
    hook = subscribe(quick, receiver, events=["memory.*"])
    bad = f"http://127.0.0.1:{receiver.port}/日本"
    quick.kernel.state("webhooks").store.change_hook(hook["id"], {"url": bad})
    assert quick.get(f"/v1/webhooks/{hook['id']}").json["url"] == bad
    ping = quick.post(f"/v1/webhooks/{hook['id']}/test")
    assert ping.status == 200, ping.body
    assert ping.json["status"] == "failed" and ping.json["attempts"] == 1
    assert ping.json["last_error"].startswith("refused: a URL's path and query must be ASCII")
    emit(quick, "memory.created", id="m1")
    fails_like_any_failed_try(quick, hook["id"], "refused: a URL's path and query must be "
                              "ASCII; this one holds '日'")
    assert receiver.received == []  # nothing was sent


class BrokenDNS:
    """A resolver (outside us) that first answers the receiver's address, then garbage."""

    def __init__(self):
        self.answer = "127.0.0.1"

    def __call__(self, host: str, port: int) -> list[str]:
        if host != "hooks.example.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [self.answer]


def test_a_try_that_fails_in_an_unforeseen_way_is_a_failed_try(quick, receiver):
    """Whatever a try raises is its failure, recorded: never an exception that skips the
    record and leaves the delivery due at once."""
    dns = quick.kernel.state("webhooks").policy.resolve = BrokenDNS()
    hook = subscribe(quick, receiver, events=["memory.*"],
                     url=f"http://hooks.example.test:{receiver.port}/hook")
    dns.answer = "not an address"
    emit(quick, "memory.created", id="m1")
    fails_like_any_failed_try(quick, hook["id"], "ValueError: 'not an address' does not "
                              "appear to be an IPv4 or IPv6 address")
    assert receiver.received == []
    # logged as the bug it may be, with the host only (a URL's path may hold a token)
    assert "webhooks: a try to hooks.example.test failed unexpectedly" in quick.output()
    assert "/hook" not in quick.output()
