"""Builds over HTTP on repositories the tests write: what is indexed, what is left out,
and how the index follows edits, deletes and renames."""

from __future__ import annotations

import json
import sqlite3
from urllib.parse import quote

import pytest

from neuralmind import Actor
from plugins.index import plugin

from tests.plugins.index.conftest import build, built, wait_for
from tests.support import LocalServer, deny_once


def indexed(server, pid) -> set[str]:
    stats = server.get(f"/v1/projects/{pid}/stats").json
    assert stats["built"]
    paths = set()
    for rel in ("README.md", "shop/cart.py", "shop/prices.py", "shop/__init__.py",
                "web/server.js", "web/types.ts", "svc/main.go", "svc/lib.rs", "svc/App.java",
                "notes.txt", ".gitignore", "web/.gitignore", "web/generated.js", "web/keep.log",
                "debug.log", "build/out.py", ".env", "logo.png", "big.py", "linked/secret_lib.py",
                "linked_file.py", "shop/checkout.py", "shop/money.py"):
        if server.get(f"/v1/projects/{pid}/documents?path={quote(rel)}").status == 200:
            paths.add(rel)
    return paths


def labels(server, pid, path) -> list[str]:
    r = server.get(f"/v1/projects/{pid}/documents?path={quote(path)}")
    assert r.status == 200, r.body
    return [n["label"] for n in r.json["nodes"]]


def test_build_indexes_symbols_and_leaves_out_what_it_must(server, project):
    pid, root = project
    assert server.get(f"/v1/projects/{pid}").json["status"]["built"] is False
    result = build(server, pid)
    assert result["chunks_embedded"] > 0 and result["semantic"] is True
    # what the size cap leaves out is said, as a binary file is (a rule says why itself)
    assert result["skipped"]["larger than the size cap ([index] max_file_bytes, or a "
                             "max_file_size rule)"] == 1  # big.py
    assert indexed(server, pid) == {
        "README.md", "shop/cart.py", "shop/prices.py", "shop/__init__.py", "web/server.js",
        "web/types.ts", "svc/main.go", "svc/lib.rs", "svc/App.java", "notes.txt", ".gitignore",
        "web/.gitignore", "web/keep.log"}  # nested !keep.log re-includes; binary, 10 MB,
    # symlinks, .env, root *.log, build/ and web/generated.js are out
    assert labels(server, pid, "shop/cart.py") == ["shop.cart", "Cart", "Cart.add_item",
                                                    "Cart.total", "compute_sales_tax"]
    assert set(labels(server, pid, "web/server.js")) >= {"HttpServer", "HttpServer.listen",
                                                         "sendEmail", "retryFetch"}
    assert "Greeter.Greet" in labels(server, pid, "svc/main.go")
    assert "Stack.push" in labels(server, pid, "svc/lib.rs")
    assert "App.run" in labels(server, pid, "svc/App.java")
    assert "orderTotal" in labels(server, pid, "web/types.ts")
    assert labels(server, pid, "README.md") == ["README.md", "Demo shop", "Demo shop > Install"]
    stats = server.get(f"/v1/projects/{pid}/stats").json
    assert set(stats["languages"]) >= {"python", "javascript", "typescript", "go", "rust", "java",
                                       "markdown"}
    assert {"contains", "imports", "calls", "inherits"} <= set(stats["edge_kinds"])
    status = server.get(f"/v1/projects/{pid}").json["status"]
    assert status["built"] is True and status["built_at"] == stats["built_at"]


def test_document_detail_and_paths_outside(server, project):
    pid, root = project
    build(server, pid)
    doc = server.get(f"/v1/projects/{pid}/documents?path=shop/cart.py").json
    assert doc["text"] == (root / "shop/cart.py").read_text() and doc["stale"] is False
    method = next(n for n in doc["nodes"] if n["label"] == "Cart.add_item")
    assert (method["signature"], method["line"], method["end_line"]) == (
        "def add_item(self, sku, qty)", 8, 10)
    assert method["docstring"] == "Put qty units of sku into the cart."
    for bad in ("../outside/secret_lib.py", "/etc/passwd", "linked/secret_lib.py", ".env",
                "nope.py", str(root / "debug.log"), "shop/cart.py\x00"):
        r = server.get(f"/v1/projects/{pid}/documents?path={quote(bad)}")
        assert r.status == 404 and r.error["code"] == "document_not_found", bad
    absolute = server.get(f"/v1/projects/{pid}/documents?path={quote(str(root))}/notes.txt")
    assert absolute.status == 200 and absolute.json["path"] == "notes.txt"


def test_a_folder_made_a_symlink_out_after_the_build_is_never_read(server, project, tmp_path):
    """A branch switch or a deploy script turns an indexed folder into a symlink to one outside
    the project (and the README into one): documents, the query's README layer and the next
    build read nothing through it — the walk's rule, held at every read."""
    pid, root = project
    first = build(server, pid)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "cart.py").write_text("SECRET = 'from outside the project'\n")
    (outside / "README.md").write_text("# Outside\n\nA secret paragraph from elsewhere.\n")
    (root / "shop").rename(root / "shop.real")
    (root / "shop").symlink_to(outside, target_is_directory=True)
    (root / "README.md").unlink()
    (root / "README.md").symlink_to(outside / "README.md")
    r = server.get(f"/v1/projects/{pid}/documents?path=shop/cart.py")
    assert r.status == 404 and r.error["code"] == "document_not_found"
    assert b"SECRET" not in r.body
    out = server.post(f"/v1/projects/{pid}/query", {"question": "what is this project?"}).json
    assert "secret paragraph" not in out["context"] and "Outside" not in out["context"]
    again = build(server, pid)
    assert again["files_deleted"] >= 2  # gone, not skipped as "binary"
    assert again["skipped"] == first["skipped"]
    r = server.get(f"/v1/projects/{pid}/documents?path=shop/cart.py")
    assert r.status == 404


def test_a_minified_bundle_is_skipped_and_says_why(server, tmp_path):
    """A bundle on one line under the size cap (a vendored .min.js, generated data) is not
    code anyone searches: skipped, with its reason, before a node is made of it."""
    root = tmp_path / "bundled"
    root.mkdir()
    (root / "vendor.js").write_text("".join(f"function f{n}(a){{return a+{n}}};"
                                            for n in range(3000)))
    (root / "app.py").write_text('def app():\n    """The app."""\n    return 1\n')
    (root / "wide.py").write_text("ROW = '" + "x" * 6000 + "'\n" + "y = 1\n" * 20)
    pid = server.register(root)
    result = build(server, pid)
    assert result["skipped"] == {"minified or generated (lines of thousands of characters)": 1}
    assert server.get(f"/v1/projects/{pid}/documents?path=vendor.js").status == 404
    assert server.get(f"/v1/projects/{pid}/documents?path=wide.py").status == 200  # one long
    # line in a file of short ones is code


def test_edits_deletes_and_renames_are_followed_exactly(server, project):
    pid, root = project
    first = build(server, pid)
    again = build(server, pid)
    assert (again["files_changed"], again["files_deleted"], again["chunks_embedded"]) == (0, 0, 0)

    cart = root / "shop/cart.py"
    cart.write_text(cart.read_text().replace("def compute_sales_tax", "def compute_vat"))
    (root / "notes.txt").unlink()
    (root / "shop/prices.py").rename(root / "shop/money.py")
    result = build(server, pid)
    assert (result["files_changed"], result["files_deleted"]) == (2, 2)
    # the rename re-embeds nothing: its texts' vectors are reused by hash; the edit re-embeds
    # only the changed function (and the module text that mentions it)
    assert result["chunks_embedded"] <= 2
    assert result["files"] == first["files"] - 1
    paths = indexed(server, pid)
    assert "shop/money.py" in paths and "shop/prices.py" not in paths and "notes.txt" not in paths
    assert "compute_vat" in labels(server, pid, "shop/cart.py")
    hits = server.post(f"/v1/projects/{pid}/search", {"query": "compute_sales_tax",
                                                      "mode": "keyword"}).json["results"]
    assert all(h["label"] != "compute_sales_tax" for h in hits)
    hits = server.post(f"/v1/projects/{pid}/search", {"query": "round money",
                                                      "mode": "keyword"}).json["results"]
    assert hits[0]["source_file"] == "shop/money.py" and hits[0]["label"] == "round_money"


def test_a_rename_re_embeds_only_the_texts_that_open_with_the_files_name(server, project):
    """The docs said a rename re-embeds nothing; `git mv` of falcon's misc.py embedded 1 of
    its 16 texts. What opens with the file's name re-embeds — a module with a docstring, a
    text file's one node — and nothing else: functions keep their vectors."""
    pid, root = project
    build(server, pid)
    (root / "shop/cart.py").rename(root / "shop/basket.py")  # module docstring: 1 of 5
    (root / "shop/prices.py").rename(root / "shop/money.py")  # no module docstring: 0 of 2
    (root / "notes.txt").rename(root / "invoices.txt")  # its one whole-file node: 1
    result = build(server, pid)
    assert (result["files_changed"], result["files_deleted"]) == (3, 3)
    assert result["chunks_embedded"] == 2


def test_a_second_build_is_409_with_the_running_job_and_cancel_stops_it(server, project):
    pid, root = project
    for i in range(400):  # enough work that the first build is still running
        (root / f"gen/m{i}.py").parent.mkdir(exist_ok=True)
        (root / f"gen/m{i}.py").write_text(f"def generated_{i}(x):\n    '''Doc {i}.'''\n"
                                           f"    return x * {i} + len(str(x)) - {i}\n")
    r = server.post(f"/v1/projects/{pid}/build", {})
    assert r.status == 202 and r.headers["location"].startswith("/v1/jobs/")
    job_id = r.json["job"]["id"]
    busy = server.post(f"/v1/projects/{pid}/build", {})
    assert busy.status == 409 and busy.error["code"] == "index_busy"
    assert busy.error["details"]["job"]["id"] == job_id
    assert server.delete(f"/v1/jobs/{job_id}").status == 202
    job = wait_for(lambda: (j := server.get(f"/v1/jobs/{job_id}").json)["status"]
                   not in ("queued", "running") and j, timeout=60)
    assert job["status"] == "cancelled"
    assert server.get(f"/v1/projects/{pid}/stats").json["built"] is False  # nothing half-written
    result = build(server, pid)  # the lock was released
    assert result["files"] >= 400 and result["nodes"] >= 800


@pytest.mark.parametrize("action, table, column", [
    # the lease cannot be taken: the job made for it stayed queued until a restart
    (sqlite3.SQLITE_INSERT, "leases", None),
    # the job cannot be read once started: its lease was let go while it ran, so a second
    # build was accepted beside it
    (sqlite3.SQLITE_READ, "jobs", "kind"),
])
def test_a_build_that_fails_to_start_leaves_no_job_and_no_lease(server, project, action, table,
                                                                 column):
    pid, _ = project
    kernel = server.kernel
    start = plugin._service(kernel).start_build
    deny_once(kernel.db.conn, action, table, column)
    try:
        with pytest.raises(sqlite3.DatabaseError):
            start(kernel.projects.get(pid), Actor("tester", "admin"), full=False, wait=False,
                  request_id=None)
    finally:
        kernel.db.conn.set_authorizer(None)
    assert server.get(f"/v1/jobs?project={pid}").json["items"] == []
    assert server.get(f"/v1/projects/{pid}/stats").json["built"] is False
    assert build(server, pid)["files"]  # the lease is free


def test_each_build_emits_index_built(server, project):
    pid, root = project
    result = build(server, pid)
    db = sqlite3.connect(server.home / "kernel.db")
    rows = db.execute("SELECT data FROM events WHERE kind = 'index.built' AND project_id = ?",
                      (pid,)).fetchall()
    db.close()
    data = json.loads(rows[-1][0])
    assert data["nodes"] == result["nodes"] and data["duration_ms"] > 0
    assert data["files_changed"] == result["files_changed"] and data["trigger"] == "api"


def test_bad_build_bodies_are_422_and_unknown_projects_404(server, project):
    pid, _ = project
    r = server.post(f"/v1/projects/{pid}/build", {"full": "yes please"})
    assert r.status == 422 and r.error["code"] == "validation_error"
    assert server.post("/v1/projects/p_nope/build", {}).status == 404
    r = server.post(f"/v1/projects/{pid}/search", {"query": "x"})
    assert r.status == 409 and r.error["code"] == "index_not_built"


def test_reading_an_index_never_built_creates_no_file(server, project):
    """A read of an unbuilt index opened (so created and migrated) index.db: on a full disk it
    answered 507 storage_full rather than 409 index_not_built. A 0-byte index.db, what a
    first open on a full disk leaves, is no index either."""
    pid, root = project
    index_db = root / ".neuralmind" / "index.db"
    for attempt in ("no file", "an empty file"):
        for method, tail, body in (("POST", "search", {"query": "x"}),
                                   ("POST", "query", {"question": "x"}), ("GET", "wakeup", None)):
            r = server.request(method, f"/v1/projects/{pid}/{tail}", json_body=body)
            assert r.status == 409 and r.error["code"] == "index_not_built", (attempt, tail)
        assert (index_db.stat().st_size == 0) if attempt == "an empty file" \
            else not index_db.exists()
        index_db.parent.mkdir(exist_ok=True)
        index_db.write_bytes(b"")
    build(server, pid)
    assert server.get(f"/v1/projects/{pid}/wakeup").status == 200


def test_a_new_embed_text_layout_re_embeds_every_file_at_the_next_build(server, project,
                                                                         tmp_path):
    """Unchanged files are skipped by size and mtime, but not when their vectors were made of
    another text ([index] embed_mode, embed_chars or test_embed_chars changed)."""
    pid, root = project
    first = build(server, pid)
    assert build(server, pid)["files_changed"] == 0
    with LocalServer(tmp_path / "home-code", plugins=["auth", "index"],
                     index={"embed_mode": "code"}) as other:
        again = other.register(root)
        result = build(other, again)
        assert (result["files_changed"], result["files_reindexed"], result["reindex_reason"]) == (
            0, first["files_changed"], "settings") and result["chunks_embedded"] > 0
        assert build(other, again)["files_changed"] == 0
    with LocalServer(tmp_path / "home-tests", plugins=["auth", "index"],
                     index={"test_embed_chars": 320}) as other:
        again = other.register(root)
        assert build(other, again)["files_reindexed"] == first["files_changed"]


def test_a_file_name_that_is_not_utf8_is_skipped_and_counted(server, tmp_path):
    """Issue 13 item 10: such a name (Latin-1 ``café.py``) reached SQLite with surrogates and
    failed every build of the repository; it is skipped, counted with its reason, and the
    rest is indexed."""
    import os
    root = tmp_path / "latin1"
    root.mkdir()
    (root / "ok.py").write_text("def fine():\n    return 1\n")
    with open(os.path.join(os.fsencode(root), b"caf\xe9.py"), "w") as fh:
        fh.write("def hidden():\n    return 2\n")
    os.makedirs(os.path.join(os.fsencode(root), b"d\xefr"))
    with open(os.path.join(os.fsencode(root), b"d\xefr", b"inner.py"), "w") as fh:
        fh.write("x = 1\n")
    pid = server.register(root)
    result = build(server, pid)
    assert result["files"] == 1 and result["files_skipped"] == 2
    assert result["skipped"] == {"file name not valid UTF-8": 2}
    assert labels(server, pid, "ok.py") == ["ok", "fine"]
    again = build(server, pid)  # and the next build too
    assert again["files_skipped"] == 2 and again["files_changed"] == 0


def test_files_total_counts_every_skipped_file_whatever_the_reason(server, tmp_path):
    """files_total = the project's files indexed + files_skipped, for every reason: a file
    over the size cap and a name not UTF-8 (left out before they are read) count in it as a
    binary or a minified file does."""
    import os
    root = tmp_path / "skips"
    root.mkdir()
    (root / "ok.py").write_text("def fine():\n    return 1\n")
    (root / "notes.md").write_text("# Notes\n")
    (root / "logo.png").write_bytes(b"\x89PNG\0binary")
    (root / "vendor.js").write_text("".join(f"function f{n}(a){{return a+{n}}};"
                                            for n in range(3000)))
    (root / "huge.py").write_text("x = 1\n" * 200_000)  # 1.2 MB: over the 1 MB cap
    with open(os.path.join(os.fsencode(root), b"caf\xe9.py"), "w") as fh:
        fh.write("def hidden():\n    return 2\n")
    pid = server.register(root)
    result = build(server, pid)
    assert result["files"] == 2 and result["files_skipped"] == 4
    assert set(result["skipped"]) == {
        "binary or not UTF-8 text", "minified or generated (lines of thousands of characters)",
        "larger than the size cap ([index] max_file_bytes, or a max_file_size rule)",
        "file name not valid UTF-8"}
    assert result["files_total"] == result["files"] + result["files_skipped"] == 6
    again = build(server, pid)  # an incremental build counts the same way
    assert again["files_total"] == 6 and again["files_skipped"] == 4


def test_lock_files_and_dot_files_are_config_not_docs(server, tmp_path):
    """`uv.lock` and `.gitignore` were typed `docs`, so a docs search quoted them."""
    files = {"README.md": "# Deploy\n\nRun gunicorn behind nginx to deploy.\n",
             "notes.txt": "deploy with gunicorn: workers and timeouts\n",
             ".gitignore": "# deploy with gunicorn\n*.log\n",
             "web/.dockerignore": "deploy gunicorn\n",
             "uv.lock": 'version = 1\n[[package]]\nname = "gunicorn"  # deploy\n',
             "Cargo.lock": '[[package]]\nname = "deploy-gunicorn"\n',
             "go.sum": "example.com/deploy/gunicorn v1.0.0 h1:abc=\n",
             "app.py": "def deploy():\n    return 'gunicorn'\n"}
    pid = built(server, tmp_path / "types", files)
    types = {rel: server.get(f"/v1/projects/{pid}/documents?path={quote(rel)}").json["file_type"]
             for rel in files}
    assert types == {"README.md": "docs", "notes.txt": "docs", ".gitignore": "config",
                     "web/.dockerignore": "config", "uv.lock": "config", "Cargo.lock": "config",
                     "go.sum": "config", "app.py": "code"}
    hits = server.post(f"/v1/projects/{pid}/search", {"query": "deploy with gunicorn",
                                                      "file_type": "docs",
                                                      "mode": "keyword"}).json["results"]
    assert {h["source_file"] for h in hits} == {"README.md", "notes.txt"}


def test_an_index_of_the_previous_parser_is_re_parsed_at_once(server, project):
    """The edges and file types a parse makes changed (re-exports, macros, nested classes,
    lock and dot-files): an index built before holds no `parse` stamp, and its next build
    re-parses every file (`layout`) without embedding anything again, so `.gitignore` is
    `config` at once rather than when it is next edited."""
    pid, root = project
    first = build(server, pid)
    db = sqlite3.connect(root / ".neuralmind" / "index.db")
    with db:  # what the previous release left: no parse stamp, .gitignore typed docs
        db.execute("DELETE FROM meta WHERE key = 'parse'")
        db.execute("UPDATE nodes SET file_type = 'docs' WHERE path = '.gitignore'")
        db.execute("UPDATE files SET file_type = 'docs' WHERE path = '.gitignore'")
    db.close()
    result = build(server, pid)
    assert (result["files_changed"], result["files_reindexed"], result["reindex_reason"],
            result["chunks_embedded"]) == (0, first["files_changed"], "layout", 0)
    r = server.get(f"/v1/projects/{pid}/documents?path=.gitignore")
    assert r.json["file_type"] == "config"
    again = build(server, pid)
    assert (again["files_reindexed"], again["reindex_reason"]) == (0, None)


def test_cython_and_other_unparsed_source_is_code_not_docs(server, tmp_path):
    """`.pyx` and `.pxd` were typed `docs` (no parser reads them), so `query --type docs`
    quoted Cython; they are `code`, as a whole-file node each."""
    files = {"README.md": "# Speedups\n\nThe C accelerated parser of the header values.\n",
             "falcon/cyutil/reader.pyx": "cdef class BufferedReader:\n"
                                         "    # parse the header values fast\n"
                                         "    cdef bytes _buffer\n",
             "falcon/cyutil/reader.pxd": "cdef class BufferedReader:\n    cdef bytes _buffer\n",
             "tools/bench.lua": "-- parse the header values in a loop\nlocal n = 0\n"}
    pid = built(server, tmp_path / "cy", files)
    types = {rel: server.get(f"/v1/projects/{pid}/documents?path={quote(rel)}").json["file_type"]
             for rel in files}
    assert types == {"README.md": "docs", "falcon/cyutil/reader.pyx": "code",
                     "falcon/cyutil/reader.pxd": "code", "tools/bench.lua": "code"}
    docs = server.post(f"/v1/projects/{pid}/query", {"question": "parse the header values",
                                                     "query_type": "docs", "trace": True}).json
    assert {h["source_file"] for h in docs["trace"]["hits"]} == {"README.md"}, docs["trace"]

