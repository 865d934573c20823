"""Schemathesis against the live OpenAPI document with a builder token in server mode: no
5xx and no response that violates the documented schema (bounded, so CI stays fast). The
server is the kernel in this process: what is checked is the routes' answers in server mode,
not gunicorn (tests/kernel/test_smoke_serving.py serves every plugin under it)."""

from __future__ import annotations

import json

import pytest

from tests.plugins.auth.helpers import create_token, server_config
from tests.support import DEFAULT_PLUGINS, LocalServer, schemathesis

MAX_EXAMPLES = 5  # per operation in the fuzzing phase; the coverage phase adds ~10 each

pytestmark = pytest.mark.sqlite_only("tests/kernel/test_contract.py fuzzes every route on both "
                                     "backends; this run adds server mode's roles")
# schema-valid requests only: what server mode adds is who may call what, decided before a
# body is read; bad input meets the same route models as in loopback, where the contract run
# sends it (tests/kernel/test_contract.py)
MODE = "positive"


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    root = tmp_path_factory.mktemp("fuzz")
    with pytest.MonkeyPatch.context() as mp, \
            LocalServer(root / "home", config=server_config(root, {"a": root / "repo-a"}),
                        plugins=list(DEFAULT_PLUGINS)) as s:
        mp.setenv("HOME", str(root))  # what a route writes under ~ lands here
        yield s


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~40 s on a quiet machine; minutes when other work shares the cores
def test_no_server_errors_and_no_schema_violations(server, tmp_path):
    token = create_token(server.home, server.home / "config.toml", "fuzzer", "builder")["token"]
    done, result = schemathesis(server.url, token, tmp_path,
                                "-c", "not_a_server_error,response_schema_conformance",
                                "-n", str(MAX_EXAMPLES), "--mode", MODE, "--request-timeout", "20",
                                timeout=800)
    counts = {"operations": result["operations"]["tested"], **result["test_cases"]}
    print("schemathesis:", json.dumps(counts))
    assert done.returncode == 0, done.stdout[-4000:]
    assert result["failures"] == [] and result["errors"] == []
    assert counts["operations"] >= 10 and counts["generated"] > counts["operations"]
    assert "unhandled error" not in server.output()
