"""TLS with a certificate made by the test (trustme), and the start-up refusals of binds
that are not loopback, run through the CLI as an operator would."""

from __future__ import annotations

import http.client
import ssl
import subprocess
import sys
import time

import pytest
import trustme

from tests.plugins.auth.helpers import create_token, server_config
from tests.support import ROOT, Server, free_port, request

pytestmark = pytest.mark.sqlite_only("TLS and the bind checks are gunicorn's and the CLI's, "
                                     "the same whichever database the routes use")


class TLSServer(Server):
    """A server that only speaks HTTPS: readiness is polled over TLS."""

    def __init__(self, *args, context: ssl.SSLContext, **kw):
        super().__init__(*args, **kw)
        self.context = context

    def start(self, timeout: float = 60) -> TLSServer:
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                if request(self.port, "GET", "/v1/health", tls_context=self.context,
                           timeout=5).status == 200:
                    return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"no HTTPS answer in {timeout} s:\n{self.output()}")


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def test_tls_server_mode(tmp_path, ca):
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(cert_path)
    cert.private_key_pem.write_to_path(key_path)
    context = ssl.create_default_context()
    ca.configure_trust(context)
    config = server_config(tmp_path, {"a": tmp_path / "repo-a"})
    server = TLSServer(tmp_path / "home", config=config, plugins=["auth"], workers=2,
                       args=["--tls-cert", str(cert_path), "--tls-key", str(key_path)],
                       context=context)
    try:
        server.start()
        token = create_token(server.home, server.home / "config.toml", "alice", "reader")["token"]
        r = request(server.port, "GET", "/v1/projects", token=token, tls_context=context)
        assert r.status == 200 and [p["id"] for p in r.json["items"]] == ["a"]
        with pytest.raises(ssl.SSLCertVerificationError):  # a client that does not trust the CA
            request(server.port, "GET", "/v1/health", tls_context=ssl.create_default_context())
        with pytest.raises((OSError, http.client.HTTPException)):  # plain HTTP gets no answer
            request(server.port, "GET", "/v1/health", timeout=5)
    finally:
        server.stop()


def serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {"NEURALMIND_HOME": str(tmp_path / "home"), "NEURALMIND_PLUGINS": "auth",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "neuralmind.cli", "serve", "--port",
                           str(free_port()), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


def test_non_loopback_bind_without_server_mode_is_refused(tmp_path):
    done = serve(tmp_path, "--host", "0.0.0.0", "--insecure-http")
    assert done.returncode == 2 and "needs server mode" in done.stderr


def test_non_loopback_bind_without_tls_is_refused(tmp_path):
    done = serve(tmp_path, "--host", "0.0.0.0", "--allow-remote")
    assert done.returncode == 2 and "without TLS" in done.stderr
    done = serve(tmp_path, "--host", "0.0.0.0", "--allow-remote", "--tls-cert", "/nonexistent.pem")
    assert done.returncode == 2 and "go together" in done.stderr


def test_tls_and_insecure_http_together_are_refused(tmp_path):
    """Alternatives (TLS here, or a TLS-terminating proxy in front): the pair is refused in
    one line before anything loads, each named where it was given — a flag, or the config."""
    tls = ["--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")]
    done = serve(tmp_path, "--allow-remote", "--insecure-http", *tls)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", (
        "neuralmind: --tls-cert/--tls-key and --insecure-http are alternatives — TLS served "
        "here, or a TLS-terminating proxy in front: give one\n"))
    config = tmp_path / "server.toml"
    config.write_text("[server]\nallow_remote = true\ninsecure_http = true\n")
    done = serve(tmp_path, "--config", str(config), *tls)
    assert done.returncode == 2 and done.stderr.startswith(
        f"neuralmind: --tls-cert/--tls-key and [server] insecure_http = true in {config} are "
        "alternatives"), done.stderr


def test_unloadable_certificate_is_refused_before_forking(tmp_path, ca):
    other = trustme.CA().issue_cert("127.0.0.1")
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    other.private_key_pem.write_to_path(tmp_path / "key.pem")
    done = serve(tmp_path, "--allow-remote", "--tls-cert", str(tmp_path / "cert.pem"),
                 "--tls-key", str(tmp_path / "key.pem"))
    assert done.returncode == 2 and "cannot load the TLS certificate" in done.stderr
    assert f"{tmp_path / 'key.pem'} is not the private key of {tmp_path / 'cert.pem'}" \
        in done.stderr


def test_each_unloadable_tls_file_is_named_with_what_is_wrong(tmp_path, ca):
    from kernel.config import load_settings
    from kernel.serving import BindError, check_tls
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    for given, why in [(("cert.pem", "cert.pem"), "cert.pem is not a PEM private key"),
                       (("key.pem", "key.pem"), "key.pem is not a PEM certificate"),
                       (("cert.pem", "gone.pem"), "gone.pem: No such file or directory")]:
        settings = load_settings(server={"tls_cert": str(tmp_path / given[0]),
                                         "tls_key": str(tmp_path / given[1])})
        with pytest.raises(BindError) as refused:
            check_tls(settings)
        assert str(refused.value).endswith(f"{tmp_path}/{why}"), refused.value


def test_tls_and_insecure_http_in_one_config_are_refused_by_the_bind_check(tmp_path, ca):
    """What plain gunicorn (conf/gunicorn.conf.py) checks, where no flag is given."""
    from kernel.config import load_settings
    from kernel.serving import BindError, check_tls
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    tls = {"tls_cert": str(tmp_path / "cert.pem"), "tls_key": str(tmp_path / "key.pem")}
    check_tls(load_settings(server=tls))
    with pytest.raises(BindError) as refused:
        check_tls(load_settings(server={**tls, "insecure_http": True}))
    assert str(refused.value).startswith(
        "[server] tls_cert/tls_key and insecure_http are alternatives"), refused.value


def test_insecure_http_acknowledgement_passes_the_bind_check():
    from kernel.config import load_settings
    from kernel.serving import BindError, check_bind
    check_bind(load_settings(server={"host": "0.0.0.0", "allow_remote": True, "insecure_http": True}))
    with pytest.raises(BindError):
        check_bind(load_settings(server={"host": "10.1.2.3", "allow_remote": True}))
    check_bind(load_settings(server={"host": "127.0.0.5"}))
