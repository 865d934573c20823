"""Reads on a memory.db that cannot be written or read whole: a search on a full disk or
under another process's write lock answers at once (it embeds what is missing for itself and
writes nothing), and an export of a damaged file is answered as an error before its first
byte, or ends without its format's end after. Real SQLite files: a tmpfs filled to its last
byte, a second connection holding ``BEGIN IMMEDIATE``, pages overwritten with junk."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from neuralmind.client import BrokenAnswer, NeuralMindClient
from plugins.memory.plugin import memories
from tests.plugins.memory.conftest import Api, start

pytestmark = pytest.mark.sqlite_only("a project's memory.db: its file system, lock and pages")

# the backfill waits longer than a test: the records' vectors are missing when it searches
NO_BACKFILL = {"backfill_delay_s": 60, "decay_sweep_hours": 0}
FILLS = ["Fill the cache before the first request", "Fill the pool with warm connections"]


def db_file(api: Api) -> Path:
    return api.dir / ".neuralmind" / "memory.db"


def checkpointed(path: Path) -> sqlite3.Connection:
    """A connection of the test's own, with every committed page moved into the file itself
    and the WAL emptied (its next write must grow it)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


@contextmanager
def small_disk(where: Path):
    """A 16 MB tmpfs at ``where``; the test is skipped where mounting is not permitted."""
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)],
                          capture_output=True)
    if done.returncode:
        pytest.skip(f"a tmpfs cannot be mounted here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill_up(disk: Path) -> None:
    """Write a file until the disk has no byte left."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        size = 1 << 20
        while size:
            try:
                os.write(fd, b"\0" * size)
            except OSError:
                size //= 2
    finally:
        os.close(fd)


def found(api: Api, mode: str) -> list[str]:
    """The best hit's title for each of FILLS searched by its own words, in ``mode``."""
    out = []
    for title in FILLS:
        r = api.server.post(api.url(tail="search"), {"query": title, "mode": mode})
        assert r.status == 200, r.body
        out.append(r.json["results"][0]["title"])
    return out


def test_a_search_on_a_full_disk_answers_by_meaning_too(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        (disk / "proj").mkdir()
        server = start(tmp_path / "home", memory=NO_BACKFILL)
        try:
            api = Api(server, disk / "proj")
            for title in FILLS:
                api.create(title=title, rationale="so the first user never waits")
            checkpointed(db_file(api)).close()
            fill_up(disk)
            refused = server.post(api.base, {"title": "One more", "rationale": "no room"})
            assert refused.status == 507 and refused.error["code"] == "storage_full"

            for mode in ("hybrid", "semantic", "keyword"):
                assert found(api, mode) == FILLS, mode
        finally:
            server.stop()


def test_a_search_does_not_wait_for_the_write_lock_another_process_holds(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    with start(tmp_path / "home", memory=NO_BACKFILL) as server:
        api = Api(server, project)
        for title in FILLS:
            api.create(title=title, rationale="so the first user never waits")
        server.kernel.embedder.embed(["the model loaded: its first load is no lock's wait"])
        with closing(sqlite3.connect(db_file(api), isolation_level=None)) as holder:
            holder.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            assert found(api, "semantic") == FILLS
            assert found(api, "hybrid") == FILLS
            assert time.monotonic() - started < 3  # the busy timeout is 10 s
            holder.execute("ROLLBACK")

        service = memories(server.kernel)
        store = service.store(server.kernel.projects.get(api.pid))
        assert service.searcher.fill(store, server.kernel.embedder) == len(FILLS)  # the backfill's
        stats = server.get(api.url(tail="stats")).json["vectors"]
        assert (stats["embedded"], stats["pending"]) == (len(FILLS), 0)
        assert found(api, "semantic") == FILLS


def exported(api: Api, fmt: str):
    return api.server.get(api.url(tail="export") + f"?format={fmt}")


def damage(path: Path, leaf: str) -> None:
    """Overwrite the ``first`` or ``last`` leaf page of the memories table (in b-tree order:
    records by insertion) with junk."""
    with closing(checkpointed(path)) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [n for n, in conn.execute("SELECT pageno FROM dbstat WHERE name = 'memories' "
                                          "AND pagetype = 'leaf' ORDER BY path")]
    with open(path, "r+b") as f:
        f.seek((pages[0 if leaf == "first" else -1] - 1) * size)
        f.write(b"\xa5" * size)


def test_an_export_that_cannot_read_its_first_page_is_an_error_answer(api):
    api.load(*({"id": f"r{i}", "title": f"Record {i}"} for i in range(3)))
    damage(db_file(api), "first")

    r = exported(api, "ndjson")

    assert r.status >= 500 and r.headers["content-type"].startswith("application/json")
    assert r.error["request_id"] == r.headers["x-request-id"]
    assert r.error["message"] != "the server could not read the request"


def test_an_export_cut_short_ends_without_its_formats_end(api):
    """600 records: the first page (500) is streamed, the second cannot be read."""
    api.load(*({"id": f"r{i:04d}", "title": f"Record {i}",
                "created_at": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z"}
               for i in range(600)))
    whole = {fmt: exported(api, fmt).body for fmt in ("ndjson", "json", "md")}
    assert whole["ndjson"].endswith(b"}\n") and len(whole["ndjson"].splitlines()) == 600
    assert len(json.loads(whole["json"])) == 600
    assert whole["md"].endswith(b"_End of the export: 600 records._\n")
    damage(db_file(api), "last")

    cut = {fmt: exported(api, fmt) for fmt in ("ndjson", "json", "md")}

    assert {r.status for r in cut.values()} == {200}
    lines = cut["ndjson"].body.split(b"\n")
    assert 500 <= len(lines) < 600 and lines[-1]  # the last line has no newline
    assert [json.loads(x)["memory"]["id"] for x in lines] == [f"r{i:04d}" for i in range(len(lines))]
    assert cut["json"].body.startswith(b"[") and not cut["json"].body.rstrip().endswith(b"]")
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut["json"].body)
    assert cut["md"].body.count(b"\n## Record ") >= 500 and b"_End of the export" not in \
        cut["md"].body
    assert api.server.output().count("cut short: its body ends without the format's end") == 3
    # the Python client (and so `neuralmind memory export`) tells a cut export from a whole one
    records = NeuralMindClient(api.server.url, api.server.token).project(api.pid).memories
    for export in (lambda: list(records.export()), records.export_markdown):
        with pytest.raises(BrokenAnswer, match=r"the export from .* broke off after 5\d\d "
                                               "records, without its end"):
            export()
