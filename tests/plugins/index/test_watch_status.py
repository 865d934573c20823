"""The watcher's status names the project's absolute root only to callers that
``GET /v1/projects/{id}`` shows the ``path`` to (``projects.paths``: builder, admin), never to a
reader."""

from __future__ import annotations

from tests.plugins.auth.helpers import create_token, server_config
from tests.support import LocalServer


def test_watch_status_hides_the_root_exactly_where_the_project_hides_its_path(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("def main():\n    return 1\n")
    home = tmp_path / "home"
    with LocalServer(home, plugins=["auth", "index"],
                     config=server_config(tmp_path, {"a": repo})) as server:
        tokens = {role: create_token(home, server.config, role, role, "a")["token"]
                  for role in ("reader", "builder", "admin")}
        started = server.post("/v1/projects/a/watch/start", token=tokens["builder"])
        assert started.status == 200 and started.json["running"] is True, started.body
        try:
            for role, token in tokens.items():
                path = server.get("/v1/projects/a", token=token).json["path"]
                status = server.get("/v1/projects/a/watch/status", token=token)
                assert status.status == 200 and status.json["running"] is True, status.body
                assert status.json["root"] == path, role
                assert (path is None) == (role == "reader"), role
                assert str(repo.resolve()) not in status.body.decode() or role != "reader"
            assert started.json["root"] == str(repo.resolve())
        finally:
            stopped = server.post("/v1/projects/a/watch/stop", token=tokens["builder"])
            assert stopped.status == 200 and stopped.json["running"] is False
