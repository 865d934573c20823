"""The index verbs of the client (build, search, query, wakeup, stats, jobs) and the project
commands, served from this process with the real model; `neuralmind up` on a fresh repository,
twice, against a real daemon."""

from __future__ import annotations

import json

import pytest

from neuralmind.client import Conflict, Job, QueryResult, SearchHit
from tests.client.conftest import client_of, git_repo, needs
from tests.support import run_cli

FILES = {
    "calc.py": 'def add(a, b):\n    """Sum two numbers."""\n    return a + b\n\n\n'
               'class Ledger:\n    def total(self, rows):\n        return sum(add(0, r) for r in rows)\n',
    "README.md": "# Calc\nA tiny calculator for the tests.\n",
}


@pytest.fixture(scope="module")
def built(served, tmp_path_factory):
    nm = client_of(served)
    needs(nm, "/v1/projects/{project_id}/build")
    repo = nm.project(git_repo(tmp_path_factory.mktemp("idx") / "calc", FILES))
    seen: list[Job] = []
    job = repo.build(on_progress=seen.append)
    return repo, job, seen


def test_build_waits_and_reports_progress(built):
    repo, job, seen = built
    assert isinstance(job, Job) and job.status == "done" and job.finished
    assert job.result["files"] == 2 and job.result["nodes"] >= 4
    assert seen[-1].status == "done" and "files_total" in seen[-1].progress
    assert job.progress["files_done"] == job.progress["files_total"] == 2
    # the embedding's own count and total (issue 13 item 15), what the progress bar shows
    assert job.progress["chunks_embedded"] == job.progress["chunks_total"] == job.result[
        "chunks_embedded"] > 0


def test_search_query_wakeup_stats(built):
    repo, _, _ = built
    hits = repo.search("sum two numbers", n=5)
    assert hits and isinstance(hits[0], SearchHit)
    assert (hits[0].source_file, hits[0].label, hits[0].line) == ("calc.py", "add", 1)
    assert (hits.mode, hits.notice, hits.raw["query"]) == ("hybrid", None, "sum two numbers")
    result = repo.query("how are numbers added?", context_budget=1000)
    assert isinstance(result, QueryResult) and "def add" in result.context
    assert 0 < result.tokens.total <= 1000 and "L0" in result.layers_used
    wake = repo.wakeup()
    assert "tiny calculator" in wake.context and wake.layers_used == ["L0", "L1"]
    stats = repo.stats()
    assert stats["built"] and stats["files"] == 2


def test_jobs_get_list_wait_cancel(built, nm):
    repo, job, _ = built
    assert nm.jobs.get(job.id).status == "done"
    assert job.id in [j.id for j in nm.jobs.list(project=repo.id)]
    assert nm.jobs.wait(job.id).status == "done"
    with pytest.raises(Conflict) as finished:
        nm.jobs.cancel(job.id)
    assert finished.value.code == "job_finished"
    started = repo.build(wait=False, full=True)
    assert started.status in ("queued", "running", "done")
    assert nm.jobs.wait(started.id, timeout=120).status == "done"


def test_up_twice_on_a_fresh_repository(daemon, tmp_path):
    needs(daemon.client(), "/v1/projects/{project_id}/build")
    repo = git_repo(tmp_path / "fresh", FILES)
    (repo / ".claude").mkdir()  # Claude Code is used here: `up` suggests wiring it
    first = daemon.run("up", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert "first build" in first.stdout and "indexed 2 files" in first.stdout
    assert daemon.url in first.stdout and str(daemon.home / "token") in first.stdout
    assert "neuralmind project query" in first.stdout
    assert "agent: neuralmind agent install claude-code" in first.stdout
    assert "install cursor" not in first.stdout
    # the progress line: its last state always (a poll sees the files being read only when the
    # build is still reading them; tests/client/test_progress.py draws every state)
    assert "nodes embedded" in first.stderr.splitlines()[-1]
    (repo / "calc.py").write_text(FILES["calc.py"] + "\n\ndef sub(a, b):\n    return a - b\n")
    second = daemon.run("up", "--json", cwd=repo)  # the same facts, as one object
    assert second.returncode == 0, second.stderr
    facts = json.loads(second.stdout)
    assert facts["url"] == daemon.url and not facts["daemon_started"] and not facts["first_build"]
    assert facts["project"]["path"] == str(repo) and facts["job"]["status"] == "done"
    assert facts["job"]["result"]["files_changed"] == 1 and facts["job"]["result"]["files_total"] == 2
    assert facts["token_file"] == str(daemon.home / "token")
    query = daemon.run("project", "query", "subtract two numbers", cwd=repo)
    assert query.returncode == 0 and "def sub" in query.stdout
    assert "restart it" not in first.stdout
    found = daemon.home / "daemon.json"
    info = found.read_text()
    found.write_text(info.replace('"code": "', '"code": "0'))  # as started before an upgrade
    try:
        third = daemon.run("up", cwd=repo)
    finally:
        found.write_text(info)
    assert third.returncode == 0 and "it runs the NeuralMind installed when it started, not " \
        "this one: restart it" in third.stdout.splitlines()[0]


def test_project_index_commands(served, built):
    repo, _, _ = built

    def run(*args: str) -> tuple[int, str]:
        code, out, _ = run_cli(*args, env={"NEURALMIND_API_URL": served.url,
                                           "NEURALMIND_API_TOKEN": served.token})
        return code, out

    code, out = run("project", "build", "--json", "--project", repo.info.path)
    assert code == 0 and json.loads(out)["status"] == "done"
    code, out = run("project", "search", "sum two numbers", "-n", "3", "--project", repo.id)
    assert code == 0 and out.splitlines()[0].split()[:2] == ["SCORE", "SOURCE_FILE"]
    assert "calc.py" in out
    code, out = run("project", "wakeup", "--json", "--project", repo.id)
    assert json.loads(out)["layers_used"] == ["L0", "L1"]
    code, out = run("project", "stats", "--project", repo.id)
    assert code == 0 and "nodes:" in out
    code, out = run("project", "build", "--no-wait", "--json", "--project", repo.id)
    job = json.loads(out)
    assert job["kind"] == "build" and job["id"]
    assert repo._nm.jobs.wait(job["id"], timeout=120).status == "done"
