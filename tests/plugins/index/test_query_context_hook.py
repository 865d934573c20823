"""L2 carries what other plugins add through ``query_context``: the memory plugin's decisions
on the files a query hit, inside the budget."""

from __future__ import annotations

from tests.plugins.index.conftest import build, write_repo
from tests.support import DEFAULT_PLUGINS, LocalServer


def test_decisions_on_hit_files_appear_in_l2(tmp_path):
    root = write_repo(tmp_path / "repo", tmp_path / "outside")
    with LocalServer(tmp_path / "home", plugins=DEFAULT_PLUGINS) as server:
        pid = server.register(root)
        r = server.post(f"/v1/projects/{pid}/memories", {
            "title": "Tax is rounded once, at the end",
            "rationale": "Rounding each line item drifted totals by a cent.",
            "files_affected": ["shop/cart.py"]})
        assert r.status == 201, r.body
        build(server, pid)
        out = server.post(f"/v1/projects/{pid}/query", {"question": "how is sales tax computed?"}).json
        assert "L2" in out["layers_used"]
        related = out["context"].split("## Related", 1)[1].split("## Search results", 1)[0]
        assert "Tax is rounded once, at the end" in related
        small = server.post(f"/v1/projects/{pid}/query", {"question": "how is sales tax computed?",
                                                          "context_budget": 300}).json
        assert small["tokens"]["total"] <= 300
