"""The helpers the kernel owns for every plugin (issue: one git reader, one token estimate,
one stopword list, one per-project store cache, one versioned vector cache with top-k, one
side-thread pool, one SQL splitter, one clock, one job answer)."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import threading
import time
from types import SimpleNamespace

import falcon
import numpy as np
import pytest

from kernel import gitinfo
from kernel.api import answer_job
from kernel.app import Kernel
from kernel.clock import now_iso, today
from kernel.config import load_settings
from kernel.errors import InvalidFields
from kernel.jobs import Job
from kernel.storage import ProjectStores, statements
from kernel.text import STOPWORDS, estimate_tokens, keyword_text, unspaced
from kernel.vectors import VersionedCache, top_k

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_GLOBAL": "/dev/null"}


def git(cwd, *args) -> str:
    import os
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "sub" / "deeper").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    return root


def test_git_head_from_the_root_a_sub_folder_packed_refs_and_a_worktree(repo, tmp_path):
    sha = git(repo, "rev-parse", "HEAD")
    assert gitinfo.head(repo) == sha
    assert gitinfo.head(repo / "sub" / "deeper") == sha  # a project inside a repository
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert gitinfo.head(repo) == sha
    (repo / "b.txt").write_text("b")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "worktree", "add", "-q", "-b", "other", str(tmp_path / "wt"), sha)
    assert gitinfo.head(tmp_path / "wt") == sha and gitinfo.head(repo) == second
    assert gitinfo.changed_since(repo, sha) == {"b.txt"}
    git(repo, "checkout", "-q", "--detach", sha)
    assert gitinfo.head(repo) == sha  # a detached HEAD names the commit itself


def test_no_repository_or_an_unborn_branch_has_no_head(tmp_path):
    assert gitinfo.head(tmp_path) == ""
    git(tmp_path, "init", "-q")
    assert gitinfo.head(tmp_path) == ""
    assert gitinfo.changed_since(tmp_path, "0" * 40) is None


def test_the_token_estimate_and_the_stopwords():
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    assert {"the", "and", "self", "which"} <= STOPWORDS and "parser" not in STOPWORDS


def test_keyword_text_pairs_chinese_and_japanese_runs_and_normalises_the_rest():
    """A run of Han or kana is one token to a keyword tokenizer; its character pairs, set apart
    from the words beside it, let a word inside it match, on the index's side and the query's
    alike."""
    assert keyword_text("使用数据库连接池").split() == ["使用", "用数", "数据", "据库", "库连",
                                                     "连接", "接池", "池"]
    assert keyword_text("数据库").split() == ["数据", "据库", "库"]  # its pairs: a phrase above
    assert keyword_text("キャッシュにはRedisを使う").split() == [
        "キャ", "ャッ", "ッシ", "シュ", "ュに", "には", "は", "Redis", "を使", "使う", "う"]
    # one character, as a prefix, matches every pair it begins and a run it ends (数据库锁)
    assert keyword_text("数据库锁").split() == ["数据", "据库", "库锁", "锁"]
    assert keyword_text("库").split() == ["库"] and unspaced("库") and unspaced("数据库")
    assert not unspaced("Redis缓存") and not unspaced("é")
    assert keyword_text("数据库锁", query=True).split() == ["数据", "据库", "库锁"]  # pairs alone
    assert keyword_text("donne\u0301es") == "données"  # NFD, as macOS names files
    assert keyword_text("ＡＢＣ ｶﾅ", query=True).split() == ["ABC", "カナ"]  # full, half width
    assert keyword_text("Plain text, 한국어 띄어쓰기") == "Plain text, 한국어 띄어쓰기"


def test_sql_statements_split_on_complete_statements_only_even_on_one_line():
    script = """CREATE TABLE t (x TEXT DEFAULT ';');
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN
        UPDATE t SET x = 'a;b';
    END;
    INSERT INTO t VALUES ('last')"""
    parts = list(statements(script))
    assert len(parts) == 3 and parts[1].startswith("CREATE TRIGGER") and parts[1].endswith("END;")
    assert parts[2] == "INSERT INTO t VALUES ('last')"
    one_line = "CREATE TABLE a (x); CREATE TABLE b (y); -- c; d\nSELECT 1;"
    assert list(statements(one_line)) == ["CREATE TABLE a (x);", "CREATE TABLE b (y);",
                                          "-- c; d\nSELECT 1;"]


def test_the_clock_is_utc_iso():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now_iso())
    assert now_iso()[:10] == today()


def test_project_stores_open_one_store_per_project_once(tmp_path):
    opened = []

    def open_store(project):
        time.sleep(0.01)
        opened.append(project.id)
        return object()

    stores = ProjectStores(open_store)
    a, b = (SimpleNamespace(id=pid, path=tmp_path, state_dir=tmp_path / pid, registered_at="1")
            for pid in "ab")
    got = []
    threads = [threading.Thread(target=lambda p=p: got.append(stores.get(p))) for p in [a] * 8]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert opened == ["a"] and len({id(x) for x in got}) == 1
    assert stores.get(b) is not stores.get(a) and opened == ["a", "b"]
    assert (tmp_path / "a" / ".gitignore").read_text() == "*\n"  # the state folder git ignores
    # registered anew: its own store, and forgetting the old registration leaves it be
    again = SimpleNamespace(**{**vars(a), "registered_at": "2"})
    fresh = stores.get(again)
    assert fresh is not got[0] and opened == ["a", "b", "a"]
    assert stores.forget(a) is None and stores.get(again) is fresh
    assert stores.forget(again) is fresh and stores.forget(again) is None


def test_a_deleted_project_folder_is_never_made_anew_by_a_store(tmp_path):
    """A project's directory removed while the server runs: neither a thread connecting to a
    store it already held (the memory backfill's did, under load) nor a first open makes the
    folder again, with an empty database in it."""
    from kernel.errors import Conflict
    from kernel.storage import Database

    held = Database(tmp_path / "held" / ".neuralmind" / "memory.db", [])
    held.conn.execute("CREATE TABLE t (x)")
    shutil.rmtree(tmp_path / "held")
    failed = []

    def connect_from_another_thread():
        try:
            held.conn.execute("SELECT 1")
        except sqlite3.OperationalError as ex:
            failed.append(str(ex))

    thread = threading.Thread(target=connect_from_another_thread)
    thread.start()
    thread.join()
    assert failed == ["unable to open database file"] and not (tmp_path / "held").exists()

    stores = ProjectStores(lambda project: Database(project.state_dir / "memory.db", []))
    removed = SimpleNamespace(id="p", path=tmp_path / "removed",
                              state_dir=tmp_path / "removed" / ".neuralmind")
    with pytest.raises(Conflict) as refused:
        stores.get(removed)
    assert refused.value.code == "project_directory_missing"
    assert not removed.path.exists()


def test_a_versioned_cache_reloads_when_the_stamp_moves_and_loads_once_under_contention():
    cache: VersionedCache[str] = VersionedCache()
    stamp, loads = [1], []

    def load():
        time.sleep(0.01)
        loads.append(stamp[0])
        return stamp[0], f"v{stamp[0]}"

    results = []
    threads = [threading.Thread(target=lambda: results.append(
        cache.get("k", lambda: stamp[0], load))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["v1"] * 8 and loads == [1]
    stamp[0] = 2  # a write elsewhere moved the store's version
    assert cache.get("k", lambda: stamp[0], load) == "v2" and loads == [1, 2]
    assert cache.get("other", lambda: stamp[0], load) == "v2" and loads == [1, 2, 2]


def test_top_k_is_best_first_within_the_mask():
    scores = np.array([0.1, 0.9, 0.5, 0.7, 0.3], dtype=np.float32)
    assert top_k(scores, 3).tolist() == [1, 3, 2]
    keep = np.array([True, False, True, False, True])
    assert top_k(scores, 3, keep).tolist() == [2, 4, 0]
    assert top_k(scores, 10, keep).tolist() == [2, 4, 0]  # never a masked-out row
    assert top_k(scores, 0).tolist() == [] and top_k(scores[:0], 5).tolist() == []


def test_side_threads_run_beside_the_caller(tmp_path):
    kernel = Kernel(load_settings(None, kernel={"home": str(tmp_path)}, embeddings={"warm": False}),
                    plugins=[], load_entrypoints=False)
    try:
        started = threading.Event()
        future = kernel.beside(lambda x: (started.set(), x * 2)[1], 21)
        assert started.wait(5) and future.result(5) == 42
    finally:
        kernel.shutdown()


def test_a_job_answer_is_200_when_waited_for_else_202_with_location():
    job = Job(id="j1", kind="k", project_id=None, status="done", created_at=now_iso())
    waited, queued = falcon.Response(), falcon.Response()
    assert answer_job(waited, job, True).job.id == "j1" and waited.status in (200, "200 OK")
    assert waited.location is None
    answer_job(queued, job, False)
    assert queued.status in (202, "202 Accepted") and queued.location == "/v1/jobs/j1"


def test_field_errors_are_placed_under_the_query_or_the_body():
    err = InvalidFields([{"loc": "cursor", "msg": "m", "type": "t"},
                         {"loc": ("items", 3, "id"), "msg": "m", "type": "t"}])
    err.place(frozenset({"cursor", "limit"}))
    assert [e["loc"] for e in err.details["errors"]] == [["query", "cursor"],
                                                         ["body", "items", 3, "id"]]
    assert err.status == 422 and err.code == "validation_error"


def test_a_cursor_is_refused_unless_it_holds_what_a_listing_wrote():
    from kernel.models import decode_cursor, encode_cursor, row_number, text_pair
    assert decode_cursor(encode_cursor(["2026-01-01", "m1"]), text_pair) == ["2026-01-01", "m1"]
    assert decode_cursor(encode_cursor(2 ** 63 - 1), row_number) == 2 ** 63 - 1
    for cursor, valid in [(encode_cursor(["\ud800", "x"]), text_pair),  # no database takes it
                          (encode_cursor(2 ** 63), row_number), (encode_cursor(-1), row_number),
                          (encode_cursor(True), row_number), ("%%%", text_pair)]:
        with pytest.raises(InvalidFields) as refused:
            decode_cursor(cursor, valid)
        assert refused.value.errors[0]["type"] == "cursor_invalid"


@pytest.mark.parametrize("strict", [True, False])
def test_an_iso_date_is_yyyy_mm_dd_in_the_digits_0_to_9_and_nothing_else(strict):
    """``\\d`` took every script's digits, so ２０２８-０２-２９ was "no day of the calendar";
    validated laxly (an import line), 0 was 1970-01-01 and "20260601" a confusing datetime."""
    import datetime as dt

    from pydantic import TypeAdapter, ValidationError

    from kernel.errors import error_message
    from kernel.models import ISODate
    adapter = TypeAdapter(ISODate)
    assert adapter.validate_python("2028-02-29", strict=strict) == dt.date(2028, 2, 29)
    assert adapter.validate_json('"2028-02-29"', strict=strict) == dt.date(2028, 2, 29)
    for given, says in [("２０２８-０２-２９", "２０２８-０２-２９ holds digits other than 0-9 (a date "
                                             "is written YYYY-MM-DD)"),
                        ("2028-02-30", "2028-02-30 is no day of the calendar (YYYY-MM-DD)"),
                        (0, "a date is written YYYY-MM-DD"), ("0", "a date is written YYYY-MM-DD"),
                        (1798761600, "a date is written YYYY-MM-DD"),
                        ("20260601", "a date is written YYYY-MM-DD"),
                        (dt.datetime(2026, 6, 1), "a date is written YYYY-MM-DD")]:
        with pytest.raises(ValidationError) as refused:
            adapter.validate_python(given, strict=strict)
        assert [error_message(e) for e in refused.value.errors()] == [says], given
