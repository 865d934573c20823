"""The client's code-intelligence verbs (impact, neighbours, next files, activity, feedback,
savings, documents, validate) and the `neuralmind project …` commands behind them, used as a
new user would — wrong input included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuralmind.client import NotFound, ValidationFailed
from tests.client.conftest import client_of, git_repo, needs
from tests.support import run_cli

FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "ledger.py": "from calc import add\n\n\ndef total(rows):\n    return add(0, sum(rows))\n",
    "README.md": "# Calc\nA tiny calculator.\n",
    "core/config.py": "def settings():\n    return {}\n",
    "core/boot.py": "from core.config import settings\n\n\ndef boot():\n    return settings()\n",
}


@pytest.fixture(scope="module")
def repo(served, tmp_path_factory):
    nm = client_of(served)
    needs(nm, "/v1/projects/{project_id}/impact")
    handle = nm.project(git_repo(tmp_path_factory.mktemp("intel") / "calc", FILES))
    assert handle.build().status == "done"
    return handle


def test_client_verbs(repo, nm, tmp_path):
    out = repo.impact(["calc.py"])
    assert [i["node"]["label"] for i in out["impacted"]][:2] == ["ledger", "total"]
    assert repo.neighbors(file="ledger.py")["callees"][0]["node"]["label"] == "add"
    assert repo.activity(["calc.py", "README.md"], kind="edit")["pairs"] == 1
    assert repo.learned_neighbors("calc.py")["neighbors"][0]["file"] == "README.md"
    files = repo.next_files(["calc.py"])
    assert {f["path"] for f in files} == {"ledger.py", "README.md"}
    assert repo.feedback("unhelpful", file="README.md", related=["calc.py"])["pairs"] == 1
    repo.query("how are numbers added?")
    assert repo.savings(days=1)["by_kind"]["query"]["calls"] == 1
    assert repo.synapse_stats()["synapses"] >= 1  # the query linked its hit files too
    note = tmp_path / "adding.md"
    note.write_text("# Adding\n\nAddition is commutative.\n")
    doc = repo.ingest(note)
    assert doc["name"] == "adding.md" and doc["content_type"] == "text/markdown"
    assert repo.document(doc["id"])["text"].startswith("# Adding")
    words = repo.ingest(b"plain words", name="words.txt")
    assert words["content_type"] == "text/plain"
    listed = repo.documents()
    assert [d["id"] for d in listed] == [doc["id"], words["id"]]
    assert listed[0] == {k: v for k, v in doc.items()}  # what ingest answered, nodes counted
    repo.delete_document(doc["id"])
    with pytest.raises(NotFound):
        repo.document(doc["id"])
    assert [d["id"] for d in repo.documents()] == [words["id"]]
    with pytest.raises(NotFound, match="names the list"):
        repo.document("ingested")
    checked = repo.validate()
    assert checked["ok"], [c for c in checked["checks"] if not c["ok"]]
    with pytest.raises(ValidationFailed):
        repo.impact(["calc.py"], depth=9)
    # one string where a list goes is one item, never its characters
    assert repo.impact("calc.py") == repo.impact(["calc.py"])
    assert repo.next_files("calc.py") == repo.next_files(["calc.py"])
    assert repo.activity("calc.py")["files"] == 1  # one file, not seven
    with pytest.raises(ValueError):
        repo.ingest(b"no name")
    with pytest.raises(ValueError, match=r"a file's path or its bytes, not ''"):
        repo.ingest("")  # it read the working directory: IsADirectoryError '.'
    assert repo.ingest(bytearray(b"more words"), name="more.txt")["path"].endswith("more.txt")
    with pytest.raises(TypeError, match=r"a directory's path, not None"):
        nm.projects.find(None)  # it answered None, as for a folder no project is at
    jobs = len(list(nm.jobs.list(project=repo.id)))
    with pytest.raises(TypeError, match="on_progress must be a function of the job, not int"):
        repo.build(on_progress=5)  # refused before a build starts
    with pytest.raises(ValueError, match="poll must be a number of seconds above 0, not -1"):
        nm.jobs.wait("feedfacefeedface", poll=-1)
    assert len(list(nm.jobs.list(project=repo.id))) == jobs


@pytest.fixture
def run(served, repo):
    """``neuralmind project ARGS --project <repo>`` in this process: (exit code, out, err)."""
    def cli(*args: str) -> tuple[int, str, str]:
        return run_cli("project", *args, "--project", repo.id,
                       env={"NEURALMIND_API_URL": served.url, "NEURALMIND_API_TOKEN": served.token})
    return cli


def test_project_commands_and_what_they_say_to_wrong_input(run, tmp_path):
    code, out, _ = run("impact", "calc.py")
    assert code == 0 and "ledger.py:4 total" in out and "calc.py  changed" in out
    code, out, _ = run("impact", "calc.py", "--json")
    assert json.loads(out)["files"][0]["path"] == "calc.py"
    code, _, err = run("neighbors", "nosuch.py", "--learned")
    assert code == 1 and "nosuch.py is not an indexed file, and nothing was learned" in err
    code, _, err = run("next", "nosuch.py")
    assert code == 0 and "left out, not in the index: nosuch.py" in err
    code, out, _ = run("next", "calc.py", "-n", "3")
    assert code == 0 and out.splitlines()[0].split() == ["SCORE", "PATH", "WHY"]
    code, out, _ = run("neighbors", "ledger.py")
    assert code == 0 and "callees:" in out and "calc.py:1 add" in out
    code, out, _ = run("activity", "calc.py", "ledger.py", "--kind", "test", "--session", "cli")
    assert code == 0 and "recorded 2 file(s) as test" in out and "1 pair(s) linked" in out
    code, out, _ = run("neighbors", "calc.py", "--learned")  # what the activity above linked
    assert code == 0 and "ledger.py" in out
    code, out, _ = run("query", "how are amounts added", "--trace")
    assert code == 0 and "\n-- trace:\n{" in out  # the trace, without --json too
    lines = out.splitlines()  # a blank line before each layer's header (## Layout's list ran on)
    headers = [i for i, line in enumerate(lines)
               if line in ("## Project", "## Layout", "## Related", "## Search results")]
    assert len(headers) >= 3 and all(lines[i - 1] == "" for i in headers[1:]), out
    code, out, _ = run("stats")
    assert code == 0 and "languages" in out and "{'" not in out  # never Python's repr
    code, out, _ = run("savings", "--days", "7")
    assert code == 0 and "total:" in out
    note = tmp_path / "ops.txt"
    note.write_text("Deploys happen on Tuesdays.\n")
    code, out, _ = run("ingest", str(note))
    assert code == 0 and out.startswith("ingested doc_") and "text/plain" in out
    code, out, _ = run("ingest", str(note), "--name", "ops.md", "--type", "Text/Markdown")
    assert code == 0 and "text/markdown" in out
    doc_id = out.split()[1]
    assert f"`neuralmind project remove-document {doc_id}`" in out
    code, out, _ = run("documents")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["ID", "NAME", "CONTENT_TYPE"]
    assert doc_id in out and "ops.md" in out and "ops.txt" in out
    code, out, _ = run("remove-document", doc_id)
    assert code == 0 and out.strip() == f"removed {doc_id}"
    code, out, _ = run("documents", "--json")
    listed = json.loads(out)
    assert "ops.txt" in [d["name"] for d in listed] and doc_id not in [d["id"] for d in listed]
    code, out, _ = run("validate")
    assert code == 0 and "files" in out

    wrong = [
        (("impact",), 2, "name the changed files"),
        (("impact", "nothere.py"), 1, "nothere.py is not an indexed file"),
        (("impact", "../../etc/passwd"), 1, "is outside the project"),
        (("impact", "calc.py", "--depth", "9"), 2, "--depth: 9 is outside 1–6"),
        (("impact", "--node", "n_bogus"), 1, "no node with id n_bogus"),
        (("next",), 2, "the following arguments are required: files"),
        (("next", "calc.py", "-n", "x"), 2, "'x' is not a whole number"),
        (("neighbors",), 2, "name a file"),
        (("neighbors", "calc.py", "--node", "n_1"), 2, "or a node (`--node ID`), not both"),
        (("neighbors", "--node", "n_1", "--learned"), 2, "learned neighbours are kept per file"),
        (("neighbors", "calc.py", "--learned", "--depth", "3"), 2,
         "--depth follows structural edges; --learned lists"),
        (("neighbors", "calc.py", "--learned", "--limit", "300"), 2,
         "--limit: 300 is outside 1–200 with --learned"),
        (("activity", "calc.py", "--kind", "write"), 2, "invalid choice: 'write'"),
        (("savings", "--days", "0"), 2, "--days: 0 is outside 1–366"),
        (("ingest", str(tmp_path / "missing.md")), 2, "missing.md: no such file"),
        (("ingest", str(tmp_path)), 2, "is not a file"),
        (("remove-document",), 2, "the following arguments are required: id"),
        (("ingest", ""), 2, "argument path: cannot be empty"),
        (("ingest", str(note), "--type", ""), 2, "argument --type: cannot be empty"),
        (("ingest", str(note), "--name", " "), 2, "argument --name: cannot be empty"),
        (("remove-document", "doc_nosuch"), 1, "no ingested document with id doc_nosuch"),
        (("ingest", str(note), "--type", "image/png"), 2,
         "--type: image/png is not a type ingest reads (text/markdown, "),
    ]
    (tmp_path / "slides.pptx").write_bytes(b"PK")
    wrong.append((("ingest", str(tmp_path / "slides.pptx")), 2, ".pptx is not a type ingest reads"))
    wrong.append((("ingest", str(note), "--name", ".."), 2,
                  "--name ..: a name without an extension is not a type ingest reads"))
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 no more")
    wrong.append((("ingest", str(tmp_path / "broken.pdf")), 1, "the PDF could not be read"))
    for args, status, says in wrong:
        code, out, err = run(*args)
        assert code == status and says in err, (args, code, out, err)


def test_file_arguments_are_read_from_the_current_directory(run, repo, monkeypatch):
    monkeypatch.chdir(Path(repo.info.path) / "core")
    code, out, err = run("impact", "config.py")
    assert code == 0 and "core/boot.py:4 boot" in out and "core/config.py  changed" in out, err
    code, out, err = run("neighbors", "boot.py")
    assert code == 0 and "core/config.py:1 settings" in out, err
    code, out, err = run("next", "boot.py")
    assert code == 0 and "core/config.py" in out, err
    code, out, err = run("activity", "config.py", "../core/boot.py", "nope.py", "--session", "sub")
    assert code == 0 and "recorded 2 file(s)" in out and "1 pair(s) linked" in out, err
    assert "left out, not in the index: nope.py" in out
    code, out, err = run("neighbors", "config.py", "--learned")
    assert code == 0 and "core/boot.py" in out, err
    # a path from the root, or one that is not here (deleted), is read as before
    code, out, err = run("impact", "ledger.py")
    assert code == 0 and "ledger.py  changed" in out, err
    code, out, err = run("impact", "core/gone.py")
    assert code == 1 and "core/gone.py is not an indexed file" in err


def test_memory_file_arguments_are_read_from_the_current_directory(served, repo, run,
                                                                     monkeypatch):
    """From core/, `memory add --file config.py` stored `config.py` (no such file) where
    `project impact config.py` reads core/config.py, and `--file ../ledger.py` was refused as
    outside the project: memory commands read FILE arguments as the index commands do."""
    monkeypatch.chdir(Path(repo.info.path) / "core")
    env = {"NEURALMIND_API_URL": served.url, "NEURALMIND_API_TOKEN": served.token}

    def memory(*args: str):
        code, out, err = run_cli("memory", *args, "--project", repo.id, "--json", env=env)
        assert code == 0, (args, err)
        return json.loads(out)

    made = memory("add", "Settings are read once", "-r", "at boot", "--file", "config.py",
                  "--file", "../ledger.py")
    assert made["files_affected"] == ["core/config.py", "ledger.py"]
    code, out, err = run("impact", "config.py")
    assert code == 0 and f"decision {made['id']}: Settings are read once" in out, err
    for found in (memory("list", "--file", "config.py"),
                  memory("search", "settings", "--mode", "keyword", "--file", "config.py")):
        assert [m["id"] for m in found] == [made["id"]]
    # a path from the root, or a file that is not here, is taken as given
    edited = memory("edit", made["id"], "--files", "boot.py", "calc.py", "gone.py")
    assert edited["files_affected"] == ["core/boot.py", "calc.py", "gone.py"]
    memory("delete", made["id"])
