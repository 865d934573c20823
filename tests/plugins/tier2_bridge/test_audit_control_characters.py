"""A refused request's path is audited as it was asked for, and a path may hold any character:
``%00`` decodes to a NUL, which PostgreSQL's text cannot store — the shared trail stopped at
that record for good, auditing nothing after it — and which ``storage migrate`` could copy only
by changing what the chain's hash covers. The target is written on one line, each control
character as its escape, before it is hashed."""

from __future__ import annotations

import time

from tests.plugins.tier2_bridge.helpers import PLUGINS
from tests.support import LocalServer


def test_a_path_holding_control_characters_is_audited_escaped_and_the_trail_goes_on(tmp_path,
                                                                                   backend):
    (tmp_path / "repo").mkdir()
    with LocalServer(tmp_path / "home", plugins=["memory", *PLUGINS]) as server:
        pid = server.register(tmp_path / "repo")
        memories = f"/v1/projects/{pid}/memories"
        for path, status in ((f"{memories}/a%00b", 422), (f"{memories}/a%1b%5b31mb", 404),
                             (f"{memories}/a%5Cx00b", 404)):  # not to be read as the first
            assert server.delete(path).status == status  # refused, and audited
        made = server.post(memories, {"title": "Use WAL", "rationale": "readers"}).json["id"]
        deadline = time.monotonic() + 15
        while True:  # the copier runs beside the requests
            targets = [r["target"] for r in server.get("/v1/admin/audit?limit=200").json["items"]]
            if made in targets or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert f"DELETE {memories}/a\\x00b 422" in targets
        assert f"DELETE {memories}/a\\x1b[31mb 404" in targets
        assert f"DELETE {memories}/a\\\\x00b 404" in targets  # its backslash doubled
        assert made in targets  # the trail went on past them
