"""``neuralmind webhook …`` as a user runs it (the CLI's ``main`` in this process) against a
server: the secret printed once, a ping, deliveries, and wrong input explained."""

from __future__ import annotations

import json

import pytest

from tests.support import run_cli


@pytest.fixture
def cli(served):
    env = {"NEURALMIND_HOME": str(served.home), "NEURALMIND_PLUGINS": "auth,webhooks"}

    def run(*args: str) -> tuple[int, str, str]:
        return run_cli("webhook", *args, "--url", served.url, "--token", served.token, env=env)
    return run


def test_a_hook_from_add_to_delete(cli, receiver):
    code, out, err = cli("add", receiver.url, "-e", "memory.*", "-e", "project.*", "-d", "CI bot")
    assert code == 0, err
    secret = out.strip().splitlines()[-2].removeprefix("secret: ")
    assert secret.startswith("whsec_") and "shown once" in out
    receiver.secret = secret
    hook_id = next(line.split()[1] for line in out.splitlines() if line.startswith("id "))
    code, out, _ = cli("list")
    assert code == 0 and hook_id in out and secret not in out
    code, out, err = cli("test", hook_id)
    assert code == 0 and out.startswith("ping dl_") and "delivered, answered 200" in out, (out, err)
    assert receiver.wait(1, kind="ping")[0].verified
    code, out, _ = cli("deliveries", hook_id, "--json")
    assert [d["kind"] for d in json.loads(out)] == ["ping"]
    code, out, _ = cli("rotate-secret", hook_id, "--keep-previous", "60")
    assert code == 0 and "the previous secret also signs until" in out
    code, out, _ = cli("update", hook_id, "--disable")
    assert code == 0 and "paused by local" in out
    code, out, _ = cli("delete", hook_id)
    assert code == 0 and f"deleted webhook {hook_id}" in out
    code, _, err = cli("show", hook_id)
    assert code == 1 and f"no webhook with id {hook_id} [webhook_not_found, status 404" in err


def test_a_failing_ping_exits_1_with_what_the_receiver_said(cli, receiver):
    code, out, _ = cli("add", receiver.url, "-e", "memory.*", "--json")
    receiver.answer(503)
    code, out, _ = cli("test", json.loads(out)["id"])
    assert code == 1 and "failed: answered 503" in out


@pytest.mark.parametrize("args, said", [
    (("add", "http://10.0.0.1/hook", "-e", "*"),
     "neuralmind: 10.0.0.1, a private address: webhooks are not sent inside the network unless "
     "an operator lists the range in [webhooks] allow_private (e.g. \"10.0.0.1/32\") "
     "[validation_error, status 422, request "),
    (("add", "ftp://example.com/", "-e", "*"), "only http:// and https:// URLs"),
    (("add", "http://127.0.0.1:9/", "-e", "Memory"),  # what is wrong leads its one line
     "neuralmind: events[0]: 'Memory' is not an event kind (lower case, like memory.created)"),
    (("add", "http://127.0.0.1:9/", "-e", "Memory"),
     "(the request did not validate) [validation_error, status 422, request "),
    (("add", "http://127.0.0.1:9/", "-e", "*", "-p", "nope"), "no project with id nope"),
    (("update", "wh_0000000000000000", "--event", "x"), "no webhook with id wh_0000000000000000"),
    (("update", "wh_0000000000000000"), "nothing to change: give --target, --event"),
    (("rotate-secret", "wh_0000000000000000", "--keep-previous", "999999"),
     "argument --keep-previous: 999999 is outside 0–86400"),
    (("deliveries", "wh_0000000000000000", "--limit", "0"),
     "argument --limit: 0 is less than 1"),
    (("add", "http://127.0.0.1:9/"), "the following arguments are required: --event/-e"),
    (("redeliver", "wh_0000000000000000"), "the following arguments are required: delivery"),
])
def test_wrong_input_says_what_is_wrong(cli, args, said):
    code, out, err = cli(*args)
    assert code in (1, 2) and said in err, (code, out, err)
    assert out == ""
