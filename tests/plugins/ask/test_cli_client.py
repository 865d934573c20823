"""`neuralmind ask` and the client's ``project.ask()``, against servers in this process, as a
user runs them: streamed by default, --json for scripts, clear words for wrong input."""

from __future__ import annotations

import json

import pytest

from neuralmind.client import NeuralMindAPIError, NeuralMindClient
from tests.plugins.ask.openai_server import ANSWER
from tests.support import run_cli


def env_of(server) -> dict[str, str]:
    return {"NEURALMIND_API_URL": server.url, "NEURALMIND_API_TOKEN": server.token}


def test_ask_streams_then_lists_the_sources_cited_ones_marked(local):
    code, out, err = run_cli("ask", "why do we use WAL mode?", "--project", local.pid,
                             env=env_of(local))
    assert code == 0, err
    answer, _, listing = out.partition("\n\n")
    assert "Readers never block writers" in answer and "[1]" in answer
    assert listing.splitlines()[0].startswith("*[1] memory:") and "Use SQLite WAL" in listing
    assert err.startswith("-- extractive, ") and err.rstrip().endswith("ms")


def test_ask_json_and_wrong_input(local):
    code, out, _ = run_cli("ask", "how long do refunds take?", "--project", local.pid,
                           "--sources", "code", "--json", env=env_of(local))
    assert code == 0 and json.loads(out)["cited"] and json.loads(out)["provider"] == "extractive"
    code, _, err = run_cli("ask", "q", "--project", local.pid, "--sources", "web", env=env_of(local))
    assert code == 2 and "web: choose from memories, code" in err
    code, _, err = run_cli("ask", "q", "--project", local.pid, "--budget", "10", env=env_of(local))
    assert code == 2 and "--budget: 10 is outside 256–32000" in err
    code, _, err = run_cli("ask", "q", "--project", "p_000000000000", env=env_of(local))
    assert code == 1 and "project_not_found" in err and "Traceback" not in err
    # said in the user's terms, before a request ("at least 1 character" for three spaces)
    for question, said in (("   ", "the question is blank"),
                           ("x" * 4001, "the question is 4,001 characters long: at most 4,000")):
        code, out, err = run_cli("ask", question, "--project", local.pid, env=env_of(local))
        assert (code, out) == (2, "") and err.rstrip().endswith(f"argument question: {said}")


def test_client_ask_whole_and_streamed(local):
    project = NeuralMindClient(local.url, token=local.token).project(local.pid)
    whole = project.ask("why do we use WAL mode?", sources=["memories"])
    assert whole.provider == "extractive" and whole.cited == [1]
    assert whole.sources[0]["title"] == "Use SQLite WAL" and whole.raw["answer"] == whole.answer
    streamed = list(project.ask("why do we use WAL mode?", sources=["memories"], stream=True))
    assert [e.kind for e in streamed][0] == "sources" and streamed[-1].kind == "done"
    assert "".join(e.data["text"] for e in streamed if e.kind == "delta") == whole.answer


def test_client_raises_the_providers_error_midway_and_at_once(provider, llm):
    server = provider(llm, "midway")
    project = NeuralMindClient(server.url, token=server.token).project(server.pid)
    events = project.ask("why WAL?", stream=True)
    assert next(events).kind == "sources" and next(events).data == {"text": ANSWER[0]}
    with pytest.raises(NeuralMindAPIError) as raised:
        next(events)
    assert (raised.value.status, raised.value.code) == (502, "provider_error")
    broken = provider(llm, "broken")
    with pytest.raises(NeuralMindAPIError, match="ran out of memory"):
        NeuralMindClient(broken.url, token=broken.token).project(broken.pid).ask("why?")
