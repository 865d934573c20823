"""How the client finds the server: arguments, then NEURALMIND_API_URL/TOKEN, then the
daemon's discovery file, then $NEURALMIND_HOME/token; autostart; what happens when nothing
answers; and why importing the client is free."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
from contextlib import contextmanager

import pytest

from neuralmind.client import (DaemonNotRunning, NeuralMindClient, NotAServerURL, TimedOut,
                               Unauthorized)
from tests.client.conftest import Daemon, git_repo
from tests.support import ROOT, LocalServer, free_port, run_cli


@contextmanager
def held(home, **info):
    """``home``'s daemon.json naming ``info``'s server as a daemon writes it, with this process
    holding the home as that daemon does (``.daemon.lock``, its pid): a client counts the file
    only while its daemon holds the home."""
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / ".daemon.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, str(os.getpid()).encode())
    if info:
        announce(home, **info)
    try:
        yield
    finally:
        os.close(fd)


def announce(home, **info):
    (home / "daemon.json").write_text(json.dumps({**info, "pid": os.getpid()}))


def test_discovery_file_gives_url_and_token(daemon, monkeypatch):
    monkeypatch.delenv("NEURALMIND_API_URL", raising=False)
    monkeypatch.delenv("NEURALMIND_API_TOKEN", raising=False)
    monkeypatch.setenv("NEURALMIND_HOME", str(daemon.home))
    info = daemon.info
    assert info["url"] == daemon.url and info["token"] == daemon.token
    nm = NeuralMindClient()
    assert (nm.url, nm.token) == (daemon.url, daemon.token)
    assert nm.projects.page().items is not None


def test_token_file_when_discovery_has_none(daemon, tmp_path, monkeypatch):
    home = tmp_path / "other"
    home.mkdir()
    (home / "token").write_text(daemon.token + "\n")
    with held(home, url=daemon.url):
        nm = NeuralMindClient(home=home)
        assert nm.token == daemon.token
        assert nm.health()["status"] == "ok" and nm.projects.page() is not None


def test_this_machines_token_goes_to_its_own_server_alone(tmp_path, monkeypatch):
    """The daemon's token went to any URL given without a token (a team server, a mistyped
    host): it goes to the daemon's address alone, and the home's token file to a loopback
    address alone."""
    from neuralmind.client import discover
    monkeypatch.delenv("NEURALMIND_API_URL", raising=False)
    monkeypatch.delenv("NEURALMIND_API_TOKEN", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "token").write_text("nm_file\n")
    with held(home, url="http://127.0.0.1:8765", token="nm_daemon"):
        assert discover(home=home) == ("http://127.0.0.1:8765", "nm_daemon")
        assert discover("http://127.0.0.1:8765/v1", home=home) == ("http://127.0.0.1:8765",
                                                                   "nm_daemon")
        assert discover("https://nm.internal:8765", home=home) == ("https://nm.internal:8765", None)
        assert discover("http://127.0.0.1:9000", home=home) == ("http://127.0.0.1:9000", "nm_file")
        monkeypatch.setenv("NEURALMIND_API_URL", "http://10.0.0.5:8765")
        assert discover(home=home) == ("http://10.0.0.5:8765", None)
        assert discover("https://nm.internal:8765", token="t", home=home)[1] == "t"
        (home / "daemon.json").write_text('["http://127.0.0.1:8765"]')  # JSON, but no daemon's
        monkeypatch.delenv("NEURALMIND_API_URL")
        assert discover(home=home) == (None, None)


def test_a_call_while_the_daemon_was_down_does_not_stop_the_client(tmp_path, monkeypatch):
    """A client whose call found no daemon finds the one started afterwards (it kept raising
    "holds no address" for good)."""
    monkeypatch.delenv("NEURALMIND_API_URL", raising=False)
    monkeypatch.delenv("NEURALMIND_API_TOKEN", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    nm = NeuralMindClient(home=home)
    with pytest.raises(DaemonNotRunning, match="daemon.json does not exist"):
        nm.health()
    with LocalServer(tmp_path / "server", plugins=["auth"]) as server, \
            held(home, url=server.url, token=server.token):
        assert nm.health()["status"] == "ok" and nm.projects.page().items == []


def test_environment_overrides_discovery(daemon, tmp_path, monkeypatch):
    home = tmp_path / "stale"
    home.mkdir()
    (home / "daemon.json").write_text(json.dumps({"url": f"http://127.0.0.1:{free_port()}",
                                                  "token": "nm_stale"}))
    monkeypatch.setenv("NEURALMIND_HOME", str(home))
    monkeypatch.setenv("NEURALMIND_API_URL", daemon.url + "/")
    monkeypatch.setenv("NEURALMIND_API_TOKEN", daemon.token)
    nm = NeuralMindClient()
    assert (nm.url, nm.token) == (daemon.url, daemon.token)
    assert list(nm.projects.list()) is not None
    monkeypatch.setenv("NEURALMIND_API_TOKEN", "nm_wrong")
    with pytest.raises(Unauthorized):
        NeuralMindClient().projects.page()
    explicit = NeuralMindClient(daemon.url, token=daemon.token)  # arguments beat the environment
    assert explicit.projects.page() is not None


def test_no_daemon_is_a_friendly_error(tmp_path, monkeypatch):
    monkeypatch.delenv("NEURALMIND_API_URL", raising=False)
    monkeypatch.setattr("neuralmind.client.BACKOFF_S", 0.01)  # the retries, without the waits
    nm = NeuralMindClient(home=tmp_path)
    with pytest.raises(DaemonNotRunning, match=r"daemon\.json does not exist\. Start one with "
                                               r"`neuralmind daemon start`"):
        nm.health()
    (tmp_path / "daemon.json").write_text("{half a file")  # a disk that filled up mid-write
    with pytest.raises(DaemonNotRunning, match=r"daemon\.json holds no address \(it is "
                                               r"damaged\)\. Start one with"):
        NeuralMindClient(home=tmp_path).health()
    dead = NeuralMindClient(f"http://127.0.0.1:{free_port()}", token="x")
    with pytest.raises(DaemonNotRunning, match="cannot reach"):
        dead.health()


def test_a_url_that_is_no_server_url_is_named_with_where_it_came_from(tmp_path, monkeypatch):
    monkeypatch.delenv("NEURALMIND_API_URL", raising=False)
    with pytest.raises(NotAServerURL) as given:
        NeuralMindClient(url="notaurl", home=tmp_path)
    assert isinstance(given.value, ValueError)
    assert str(given.value) == ("notaurl (given) is not a server URL such as "
                                "http://127.0.0.1:8765: it needs http:// or https:// and a host")
    monkeypatch.setenv("NEURALMIND_API_URL", "ftp://host/x")
    with pytest.raises(NotAServerURL, match=r"^ftp://host/x \(from NEURALMIND_API_URL\)"):
        NeuralMindClient(home=tmp_path)


def test_cli_says_how_to_start_a_daemon(tmp_path):
    d = Daemon(tmp_path)
    proc = d.run("project", "list")
    assert proc.returncode == 1
    assert "neuralmind daemon start" in proc.stderr and "Traceback" not in proc.stderr


def test_two_ups_at_once_start_one_daemon_and_autostart_finds_it(tmp_path, monkeypatch):
    """Two `up` at once: one starts the daemon and says so, the other finds it (both said
    "started" before); against a server without the index plugin each registers and says
    there is nothing to build. A client's autostart finds the daemon running."""
    d = Daemon(tmp_path, plugins=["auth"])
    for key, value in d.env.items():
        if key.startswith("NEURALMIND"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("NEURALMIND_API_URL", raising=False)
    repo = git_repo(tmp_path / "plain", {"a.py": "a = 1\n"})
    try:
        ups = [subprocess.Popen([sys.executable, "-m", "neuralmind.cli", "up"], cwd=repo,
                                env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
        said = [up.communicate(timeout=120) for up in ups]
        assert [up.returncode for up in ups] == [0, 0], said
        firsts = sorted(out.splitlines()[0].split(" at ")[0] for out, _ in said)
        assert firsts == ["daemon already running", "started the daemon"], said
        assert all("index plugin is not enabled" in out for out, _ in said)
        nm = NeuralMindClient(autostart=True)
        assert nm.url == d.url and nm.token == d.token  # running: not started again
        assert nm.health()["status"] == "ok"
        assert d.info["pid"] == json.loads((d.home / "daemon.json").read_text())["pid"]
        assert [p.path for p in nm.projects.list()] == [str(repo)]
    finally:
        d.stop()
    assert not (d.home / "daemon.json").exists()


def test_import_pulls_in_no_third_party_package():
    code = ("import sys, neuralmind.client; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'pydantic', 'falcon', 'pluggy', 'kernel', 'numpy', 'gunicorn'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_a_write_finds_a_daemon_that_restarted_on_another_port(tmp_path, monkeypatch):
    """A refused connection sent nothing: the write goes once to the port the discovery file
    names now (the client's home reads a server's discovery file as the daemon's)."""
    monkeypatch.setattr("neuralmind.client.BACKOFF_S", 0.01)
    home, repo = tmp_path / "client", tmp_path / "repo"
    home.mkdir(), repo.mkdir()

    with held(home):
        with LocalServer(tmp_path / "server", plugins=["auth", "memory"]) as first:
            announce(home, url=first.url, token=first.token)
            nm = NeuralMindClient(home=home)
            memories = nm.project(repo).memories
            memories.add("Use SQLite", "one file")
        with LocalServer(tmp_path / "server", plugins=["auth", "memory"]) as again:
            announce(home, url=again.url, token=again.token)
            memories.add("Use WAL", "readers do not block")
            assert [m.title for m in memories.list()] == ["Use WAL", "Use SQLite"]
            assert nm.url == again.url
        # nothing answers now: every call, a streamed one too, says so the same way
        for call in (lambda: memories.add("lost", "no server"), lambda: list(memories.export()),
                     lambda: nm.mcp({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
                     lambda: nm.events()):
            with pytest.raises(DaemonNotRunning, match=r"cannot reach NeuralMind at http://"):
                call()


@pytest.mark.parametrize("url, why", [
    ("http://u:p@127.0.0.1:8765", "credentials go in the token, not the URL"),
    ("http://127.0.0.1:abc", "its port is not a number from 1 to 65535"),
    ("http://127.0.0.1:8765?x=1", "it holds a query or a fragment"),
    ("http://127.0.0.1:8765#top", "it holds a query or a fragment"),
    (8765, "it is int, not text"),
    ("http://[::1", r"its host is not an address \(Invalid IPv6 URL\)"),
    ("http://[zz]:1", r"its host is not an address \('zz' does not appear to be an IPv4 or "
                      r"IPv6 address\)"),
])
def test_a_url_no_path_can_be_added_to_is_refused_when_the_client_is_made(url, why, tmp_path):
    with pytest.raises(NotAServerURL, match=f"is not a server URL such as "
                                            f"http://127.0.0.1:8765: {why}$"):
        NeuralMindClient(url, token="t", home=tmp_path)


@pytest.mark.parametrize("kw, said", [
    ({"timeout": 0}, "timeout must be a number of seconds above 0, not 0"),
    ({"timeout": -1}, "timeout must be a number of seconds above 0, not -1"),
    ({"token": "abc\ndef"}, "the token holds characters no HTTP header carries"),
    ({"token": "токен"}, "the token holds characters no HTTP header carries"),
])
def test_a_timeout_or_token_no_request_can_carry_is_a_value_error(kw, said, tmp_path):
    with pytest.raises(ValueError, match=said):
        NeuralMindClient("http://127.0.0.1:8765", **{"token": "t", **kw}, home=tmp_path)


def test_the_address_up_prints_with_its_v1_is_the_servers_root(tmp_path):
    """`up` prints the API's address (…/v1); given back as --url, it names the server."""
    assert NeuralMindClient("http://127.0.0.1:8765/v1/", token="t",
                            home=tmp_path).url == "http://127.0.0.1:8765"
    assert NeuralMindClient("https://example.org/nm", token="t",
                            home=tmp_path).url == "https://example.org/nm"


def test_what_fails_on_the_way_to_a_server_is_the_clients_own_error(tmp_path, monkeypatch):
    monkeypatch.setattr("neuralmind.client.BACKOFF_S", 0.01)
    with pytest.raises(DaemonNotRunning, match=r"^cannot reach NeuralMind at "
                                               r"http://no-such-host\.invalid:8765 \(given\): "):
        NeuralMindClient("http://no-such-host.invalid:8765", token="t", home=tmp_path).health()
    with LocalServer(tmp_path / "server", plugins=["auth"]) as server:
        tls = NeuralMindClient(server.url.replace("http:", "https:"), token=server.token,
                               home=tmp_path)
        with pytest.raises(DaemonNotRunning, match="WRONG_VERSION_NUMBER"):
            tls.health()
    with socket.create_server(("127.0.0.1", 0)) as hung:  # takes the connection, never answers
        nm = NeuralMindClient(f"http://127.0.0.1:{hung.getsockname()[1]}", token="t",
                              home=tmp_path)
        with pytest.raises(TimedOut, match=r"^GET /v1/projects: no answer from "
                                           r"http://127\.0\.0\.1:\d+ within 0\.2 s \(a longer "
                                           r"timeout= for this call waits more\)$"):
            nm.request("GET", "/v1/projects", timeout=0.2)
    # autostart starts the local daemon only, never one for a URL it was given
    with pytest.raises(DaemonNotRunning, match=r"\(autostart starts only the local daemon\)"):
        NeuralMindClient("http://127.0.0.1:9", token="t", home=tmp_path, autostart=True)
    assert not (tmp_path / "daemon.json").exists()


def test_a_webhook_check_that_would_pass_anything_is_refused():
    """An empty secret (an unset variable) verified a body anyone signed with no key; a nan
    tolerance let a delivery from 2001 through."""
    from neuralmind.client import verify_signature, webhook_signature
    body, stamp = b'{"kind": "ping"}', "1000000000"
    headers = {"NeuralMind-Timestamp": stamp,
               "NeuralMind-Signature": webhook_signature("", stamp, body)}
    with pytest.raises(ValueError, match="the secret is empty"):
        verify_signature("", body, headers, now=1000000000)
    with pytest.raises(ValueError, match="finite numbers of seconds"):
        verify_signature("whsec_x", body, headers, tolerance_s=float("nan"))
    with pytest.raises(ValueError, match="finite numbers of seconds"):
        verify_signature("whsec_x", body, headers, now=float("nan"))


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_a_per_call_timeout_that_is_no_time_is_refused_before_anything_runs(timeout, tmp_path):
    """`decay(timeout=0)` ran the sweep, then raised; `query(timeout=nan)` was the socket's
    error; `timeout=0` silently meant the client's own."""
    with LocalServer(tmp_path / "server", plugins=["auth"]) as server:
        nm = NeuralMindClient(server.url, token=server.token, home=tmp_path)
        with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
            nm.request("GET", "/v1/projects", timeout=timeout)
    with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
        NeuralMindClient("http://127.0.0.1:9", token="t", home=tmp_path, timeout=timeout)


def test_the_cli_finds_the_daemon_in_the_configs_home(daemon, tmp_path, monkeypatch):
    """Without NEURALMIND_HOME, `daemon start`, `token show` and `up` use the config's
    `[kernel] home`: every other command looked in ~/.neuralmind and found no daemon (and
    `agent wakeup` started a second one there). NEURALMIND_HOME still comes first."""
    for name in ("NEURALMIND_HOME", "NEURALMIND_API_URL", "NEURALMIND_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # ~/.neuralmind is no daemon's
    config = tmp_path / "home.toml"
    config.write_text(f'[kernel]\nhome = "{daemon.home}"\n[server]\nport = {daemon.port}\n')
    code, out, err = run_cli("project", "list", "--json", env={"NEURALMIND_CONFIG": str(config)})
    assert code == 0 and isinstance(json.loads(out), list), err
    code, out, err = run_cli("project", "list", env={"NEURALMIND_CONFIG": str(config),
                                                     "NEURALMIND_HOME": str(tmp_path / "other")})
    assert (code, out) == (1, "") and str(tmp_path / "other" / "daemon.json") in err
    assert not (tmp_path / "user").exists()


def test_a_route_of_a_plugin_the_daemon_runs_without_says_to_restart_it(tmp_path, monkeypatch):
    """The configuration enables webhooks, the daemon was started without them: `webhook
    list` said only `no route GET /v1/webhooks (GET /v1/openapi.json lists them)`."""
    for name in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN", "NEURALMIND_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    env = {"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth,memory,webhooks"}
    with LocalServer(tmp_path / "server", plugins=["auth", "memory"]) as server, \
            held(home, url=server.url, host="127.0.0.1", port=server.port, token=server.token,
                 plugins=["auth", "memory"]):
        code, out, err = run_cli("webhook", "list", env=env)
        assert (code, out) == (1, "")
        assert err.startswith(
            "neuralmind: no route GET /v1/webhooks (GET /v1/openapi.json lists them): the "
            f"daemon at {server.url} runs without the webhooks plugin, which this "
            "configuration enables, and so serves none of its routes: restart it with this "
            "configuration (`neuralmind daemon stop`, then `neuralmind daemon start`) "
            "[not_found, status 404"), err
        # a server named with --url: its configuration is not known here
        code, _, err = run_cli("webhook", "list", "--url", server.url, "--token", server.token,
                               env=env)
        assert code == 1 and err.startswith("neuralmind: no route GET /v1/webhooks (GET "
                                            "/v1/openapi.json lists them) [not_found"), err
