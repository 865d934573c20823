"""Dockerfile and docker-compose.yml, without a Docker engine: both files are parsed, and their
server command and HEALTHCHECK run here with the container paths mapped to temp dirs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
import trustme
import yaml

from tests.plugins.auth.helpers import create_token
from tests.support import DEFAULT_PLUGINS, ROOT, free_port, request

pytestmark = pytest.mark.sqlite_only("the image's own command and files, in a mapped container")


def dockerfile() -> dict[str, list[str]]:
    """Instruction → its arguments, continuation lines joined, comments dropped."""
    out: dict[str, list[str]] = {}
    text = "\n".join(line for line in (ROOT / "Dockerfile").read_text().splitlines()
                     if not line.lstrip().startswith("#"))
    for line in text.replace("\\\n", " ").splitlines():
        if line.strip():
            name, _, rest = line.strip().partition(" ")
            out.setdefault(name.upper(), []).append(rest.strip())
    return out


def exec_form(text: str) -> list[str]:
    return json.loads(text[text.index("["):])


def compose(service: str = "neuralmind") -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][service]


class Container:
    """The container's paths mapped into a temp dir, and its processes run here."""

    def __init__(self, root: Path, port: int):
        self.root, self.port = root, port
        self.env = {**os.environ, "NEURALMIND_PLUGINS": ",".join(list(DEFAULT_PLUGINS)),
                    "NEURALMIND_EMBEDDINGS_WARM": "0", "HOME": str(root)}
        self.env.pop("NEURALMIND_CONFIG", None)
        self.proc: subprocess.Popen | None = None
        for name in ("data", "repos/api", "config"):
            (root / name).mkdir(parents=True, exist_ok=True)

    def map(self, arg: str) -> str:
        for inside in ("/config", "/data", "/repos"):
            if arg == inside or arg.startswith(inside + "/"):
                return str(self.root / inside.lstrip("/")) + arg[len(inside):]
        return {"0.0.0.0": "127.0.0.1", "8765": str(self.port)}.get(arg, arg)

    def write_config(self, tls: tuple[Path, Path] | None) -> None:
        text = (ROOT / "conf" / "server.example.toml").read_text()
        text = text.replace('host = "0.0.0.0"', 'host = "127.0.0.1"')
        text = text.replace("port = 8765", f"port = {self.port}")
        for line in text.splitlines():
            if line.startswith(("tls_cert", "tls_key")) and tls is None:
                text = text.replace(line + "\n", "")
        if tls is not None:
            text = text.replace('"/config/tls/cert.pem"', f'"{tls[0]}"')
            text = text.replace('"/config/tls/key.pem"', f'"{tls[1]}"')
        text = text.replace('"/data', f'"{self.root}/data').replace('"/repos', f'"{self.root}/repos')
        (self.root / "config" / "server.toml").write_text(text)

    def run(self, argv: list[str], env: dict[str, str]) -> None:
        env = {**self.env, **{k: self.map(v) for k, v in env.items()}}
        self.proc = subprocess.Popen([self.map(a) for a in argv], cwd=ROOT, env=env,
                                     stdout=open(self.root / "server.log", "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def healthcheck(self, argv: list[str], env: dict[str, str] | None = None) -> int:
        return subprocess.run(argv, env={**self.env, **(env or {})}, capture_output=True,
                              timeout=30).returncode

    def wait_healthy(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        deadline = time.monotonic() + 60
        while self.healthcheck([a.replace("8765", str(self.port)) for a in argv], env) != 0:
            assert self.proc.poll() is None, (self.root / "server.log").read_text()
            assert time.monotonic() < deadline, (self.root / "server.log").read_text()
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)


def test_dockerfile_shape():
    d = dockerfile()
    assert d["FROM"] == ["python:3.11-slim"]
    assert d["EXPOSE"] == ["8765"]
    assert json.loads(d["VOLUME"][0]) == ["/data", "/repos"]
    assert d["USER"] and d["USER"][-1] not in ("root", "0")
    health = exec_form(d["HEALTHCHECK"][0].partition("CMD")[2])
    assert health[:2] == ["python", "-c"] and "urllib.request" in health[2] and "/v1/health" in health[2]
    assert exec_form(d["CMD"][-1])[:2] == ["neuralmind", "serve"]


def test_compose_shape():
    svc = compose()
    assert svc["ports"] == ["127.0.0.1:8765:8765"]
    assert svc["command"][:2] == ["neuralmind", "serve"] and "/config/server.toml" in svc["command"]
    mounts = {v.split(":")[1] for v in svc["volumes"]}
    assert {"/config", "/repos", "/data"} <= mounts
    assert svc["environment"]["NEURALMIND_HOME"] == "/data"
    assert "profiles" not in svc  # `docker compose up -d` starts it


def test_no_variable_of_a_profile_is_required_for_the_default_up():
    """Compose reads every service's variables before it picks the profiles (docker/compose
    #11977): a ``${VAR:?…}`` in a profile's service stops the plain ``docker compose up -d``."""
    text = (ROOT / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    gated = [name for name, svc in services.items() if svc.get("profiles")]
    assert gated, "the postgres profile is there"
    for name in gated:
        assert ":?" not in yaml.safe_dump(services[name]), name


def test_the_postgres_profile_runs_two_servers_on_one_database():
    db = compose("postgres")
    assert db["profiles"] == ["postgres"] and db["image"].startswith("pgvector/pgvector:")
    assert db["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    servers = [compose(name) for name in ("neuralmind-a", "neuralmind-b")]
    urls = {s["environment"]["NEURALMIND_DATABASE_URL"] for s in servers}
    assert len(urls) == 1 and urls.pop().endswith("@postgres:5432/neuralmind")
    for svc in servers:
        assert svc["profiles"] == ["postgres"] and svc["command"] == compose()["command"]
        assert svc["depends_on"]["postgres"]["condition"] == "service_healthy"
    ports = {p.split(":")[1] for s in (compose(), *servers) for p in s["ports"]}
    assert ports == {"8765", "8766", "8767"}


@pytest.fixture
def container(tmp_path):
    box = Container(tmp_path, free_port())
    yield box
    box.stop()


def test_compose_command_serves_and_passes_the_healthcheck(container):
    svc, health = compose(), exec_form(dockerfile()["HEALTHCHECK"][0].partition("CMD")[2])
    container.write_config(tls=None)
    container.run(svc["command"], svc["environment"])
    container.wait_healthy(health)
    home = container.root / "data"
    made = create_token(home, container.root / "config" / "server.toml", "alice", "reader")
    r = request(container.port, "GET", "/v1/projects", token=made["token"])
    assert r.status == 200 and [p["id"] for p in r.json["items"]] == ["api"]
    assert r.json["items"][0]["path"] is None  # a reader never sees paths
    assert (home / "kernel.db").exists() and (home / "tokens.json").exists()
    container.stop()
    assert container.healthcheck([a.replace("8765", str(container.port)) for a in health]) != 0


def test_image_cmd_serves_tls_and_passes_the_healthcheck(container):
    d = dockerfile()
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "nm.internal")
    paths = container.root / "config" / "cert.pem", container.root / "config" / "key.pem"
    cert.cert_chain_pems[0].write_to_path(paths[0])
    cert.private_key_pem.write_to_path(paths[1])
    container.write_config(tls=paths)
    env = dict(pair.split("=", 1) for pair in shlex.split(d["ENV"][0]))
    container.run(exec_form(d["CMD"][-1]), env)
    container.wait_healthy(exec_form(d["HEALTHCHECK"][0].partition("CMD")[2]),
                           {"NEURALMIND_HEALTH_URL": f"https://127.0.0.1:{container.port}/v1/health"})
    assert (container.root / "data" / "kernel.db").exists()
