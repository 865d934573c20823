"""Server mode on a shared PostgreSQL database: a token created with the CLI works on every
server at once, a revocation reaches every server within a quarter second, rate buckets are
shared, and token changes are events in the shared log."""

from __future__ import annotations

import time

import pytest

from tests.plugins.auth.helpers import cli, create_token, server_config
from tests.support import LocalServer, fresh_pg_dsn

pytestmark = pytest.mark.postgres_only("two servers on a database it names itself")


@pytest.fixture
def team(tmp_path):
    """A config naming one shared database, and two servers on it (two machines)."""
    def make(limits: str = "default = { rate = 10000, burst = 10000 }"):
        config = tmp_path / "config.toml"
        config.write_text(server_config(tmp_path, {"a": tmp_path / "repo-a"}).replace(
            "default = { rate = 10000, burst = 10000 }", limits)
            + f'[storage]\nbackend = "postgres"\ndsn = "{fresh_pg_dsn()}"\n')
        servers = [LocalServer(tmp_path / f"home{i}", plugins=["auth"],
                               config=config.read_text()).start() for i in (1, 2)]
        started.extend(servers)
        return config, servers

    started: list[LocalServer] = []
    yield make
    for server in started:
        server.stop()


def test_tokens_and_revocations_reach_every_server(team, tmp_path):
    config, servers = team()
    cli_home = tmp_path / "cli-home"
    made = create_token(cli_home, config, "ann", "reader", "a")
    assert not (cli_home / "tokens.json").exists()  # the token went to the database
    for server in servers:
        me = server.get("/v1/auth/whoami", token=made["token"]).json
        assert (me["actor"], me["role"], me["projects"]) == ("ann", "reader", ["a"])
    assert made["id"] in cli(cli_home, "token", "list", "--json", config=config).stdout
    cli(cli_home, "token", "revoke", made["id"], config=config)
    deadline = time.monotonic() + 1.0
    while any(s.get("/v1/auth/whoami", token=made["token"]).status != 401 for s in servers):
        assert time.monotonic() < deadline, "a server still took the revoked token after 1 s"
        time.sleep(0.05)
    kinds = [e.kind for e in servers[1].kernel.events.after(0)]
    assert {"token.created", "token.revoked"} <= set(kinds)


def test_rate_buckets_are_shared_by_servers(team, tmp_path):
    config, servers = team("default = { rate = 0.01, burst = 4 }")
    token = create_token(tmp_path / "cli-home", config, "bo", "reader")["token"]
    statuses = [servers[i % 2].get("/v1/auth/whoami", token=token).status for i in range(8)]
    assert statuses.count(200) == 4 and statuses.count(429) == 4  # one burst for both
