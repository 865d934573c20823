"""Watch mode across two workers: one watcher per project, changes re-indexed within
seconds, status from any worker, a clean stop."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.plugins.index.conftest import build, wait_for
from tests.support import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Real gunicorn with two workers: the watcher must be one across them."""
    with Server(tmp_path_factory.mktemp("home"), plugins=["auth", "index"], workers=2) as srv:
        yield srv


def labels(server, pid, path):
    r = server.get(f"/v1/projects/{pid}/documents?path={quote(path)}")
    return [n["label"] for n in r.json["nodes"]] if r.status == 200 else None


def test_watch_follows_changes_and_stops(server, project):
    pid, root = project
    build(server, pid)
    assert server.get(f"/v1/projects/{pid}/watch/status").json["running"] is False
    first = server.post(f"/v1/projects/{pid}/watch/start")
    assert first.status == 200 and first.json["running"] is True
    assert first.json["root"] == str(root.resolve())
    for _ in range(4):  # requests land on either worker: still one watcher
        again = server.post(f"/v1/projects/{pid}/watch/start").json
        assert again["pid"] == first.json["pid"] and again["started_at"] == first.json["started_at"]

    (root / "shop/refunds.py").write_text("def issue_refund(order):\n    return order\n")
    cart = root / "shop/cart.py"
    cart.write_text(cart.read_text().replace("def compute_sales_tax", "def compute_duty"))
    (root / "notes.txt").unlink()
    assert wait_for(lambda: labels(server, pid, "shop/refunds.py") == ["shop.refunds",
                                                                        "issue_refund"])
    assert wait_for(lambda: "compute_duty" in (labels(server, pid, "shop/cart.py") or []))
    assert wait_for(lambda: labels(server, pid, "notes.txt") is None)
    (root / "debug2.log").write_text("ignored by .gitignore\n")
    status = wait_for(lambda: (s := server.get(f"/v1/projects/{pid}/watch/status").json)
                      ["last_event"] and s["last_event"]["path"] == "debug2.log" and s)
    assert status["running"] and status["queued"] >= 0 and status["recent_errors"] == []
    assert status["last_indexed_at"]
    hits = server.post(f"/v1/projects/{pid}/search", {"query": "issue refund",
                                                      "mode": "keyword"}).json["results"]
    assert hits[0]["label"] == "issue_refund"
    # a .gitignore written, then taken back: what it leaves out goes, then comes back
    ignore = root / "shop" / ".gitignore"
    ignore.write_text("refunds.py\n")
    assert wait_for(lambda: labels(server, pid, "shop/refunds.py") is None)
    ignore.unlink()
    assert wait_for(lambda: labels(server, pid, "shop/refunds.py") is not None)

    stopped = server.post(f"/v1/projects/{pid}/watch/stop").json
    assert stopped["running"] is False
    (root / "shop/late.py").write_text("def too_late():\n    pass\n")
    import time
    time.sleep(1.5)
    assert labels(server, pid, "shop/late.py") is None
    assert server.get(f"/v1/projects/{pid}/watch/status").json["running"] is False
