"""The client against a server-mode server (loopback bind, tokens file, config projects):
projects by alias, 403 for a reader's write, 429 with retry_after from the rate limit."""

from __future__ import annotations

import pytest

from neuralmind.client import Forbidden, NeuralMindClient, NotFound, RateLimited
from tests.plugins.auth.helpers import create_token
from tests.support import ROOT, LocalServer

CONFIG = """
[kernel]
plugins = ["auth"]
[server]
allow_remote = true
host = "127.0.0.1"
[auth.rate_limits.builder]
rate = 0.1
burst = 2
[[projects]]
id = "api"
path = "{path}"
"""


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    base = tmp_path_factory.mktemp("team")
    (base / "api").mkdir()
    server = LocalServer(base / "home", config=CONFIG.format(path=base / "api"), plugins=["auth"])
    tokens = {role: create_token(server.home, server.config, f"{role}-user", role)["token"]
              for role in ("reader", "builder", "admin")}
    with server:
        yield server.url, tokens, base


def test_project_by_alias_and_reader_limits(team):
    url, tokens, _ = team
    nm = NeuralMindClient(url, token=tokens["reader"])
    api = nm.project("api")
    assert api.id == "api" and api.info.path is None  # a reader never sees paths
    with pytest.raises(Forbidden):
        api.remove()
    with pytest.raises(Forbidden) as info:
        nm.projects.add(ROOT)
    assert info.value.code in ("registration_disabled", "forbidden")
    with pytest.raises(NotFound):
        nm.project("nope")


def test_a_directory_is_found_among_the_projects_the_server_serves(team):
    """On a server that registers nothing, a path — `neuralmind mcp --project PATH`, the
    repository around `neuralmind mcp` — was refused (registration_disabled) although the
    server serves that very directory."""
    url, tokens, base = team
    nm = NeuralMindClient(url, token=tokens["admin"])
    assert nm.project(base / "api").id == "api"
    with pytest.raises(Forbidden, match=f"{base} is none of the projects this server serves "
                                        r"\(server mode serves only the projects in its config"):
        nm.project(base)


def test_rate_limit_raises_with_retry_after(team):
    url, tokens, _ = team
    nm = NeuralMindClient(url, token=tokens["builder"])
    with pytest.raises(RateLimited) as info:
        for _ in range(10):
            nm.projects.get("api")
    assert info.value.status == 429 and info.value.retry_after >= 1
