"""A build that re-parses files because this NeuralMind indexes them differently than the one
that built the index (the first build after an upgrade) says so: it counts them apart from the
files that changed (`files_reindexed`, `reindex_reason`), and `up` and `project build` say why
in one line instead of calling them changed."""

from __future__ import annotations

import json

from tests.plugins.index.conftest import build
from tests.support import run_cli

WHY_LAYOUT = "this NeuralMind indexes them differently than the one that built the index"


def stamp(server, pid: str, value: str | None) -> None:
    """Leave the index's text-layout stamp as an older release did: ``value`` (None: none,
    as releases before the stamp left it)."""
    from plugins.index import plugin
    store = plugin._service(server.kernel).store(server.kernel.projects.get(pid))
    with store.db.transaction() as conn:
        if value is None:
            conn.execute("DELETE FROM meta WHERE key = 'embed_text'")
        else:
            store.set_meta(conn, embed_text=value)


def cli(server, *args: str) -> tuple[int, str]:
    code, out, err = run_cli(*args, env={"NEURALMIND_API_URL": server.url,
                                         "NEURALMIND_API_TOKEN": server.token,
                                         "NEURALMIND_HOME": str(server.home)})
    assert code == 0, (out, err)
    return code, out


def test_an_older_layout_is_reindexed_and_counted_apart_from_changes(server, project):
    pid, root = project
    first = build(server, pid)
    files = first["files_changed"]  # a first build: every file is new
    assert files > 3 and first["files_reindexed"] == 0 and first["reindex_reason"] is None

    # the stamp the release before `chunker.LAYOUT` left ("mode:chars:test_chars"), and one
    # file really edited meanwhile
    stamp(server, pid, "docfirst:320:128")
    (root / "notes.txt").write_text("plain notes about invoices and refunds\n")
    result = build(server, pid)
    assert (result["files_changed"], result["files_reindexed"], result["reindex_reason"],
            result["files_deleted"]) == (1, files - 1, "layout", 0)
    again = build(server, pid)  # the stamp is this NeuralMind's now
    assert (again["files_changed"], again["files_reindexed"], again["reindex_reason"]) == (
        0, 0, None)

    # no stamp at all (the releases before it): `up` says why, and calls nothing changed
    stamp(server, pid, None)
    _, out = cli(server, "up", str(root))
    assert f"re-indexed {files} files: {WHY_LAYOUT}\n" in out, out
    assert f"(0 changed, 0 deleted, {files} re-indexed unchanged, " in out, out
    assert "incremental build" not in out, out

    # `project build` says it too; --json carries the counts
    stamp(server, pid, "docfirst:320:128")
    _, out = cli(server, "project", "build", "--project", pid)
    assert out.rstrip().splitlines()[-1] == f"re-indexed {files} files: {WHY_LAYOUT}", out
    stamp(server, pid, "docfirst:320:128")
    _, out = cli(server, "project", "build", "--json", "--project", pid)
    job = json.loads(out)["result"]
    assert (job["files_changed"], job["files_reindexed"], job["reindex_reason"]) == (
        0, files, "layout")

    # the same revision with other [index] settings is not called another NeuralMind
    stamp(server, pid, "2:docfirst:512:128")
    _, out = cli(server, "project", "build", "--project", pid)
    assert out.rstrip().splitlines()[-1] == (
        f"re-indexed {files} files: the index was built with other [index] embed_mode, "
        "embed_chars or test_embed_chars settings"), out

    # an ordinary incremental build keeps its line
    (root / "notes.txt").write_text("plain notes\n")
    _, out = cli(server, "up", str(root))
    assert ("incremental build: re-indexed only the 1 changed file(s) of the repository's "
            f"{first['files_total']} (0 deleted)") in out, out
    _, out = cli(server, "project", "build", "--full", "--project", pid)
    assert out.rstrip().splitlines()[-1] == (
        f"re-indexed {files} files: a full build re-indexes every file"), out
