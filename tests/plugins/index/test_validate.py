"""POST …/validate: a healthy index reports ok; real damage to the state files (keyword
rows, links, lock rows, ingested nodes, a file edited after the build) is reported without
changing anything, and repaired with write=true by an admin — inside the state dir only: the
repository's files are never written. Learned links to files gone are information, not
damage: counted, ok, forgotten with write=true."""

from __future__ import annotations

import os
import sqlite3
import time

from kernel.leases import HOST
from plugins.auth.tokens import TokenFile
from tests.plugins.index.conftest import build, built
from tests.plugins.index.test_graph import REPO, write
from tests.support import LocalServer


def checks(out):
    return {c["name"]: c for c in out["checks"]}


def snapshot(root):
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".neuralmind"]
        for name in files:
            path = os.path.join(folder, name)
            found[path] = (os.path.getsize(path), os.stat(path).st_mtime_ns)
    return found


def test_validate_reports_damage_and_repairs_it_in_the_state_dir(tmp_path):
    with LocalServer(tmp_path / "home", plugins=["auth", "index"]) as server:
        root = write(tmp_path / "repo")
        pid = server.register(root)
        base = f"/v1/projects/{pid}"
        build(server, pid)
        server.post(base + "/documents", {"name": "notes.md", "content": "# Notes\n\nkept\n"})
        out = server.post(base + "/validate", {}).json
        assert out["ok"] and out["write"] is False, out
        assert [c["name"] for c in out["checks"]] == [
            "index", "keywords", "vectors", "graph", "documents", "learned", "locks", "files"]

        server.post(base + "/activity", {"files": ["app/models.py", "app/service.py"],
                                         "kind": "edit"})
        (root / "main.go").write_text((root / "main.go").read_text() + "\n// edited\n")
        db = sqlite3.connect(tmp_path / "repo" / ".neuralmind" / "index.db")
        with db:
            db.execute("DELETE FROM nodes_fts WHERE rowid IN (SELECT nid FROM nodes "
                       "WHERE path = 'app/service.py')")
            db.execute("UPDATE edges SET dst = NULL, how = NULL WHERE kind = 'calls'")
            db.execute("DELETE FROM files WHERE source = 'ingested'")
        db.close()
        # a learned link to a file no longer indexed (activity links indexed files only)
        usage = sqlite3.connect(tmp_path / "repo" / ".neuralmind" / "usage.db")
        with usage:
            usage.execute("UPDATE synapses SET b = 'gone.py' WHERE b = 'app/service.py'")
        usage.close()
        with server.kernel.db.transaction() as conn:  # a build lease of a process long gone
            conn.execute("INSERT INTO leases (name, owner, host, pid, heartbeat) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (f"index.build:{pid}", "gone", HOST, 999999999, time.time() - 3600))
        before = snapshot(root)

        damaged = server.post(base + "/validate", {"write": False}).json
        found = checks(damaged)
        assert not damaged["ok"]
        assert {n for n, c in found.items() if not c["ok"]} == {
            "files", "keywords", "graph", "documents", "locks"}
        assert found["files"]["count"] == 1 and found["learned"]["count"] == 1
        assert found["keywords"]["count"] >= 3 and found["locks"]["count"] == 1
        assert not any(c["repaired"] for c in found.values())
        assert checks(server.post(base + "/validate", {}).json) == found  # reading changed nothing

        repaired = server.post(base + "/validate", {"write": True}).json
        assert repaired["ok"], repaired
        assert {n for n, c in checks(repaired).items() if c["repaired"]} == {
            "files", "keywords", "graph", "documents", "learned", "locks"}
        assert server.post(base + "/validate", {}).json["ok"]
        assert snapshot(root) == before  # the repository was only read
        hits = server.post(base + "/search", {"query": "kept notes", "mode": "keyword"}).json
        assert hits["results"][0]["source"] == "ingested"
        callers = server.get(base + "/neighbors/structural?file=app/models.py").json["callers"]
        assert callers  # links resolved again


def test_links_to_a_deleted_file_are_counted_but_not_a_failure(server, tmp_path):
    """`git rm` + build left learned links to the file gone, as the docs intend (they fade),
    and validate failed — `project validate` exits 1 — on that ordinary state. It counts them,
    says they fade and that write forgets them, and stays ok."""
    root = tmp_path / "repo"
    pid = built(server, root, {"a.py": "def a():\n    return 1\n",
                               "b.py": "def b():\n    return 2\n",
                               "c.py": "def c():\n    return 3\n"})
    base = f"/v1/projects/{pid}"
    server.post(base + "/activity", {"files": ["a.py", "b.py", "c.py"], "kind": "edit"})
    (root / "b.py").unlink()
    (root / "c.py").rename(root / "d.py")
    build(server, pid)
    out = server.post(base + "/validate", {}).json
    learned = checks(out)["learned"]
    assert out["ok"] and learned["ok"] and learned["count"] == 2, out
    assert learned["detail"].startswith("usage.db quick_check ok; 2 linked files no longer "
                                        "indexed (kept on purpose: their links fade")
    assert "half-life 365 days" in learned["detail"] and "forgets them" in learned["detail"]
    forgot = checks(server.post(base + "/validate", {"write": True}).json)["learned"]
    assert forgot["ok"] and forgot["repaired"] and forgot["count"] == 2
    assert checks(server.post(base + "/validate", {}).json)["learned"] == {
        "name": "learned", "ok": True, "count": 0, "repaired": False,
        "detail": "usage.db quick_check ok; 0 linked files no longer indexed"}


def test_repairs_need_an_admin(tmp_path):
    root = write(tmp_path / "repo", {"a.py": "def a():\n    return 1\n", **{
        k: v for k, v in REPO.items() if k.startswith("app/")}})
    with LocalServer(tmp_path / "home", plugins=["auth", "index"],
                     server={"allow_remote": True},
                     projects=[{"id": "shop", "path": str(root)}]) as server:
        tokens = TokenFile(server.home / "tokens.json")
        reader = tokens.create("rita", "reader", "*")[0]
        admin = tokens.create("ada", "admin", "*")[0]
        assert server.post("/v1/projects/shop/build", {"wait": True}, token=admin).status == 200
        r = server.post("/v1/projects/shop/validate", {}, token=reader)
        assert r.status == 200 and r.json["ok"]
        r = server.post("/v1/projects/shop/validate", {"write": True}, token=reader)
        assert r.status == 403 and "index.admin" in r.error["message"]
        assert server.post("/v1/projects/shop/validate", {"write": True}, token=admin).status == 200
        r = server.post("/v1/projects/shop/activity", {"files": ["a.py"], "kind": "read"},
                        token=reader)
        assert r.status == 200  # readers report activity (index.learn)
        r = server.post("/v1/projects/shop/documents", {"name": "x.md", "content": "x"},
                        token=reader)
        assert r.status == 403


def test_files_the_build_skips_are_never_new_on_disk(tmp_path):
    """A name not UTF-8 (Latin-1 `café.py`) is skipped by the build; validate counted it `1
    new on disk since the build` for ever, and `--write` could not mend it. Validate leaves
    out what the build leaves out: that name, binary and minified files, the size cap."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "ok.py").write_text("def fine():\n    return 1\n")
    (root / "logo.png").write_bytes(b"\x89PNG\0binary")
    (root / "vendor.js").write_text("".join(f"function f{n}(a){{return a+{n}}};"
                                            for n in range(3000)))
    (root / "huge.py").write_text("x = 1\n" * 200_000)
    with open(os.path.join(os.fsencode(root), b"caf\xe9.py"), "w") as fh:
        fh.write("def hidden():\n    return 2\n")
    with LocalServer(tmp_path / "home", plugins=["auth", "index"]) as server:
        pid = server.register(root)
        base = f"/v1/projects/{pid}"
        assert build(server, pid)["files_skipped"] == 4
        out = server.post(base + "/validate", {}).json
        assert checks(out)["files"] == {
            "name": "files", "ok": True, "count": 0, "repaired": False,
            "detail": "1 files indexed; 0 changed or removed and 0 new on disk since the build"}
        assert out["ok"], out
        (root / "new.py").write_text("def new():\n    return 3\n")  # a real new file still is
        stale = checks(server.post(base + "/validate", {}).json)["files"]
        assert not stale["ok"] and stale["count"] == 1
        assert checks(server.post(base + "/validate", {"write": True}).json)["files"]["repaired"]
        assert server.post(base + "/validate", {}).json["ok"]
