"""docs/quickstart.md and docs/client.md cannot rot: every code block in them is run, in
order, against a real daemon from inside a small git repository — ```sh blocks with bash
(-e, pipefail) in the user's environment, ```python blocks with this Python.

One line is not run as written: `python3 -m pip install -e .` (the test runs from the installed tree);
it is replaced by a check that the `neuralmind` command it provides is on PATH. The README
and the quickstart agree on the install command and on the first query `up` suggests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.client.conftest import Daemon, git_repo
from tests.support import ROOT

DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
REPO = {
    "config.py": 'import tomllib\n\n\ndef load_settings(path):\n    """Read the TOML settings '
                 'file, then apply environment overrides."""\n    with open(path, "rb") as fh:\n'
                 '        return tomllib.load(fh)\n',
    "app.py": "from config import load_settings\n\n\ndef main():\n    return load_settings('a.toml')\n",
    "README.md": "# demo\nA small app that reads its configuration file.\n",
}


def blocks(page: str) -> list[tuple[str, str]]:
    found = [(lang, code) for lang, code in BLOCK.findall((DOCS / page).read_text())]
    assert found and {lang for lang, _ in found} <= {"sh", "python"}, \
        f"{page}: every block is ```sh or ```python so it can be run"
    return found


def run_block(lang: str, code: str, d: Daemon, cwd: Path, bindir: Path) -> subprocess.CompletedProcess:
    env = {**d.env, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    if lang == "sh":
        code = re.sub(r"^python3 -m pip install -e \.$", "command -v neuralmind", code,
                      flags=re.M)
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
    else:
        cmd = [sys.executable, "-c", code]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"```{lang}\n{code}```\n→ {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def bindir(tmp_path) -> Path:
    """`neuralmind` on PATH, running this tree's code."""
    path = tmp_path / "bin"
    path.mkdir()
    script = path / "neuralmind"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m neuralmind.cli "$@"\n')
    script.chmod(0o755)
    return path


def test_the_readme_and_the_quickstart_agree():
    """Issue 13 item 16: they named two install commands and two first queries."""
    from neuralmind.commands.projects import FIRST_QUERY
    readme = (ROOT / "README.md").read_text()
    install = blocks("quickstart.md")[0][1].strip()
    assert f"{install} && neuralmind up" in readme
    for text in (readme, (DOCS / "quickstart.md").read_text()):
        queries = set(re.findall(r'neuralmind project query "([^"]+)"', text))
        assert queries == {FIRST_QUERY}


def test_quickstart(tmp_path, bindir):
    d = Daemon(tmp_path / "qs")
    repo = git_repo(tmp_path / "demo", REPO)
    outputs = []
    try:
        for lang, code in blocks("quickstart.md"):
            outputs.append(run_block(lang, code, d, repo, bindir).stdout)
    finally:
        d.stop()
    text = "\n".join(outputs)
    assert "first build: every file was indexed" in text
    assert "Use SQLite WAL for the stores" in text
    assert '"status": "ok"' in text.replace('"status":"ok"', '"status": "ok"')
    assert str(repo) in text  # curl listed the project
    assert "daemon stopped" in outputs[-1]


def test_client_page(daemon, tmp_path, bindir):
    repo = git_repo(tmp_path / "demo", REPO)
    outputs = []
    for lang, code in blocks("client.md"):
        if 'open("memories.ndjson"' in code:  # the recipe reads an export, as the page says
            run_block("sh", "neuralmind memory export -o memories.ndjson", daemon, repo, bindir)
        outputs.append(run_block(lang, code, daemon, repo, bindir).stdout)
    text = "\n".join(outputs)
    assert "done" in text and "config.py:4 load_settings" in text
    assert "['created', 'amended', 'feedback', 'invalidated', 'restored']" in text
    assert "404 memory_not_found" in text
    assert "memory.created" in text
