"""A kernel.db damaged in pages the start-up's own queries do not reach (the middle of the
events table, what a failing disk or a copy taken mid-write leaves) stops the start in one
line naming the file — the first retention prune, which reads the tables it prunes whole,
runs before the kernel serves — instead of a start that says "running" while every route
answers 500. Real files, real pages."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from kernel.plugins import StartupError
from tests.kernel.test_storage_faults import start_refused
from tests.support import make_kernel

pytestmark = pytest.mark.sqlite_only("SQLite files: their pages")

PAGE = 4096  # SQLite's default page size, which kernel.db keeps


def home_with_events(home: Path, count: int = 3000) -> None:
    kernel = make_kernel(home, plugins=[])
    try:
        for n in range(count):
            kernel.emit("project.registered", data={"n": n, "pad": "x" * 100})
    finally:
        kernel.shutdown()


def junk_a_middle_leaf(path: Path, table: str) -> int:
    """Overwrite a leaf page from the middle of ``table`` (none the start reads otherwise);
    its page number."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        leaves = [row[0] for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,))]
    page = leaves[len(leaves) // 2]
    with open(path, "r+b") as fh:
        fh.seek((page - 1) * PAGE)
        fh.write(b"JUNK" * (PAGE // 4))
    return page


def test_damage_in_the_middle_of_the_events_stops_the_kernel_in_one_line(tmp_path):
    home = tmp_path / "home"
    home_with_events(home)
    junk_a_middle_leaf(home / "kernel.db", "events")
    with pytest.raises(StartupError) as raised:
        make_kernel(home, plugins=[])
    assert str(raised.value).startswith(f"{home / 'kernel.db'} is damaged (database disk image "
                                        "is malformed): restore it from a backup")


def test_the_daemon_start_quotes_it_and_nothing_serves(tmp_path):
    home = tmp_path / "home"
    home_with_events(home)
    junk_a_middle_leaf(home / "kernel.db", "events")
    assert start_refused(home) == 1  # and status says no daemon runs


def test_a_whole_home_starts_and_prunes_before_it_serves(tmp_path):
    home = tmp_path / "home"
    home_with_events(home, count=10)
    with closing(sqlite3.connect(home / "kernel.db")) as conn, conn:
        conn.execute("UPDATE events SET at = '2000-01-01T00:00:00Z'")
    kernel = make_kernel(home, plugins=[])
    try:  # pruned by the time the constructor returns, not some time after on a thread
        assert kernel.events.after(0) == []
    finally:
        kernel.shutdown()


def test_damage_in_the_project_registry_stops_the_kernel_too(tmp_path):
    home = tmp_path / "home"
    kernel = make_kernel(home, plugins=[])
    try:
        for n in range(40):
            (tmp_path / f"r{n:02}").mkdir()
            kernel.projects.register(str(tmp_path / f"r{n:02}"))
    finally:
        kernel.shutdown()
    junk_a_middle_leaf(home / "kernel.db", "projects")
    with pytest.raises(StartupError) as raised:
        make_kernel(home, plugins=[])
    assert str(raised.value).startswith(f"{home / 'kernel.db'} is damaged (database disk image "
                                        "is malformed): restore it from a backup")
