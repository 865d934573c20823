"""What `neuralmind project build` and `up` show while a build runs (issue 13 item 15): files
first, then the nodes embedded out of their total with an ETA — not 100% of files while the
model works — and the files skipped, with why, at the end."""

from __future__ import annotations

import io

from neuralmind.client import Job
from neuralmind.commands.progress import ProgressBar, job_summary


def job(status="running", **progress) -> Job:
    return Job(id="j1", kind="build", status=status, progress=progress)


def test_files_then_nodes_embedded_out_of_their_total(monkeypatch):
    clock = iter([100.0, 110.0, 120.0, 130.0, 160.0, 170.0])
    monkeypatch.setattr("neuralmind.commands.progress.time.monotonic", lambda: next(clock))
    bar = ProgressBar(io.StringIO())  # started at 100 s
    files = bar.line(job(files_total=100, files_done=50, chunks_embedded=10, chunks_total=400))
    assert "50/100 files" in files and "ETA 10s" in files
    first = bar.line(job(files_total=100, files_done=100, chunks_embedded=100, chunks_total=1000))
    assert "100/1000 nodes embedded" in first and "files" not in first
    later = bar.line(job(files_total=100, files_done=100, chunks_embedded=300, chunks_total=1000))
    assert "300/1000 nodes embedded" in later and "ETA 35s" in later  # 200 in 10 s, 700 to go
    assert "#" * 8 in later and "[" + "#" * 9 not in later  # 30% of 28 columns
    done = bar.line(job("done", files_total=100, files_done=100, chunks_embedded=1000,
                        chunks_total=1000))
    assert "1000/1000 nodes embedded" in done and "ETA" not in done


def test_a_build_with_nothing_to_embed_shows_its_files():
    bar = ProgressBar(io.StringIO())
    line = bar.line(job("done", files_total=3, files_done=3, chunks_embedded=0, chunks_total=0))
    assert "3/3 files" in line


def test_another_kind_of_job_is_followed_without_a_builds_words():
    """`job wait` on a decay sweep said "done: no files to index" (the build's words)."""
    out = io.StringIO()
    bar = ProgressBar(out)
    bar(Job(id="j2", kind="memory.decay", status="running"))
    bar(Job(id="j2", kind="memory.decay", status="done"))
    assert out.getvalue() == "memory.decay running…\n"
    assert job_summary(Job(id="j2", kind="memory.decay", status="done")) == "memory.decay done"


def test_a_control_character_in_a_jobs_words_is_shown_not_sent():
    out = io.StringIO()  # a job's kind and status are the server's
    ProgressBar(out)(Job(id="j3", kind="x\x1b]0;owned\x07", status="running"))
    assert out.getvalue() == "x\\x1b]0;owned\\x07 running…\n"


def test_the_summary_says_what_was_skipped_and_why():
    result = {"files": 8, "nodes": 40, "edges": 3, "duration_ms": 1200, "files_changed": 8,
              "files_deleted": 0, "chunks_embedded": 40, "files_skipped": 3,
              "skipped": {"binary or not UTF-8 text": 2, "file name not valid UTF-8": 1}}
    text = job_summary(Job(id="j", kind="build", status="done", result=result))
    assert "indexed 8 files" in text
    assert "skipped 3 files: 2 binary or not UTF-8 text, 1 file name not valid UTF-8" in text
    with_docs = job_summary(Job(id="j", kind="build", status="done",
                                result={**result, "files": 13, "files_total": 11}))
    # files_total is the repository's files indexed (8) and skipped (3)
    assert with_docs.startswith("indexed 13 files (the repository's 8, 5 ingested documents), ")
    one = job_summary(Job(id="j", kind="build", status="done",
                          result={**result, "files": 1, "files_total": 2, "files_skipped": 1,
                                  "skipped": {"binary or not UTF-8 text": 1}}))
    assert one.startswith("indexed 1 file, ") and "; skipped 1 file: 1 binary" in one
    del result["skipped"], result["files_skipped"]
    assert "skipped" not in job_summary(Job(id="j", kind="build", status="done", result=result))
    # a build without a model says so (it was only in --json, as semantic: false)
    bare = job_summary(Job(id="j", kind="build", status="done", result={**result,
                                                                         "semantic": False}))
    assert bare.endswith("; keyword search only: no embedding model (docs/embeddings.md)")
    assert "keyword search only" not in job_summary(
        Job(id="j", kind="build", status="done", result={**result, "semantic": True}))
