"""Fixtures of the ask tests: a project with memories and an index, on servers in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.ask.openai_server import OpenAIServer
from tests.support import LocalServer

MEMORIES = [
    {"title": "Use SQLite WAL", "rationale": "Readers never block writers. We tried a rollback "
     "journal first and it deadlocked under load.", "files_affected": ["db.py"]},
    {"title": "Prices are integers of cents", "rationale": "Floats lost a cent on refunds. "
     "Every amount is stored and computed in cents.", "files_affected": ["tax.py"]},
]
CODE = {
    "tax.py": 'def sales_tax(cents):\n    """Sales tax is 20 percent of the amount, in cents."""\n'
              "    return cents // 5\n",
    "README.md": "# Shop\n\nA small shop.\n\n## Refunds\n\nRefunds take five working days and go "
                 "back to the card that paid.\n",
}


def shop(root: Path) -> Path:
    repo = root / "shop"
    repo.mkdir(parents=True, exist_ok=True)
    for name, text in CODE.items():
        (repo / name).write_text(text)
    return repo


def stock(server, repo: Path, build: bool = True) -> str:
    """Register ``repo``, record the memories, build the index; the project id."""
    pid = server.register(repo)
    for memory in MEMORIES:
        assert server.post(f"/v1/projects/{pid}/memories", memory).status == 201
    if build:
        assert server.post(f"/v1/projects/{pid}/build", {"wait": True}).status == 200
    return pid


@pytest.fixture(scope="module")
def llm():
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """Loopback mode, no [ask] section: the extractive default; ``local.pid`` is the shop."""
    root = tmp_path_factory.mktemp("ask-local")
    with LocalServer(root / "home", plugins=["auth", "memory", "index", "ask"]) as server:
        server.pid = stock(server, shop(root))
        yield server


@pytest.fixture
def provider(tmp_path):
    """``provider(llm, model, **ask_keys)``: a server whose [ask] names the fake endpoint."""
    started = []

    def make(llm: OpenAIServer, model: str, **keys) -> LocalServer:
        lines = ["[ask]", f'base_url = "{llm.base_url}"', f'model = "{model}"',
                 *(f"{k} = {v!r}".replace("'", '"') for k, v in keys.items())]
        server = LocalServer(tmp_path / f"home{len(started)}", plugins=["auth", "memory", "ask"],
                             config="\n".join(lines) + "\n").start()
        started.append(server)
        server.pid = stock(server, shop(tmp_path), build=False)
        return server

    yield make
    for server in started:
        server.stop()
