"""The index plugin's `neuralmind project …` commands given input they cannot use, and with
``--json``: an id that cannot be one is refused in words (no traceback), and ``--json`` gives
the whole answer and the same exit code as the text."""

from __future__ import annotations

import json

import pytest

from tests.plugins.index.conftest import built
from tests.support import run_cli

FILES = {"calc.py": "def add(a, b):\n    return a + b\n",
         "ledger.py": "from calc import add\n\n\ndef total(rows):\n    return add(0, sum(rows))\n"}


@pytest.fixture(scope="module")
def run(server, tmp_path_factory):
    """``neuralmind project ARGS --project <a built repository>``: (exit code, out, err)."""
    pid = built(server, tmp_path_factory.mktemp("calc"), FILES)

    def cli(*args: str) -> tuple[int, str, str]:
        return run_cli("project", *args, "--project", pid,
                       env={"NEURALMIND_API_URL": server.url, "NEURALMIND_API_TOKEN": server.token})
    cli.pid = pid
    return cli


def test_a_document_id_holding_a_slash_is_refused_as_the_other_ids_are(run):
    """The client raised ValueError on `a/b` (quoted, a / would reach another route), which
    the CLI printed as a traceback; memory and webhook ids were refused by their argument."""
    code, out, err = run("remove-document", "a/b")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.endswith("argument id: 'a/b' is not a document id: an id has no / in it "
                        "(`neuralmind project documents` shows them)\n"), err


def test_next_json_is_the_whole_answer_not_indexed_too(run):
    """`--json` printed the files alone: a file the index does not hold vanished without a
    word (the stderr note is left out for JSON, whose not_indexed says it)."""
    code, out, err = run("next", "calc.py", "nothere.py", "--json")
    assert (code, err) == (0, "")
    answer = json.loads(out)
    assert answer["project_id"] == run.pid and answer["files_open"] == ["calc.py", "nothere.py"]
    assert answer["not_indexed"] == ["nothere.py"]
    assert [f["path"] for f in answer["files"]] == ["ledger.py"]
    code, out, err = run("next", "calc.py", "nothere.py")
    assert code == 0 and "ledger.py" in out
    assert err == ("neuralmind: left out, not in the index: nothere.py (a new file counts once "
                   "a build has indexed it: `neuralmind project build`)\n")


def test_learned_neighbours_of_an_unknown_file_exit_1_with_json_too(run):
    said = ("neuralmind: nothere.py is not an indexed file, and nothing was learned with it "
            "(`neuralmind project build` indexes a new file)\n")
    code, out, err = run("neighbors", "nothere.py", "--learned")
    assert (code, out, err) == (1, "", said)
    code, out, err = run("neighbors", "nothere.py", "--learned", "--json")
    assert (code, err) == (1, said)
    assert json.loads(out) == {"project_id": run.pid, "file": "nothere.py", "indexed": False,
                               "neighbors": []}
    code, out, err = run("neighbors", "calc.py", "--learned", "--json")  # indexed: no error
    assert (code, err) == (0, "") and json.loads(out)["indexed"] is True


def test_impact_limit_has_its_help():
    code, out, _ = run_cli("project", "impact", "--help")
    assert code == 0  # as words: argparse wraps the help to the terminal's width
    assert "--limit LIMIT impacted nodes to list at most (1–1000, 100)" in " ".join(out.split())


def test_search_file_type_takes_what_the_server_takes_and_says_so(run):
    """`--file-type` had no help, and `--file-type nope` went to the server: a 422 in the
    validator's words, exit 1."""
    from typing import get_args

    from neuralmind.commands.projects import FILE_TYPES
    from plugins.index.models import FileType
    assert FILE_TYPES == get_args(FileType)  # the CLI's copy, kept to the server's
    code, out, err = run("search", "add", "--file-type", "nope")
    assert (code, out) == (2, "")
    assert err.endswith("argument --file-type: invalid choice: 'nope' (choose from 'code', "
                        "'docs', 'config')\n"), err
    code, out, err = run("search", "add", "--file-type", "code", "--mode", "keyword", "--json")
    hits = json.loads(out)
    assert code == 0 and hits and {h["file_type"] for h in hits} == {"code"}, err
    code, out, _ = run_cli("project", "search", "--help")
    assert code == 0 and ("--file-type {code,docs,config} only hits in files of this type: "
                          "code, docs") in " ".join(out.split())
