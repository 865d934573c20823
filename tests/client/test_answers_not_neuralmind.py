"""What the client makes of answers it did not get as NeuralMind sends them (sweep B, a mem0
user's migration): a success from something else at the address is a ``BrokenAnswer``, never a
``Memory(id=None)``, a bare ``KeyError`` or a deletion reported done; an export cut short or
reset says how far it came; a failed read of the contract does not turn keyword checks off for
the client's life; a DELETE whose answer was lost and whose retry finds the thing gone landed;
a 401 says where the token sent came from; ``get_all``'s errors name ``get_all``; no path ends
in a bare ``?``.

The real thing is the bundled plugins served from this process (``served``); what stands
between — a proxy that rate-limits the contract or drops an answer, another web server at the
address — is a real local HTTP server (``tests.support.http_server``)."""

from __future__ import annotations

import json
import socket
import struct
import threading

import pytest

from neuralmind.client import (BrokenAnswer, Conflict, Memories, NeuralMindClient, NotFound,
                               TimedOut, Unauthorized)
from tests.client.conftest import client_of, git_repo, needs
from tests.support import QuietHandler, http_server

HTML = ("text/html", b"<html><body>Welcome to nginx</body></html>")
RECORD = ("application/json", json.dumps({"id": "m1", "title": "t", "rationale": "r"}).encode())


def envelope(status: int, code: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": f"proxy says {code}", "status": status,
                                 "request_id": "px", "details": {}}}).encode()


@pytest.fixture(scope="module")
def repo(served, tmp_path_factory):
    nm = client_of(served)
    needs(nm, "/v1/projects/{project_id}/memories")
    root = git_repo(tmp_path_factory.mktemp("answers") / "repo", {"a.py": "x = 1\n"})
    return nm.project(root)


# -- a proxy in front of the real server ---------------------------------------------------

class Proxy(QuietHandler):
    """Forwards every request to ``upstream``, except: the first ``GET /v1/openapi.json``s
    are answered with ``contract`` (a list of (status, code), taken one a request), and the
    first request whose method is ``drop`` is forwarded, then its answer dropped (the
    connection closed without a word) — what a flaky network does to an answer — and the first
    whose method is ``reset`` is reset before it is forwarded: it ran nothing."""

    upstream = ""
    contract: list[tuple[int, str]] = []
    drop: str | None = None
    reset: str | None = None
    seen: list[str] = []

    def _answer(self):
        self.seen.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.command == Proxy.reset:
            Proxy.reset = None
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))  # closing now resets
            self.close_connection = True
            return
        if self.path.startswith("/v1/openapi.json") and self.contract:
            status, code = self.contract.pop(0)
            self.reply(status, "application/json", envelope(status, code))
            return
        status, kind, data = self.forwarded(self.upstream, body)
        if self.command == Proxy.drop:
            Proxy.drop = None  # landed upstream; the client hears nothing of it
            self.close_connection = True
            return
        self.reply(status, kind, data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer


@pytest.fixture(scope="module")
def proxy_url(served):
    Proxy.upstream = served.url
    with http_server(Proxy) as url:
        yield url


@pytest.fixture
def proxy(proxy_url, served, monkeypatch):
    """A client of the real server through the proxy, and the proxy's settings, reset."""
    monkeypatch.setattr("neuralmind.client.BACKOFF_S", 0.01)
    Proxy.contract, Proxy.drop, Proxy.reset, Proxy.seen = [], None, None, []
    return NeuralMindClient(proxy_url, token=served.token)


@pytest.mark.parametrize("status, code", [(429, "rate_limited"), (503, "unavailable"),
                                          (401, "unauthorized")])
def test_a_failed_read_of_the_contract_is_tried_again_at_the_next_call(proxy, repo, status,
                                                                        code):
    """One 429 on /v1/openapi.json was cached as "this server publishes no contract": every
    misspelled filter matched every record, every misspelled change changed nothing, for the
    client's life."""
    mine = repo.memories.add("Checked keywords", "r", tags=["qa-contract"])
    untagged = repo.memories.add("Not tagged", "r")
    memories = Memories(proxy, repo.id)
    # refused once (a 503 is retried as every read is: refused four times)
    Proxy.contract = [(status, code)] * (4 if status == 503 else 1)
    unchecked = [m.id for m in memories.list(tags="qa-contract")]  # the call goes on
    assert {mine.id, untagged.id} <= set(unchecked)  # the server ignored `tags`
    with pytest.raises(TypeError, match=r"^list\(\) got 'tags', which GET "
                                        r"/v1/projects/\{project_id\}/memories does not take"):
        memories.list(tags="qa-contract")
    with pytest.raises(TypeError, match=r"^update\(\) got 'title'"):
        memories.update(mine.id, title="renamed")
    assert repo.memories.get(mine.id).title == "Checked keywords"
    assert Proxy.seen.count("GET /v1/openapi.json") == (4 if status == 503 else 1) + 1


def test_a_server_that_publishes_no_contract_is_asked_once(proxy, repo):
    """404: the route does not exist there; asking again would bring the same."""
    Proxy.contract = [(404, "not_found")] * 4
    memories = Memories(proxy, repo.id)
    for _ in range(3):
        assert isinstance(list(memories.list(tags="qa-none")), list)  # unchecked
    assert Proxy.seen.count("GET /v1/openapi.json") == 1


# -- a DELETE whose answer was lost --------------------------------------------------------

def deletions(repo):
    """(what to delete through a client, and how to see it is gone), one pair per verb."""
    memories = repo.memories
    gone = memories.add("Deleted through a flaky network", "r")
    source, target = memories.add("Link source", "r"), memories.add("Link target", "r")
    memories.link(source.id, target.id, "relates_to")
    memories.save_collection("flaky", tag=["x"])
    return {
        "delete": (lambda nm: Memories(nm, repo.id).delete(gone.id),
                   lambda: [e["kind"] for e in memories.history(gone.id)] == ["created",
                                                                               "deleted"]),
        "unlink": (lambda nm: Memories(nm, repo.id).unlink(source.id, target.id),
                   lambda: memories.links(source.id) == []),
        "delete_collection": (lambda nm: Memories(nm, repo.id).delete_collection("flaky"),
                              lambda: "flaky" not in [c["name"] for c in memories.collections()]),
    }


@pytest.mark.parametrize("verb", ["delete", "unlink", "delete_collection"])
def test_a_delete_whose_answer_was_lost_landed(proxy, repo, verb):
    """The retry's 404 was raised as NotFound for a deletion that had landed."""
    call, done = deletions(repo)[verb]
    Proxy.drop = "DELETE"
    assert call(proxy) is None
    assert done()
    assert sum(seen.startswith("DELETE ") for seen in Proxy.seen) == 2  # sent again once
    with pytest.raises(NotFound):  # a 404 to the first attempt is still one
        call(proxy)


@pytest.mark.parametrize("failure", ["drop", "reset"])
def test_a_retried_delete_s_404_for_something_else_is_not_found(proxy, repo, failure):
    """Any 404 to a retry counted as the first attempt landed: a wrong project, a route the
    server does not have — and a reset before forwarding ran nothing at all."""
    setattr(Proxy, failure, "DELETE")
    with pytest.raises(NotFound) as missing:
        Memories(proxy, "p_nope").delete("x")
    assert missing.value.code == "project_not_found"
    setattr(Proxy, failure, "DELETE")
    with pytest.raises(NotFound) as missing:  # the memory route has no such tail
        proxy._delete(f"/v1/projects/{repo.id}/memories/x/nothing", "memory_not_found")
    assert missing.value.code == "not_found"
    assert sum(seen.startswith("DELETE ") for seen in Proxy.seen) == 4  # each sent again once


def test_a_delete_reset_before_it_ran_is_sent_again_and_lands_once(proxy, repo):
    gone = repo.memories.add("Deleted after a reset", "r")
    Proxy.reset = "DELETE"
    assert Memories(proxy, repo.id).delete(gone.id) is None
    assert [e["kind"] for e in repo.memories.history(gone.id)] == ["created", "deleted"]
    assert Proxy.seen.count(f"DELETE /v1/projects/{repo.id}/memories/{gone.id}") == 2


def test_a_project_removed_through_a_lost_answer_is_removed(proxy, served, tmp_path):
    nm = client_of(served)
    project = nm.project(git_repo(tmp_path / "gone", {"a.py": "x = 1\n"}))
    Proxy.drop = "DELETE"
    assert proxy.projects.remove(project.id) is None
    with pytest.raises(NotFound) as missing:
        nm.projects.get(project.id)
    assert missing.value.code == "project_not_found"


def test_a_cancel_whose_answer_was_lost_answers_the_job(proxy, repo):
    """The retry's 409 job_finished: the job has ended — as the first attempt left it."""
    job = repo.memories.decay(dry_run=True)  # followed to its end
    with pytest.raises(Conflict) as ended:  # asked once, and answered: the job had ended
        proxy.jobs.cancel(job.id)
    assert ended.value.code == "job_finished"
    Proxy.drop = "DELETE"
    answered = proxy.jobs.cancel(job.id)
    assert (answered.id, answered.status) == (job.id, "done")
    assert Proxy.seen[-3:] == [f"DELETE /v1/jobs/{job.id}"] * 2 + [f"GET /v1/jobs/{job.id}"]


# -- another web server at the address -----------------------------------------------------

class Other(QuietHandler):
    """Every request answered ``status`` with ``content_type`` and ``body``; the paths seen."""

    status, content_type, body = 200, *HTML
    seen: list[str] = []

    def _answer(self):
        self.seen.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.reply(self.status, self.content_type, self.body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer


@pytest.fixture(scope="module")
def other_url():
    with http_server(Other) as url:
        yield url


@pytest.fixture
def other(other_url, monkeypatch):
    """Set what the other server answers: ``other(status, content_type, body)``; a client."""
    Other.seen = []

    def answering(status: int, content_type: str | None, body: bytes) -> NeuralMindClient:
        monkeypatch.setattr(Other, "status", status)
        monkeypatch.setattr(Other, "content_type", content_type)
        monkeypatch.setattr(Other, "body", body)
        return NeuralMindClient(other_url, token="x")
    return answering


CALLS = {
    "add": lambda nm: Memories(nm, "p_abc").add("t", "r"),
    "update": lambda nm: Memories(nm, "p_abc").update("abc", rationale="x"),
    "list": lambda nm: list(Memories(nm, "p_abc").list()),
    "search": lambda nm: Memories(nm, "p_abc").search("q"),
    "project": lambda nm: nm.project("p_abc"),
    "jobs.get": lambda nm: nm.jobs.get("j1"),
    "tags": lambda nm: Memories(nm, "p_abc").tags(),
}
DELETES = {
    "delete": lambda nm: Memories(nm, "p_abc").delete("abc"),
    "unlink": lambda nm: Memories(nm, "p_abc").unlink("abc", "def"),
    "projects.remove": lambda nm: nm.projects.remove("p_abc"),
}


@pytest.mark.parametrize("answer, said", [
    (("application/json", b'{"hello": "world"}'), None),  # the key each call reads, below
    (("application/json", b"[]"), "a body that is JSON but no object (application/json)"),
    (HTML, "a body that is not JSON (text/html)"),
    (("text/plain", b'{"id": "m1"}'), "a body that is not JSON (text/plain)"),
    ((None, b""), "an empty body (no Content-Type)"),
])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_success_that_is_not_neuralminds_is_a_broken_answer(other, call, answer, said):
    """It was Memory(id=None, title=None, …), a bare KeyError: 'items', TypeError: list
    indices…, AttributeError: 'list' object has no attribute 'get', or "an id is non-empty
    text, not None"."""
    nm = other(200, *answer)
    key = {"list": "items", "tags": "items", "search": "results"}.get(call, "id")
    said = said or f"a body that is JSON without its '{key}' (application/json)"
    with pytest.raises(BrokenAnswer) as broken:
        CALLS[call](nm)
    assert str(broken.value) == (f"the server at {nm.url} answered 200 with {said}: is it "
                                 "NeuralMind?")


@pytest.mark.parametrize("status, answer, said", [
    (200, HTML, "a body (text/html)"),
    (200, ("application/json", b'{"hello": "world"}'), "a body (application/json)"),
    (200, (None, b""), "an empty body (no Content-Type)"),
    (202, RECORD, "a body (application/json)"),
])
@pytest.mark.parametrize("call", sorted(DELETES))
def test_a_delete_answered_with_anything_but_204_is_a_broken_answer(other, call, status, answer,
                                                                     said):
    """A web page's 200 was reported as the record deleted."""
    nm = other(status, *answer)
    with pytest.raises(BrokenAnswer) as broken:
        DELETES[call](nm)
    assert str(broken.value) == (f"the server at {nm.url} answered {status} with {said} "
                                 "instead of 204 No Content: is it NeuralMind?")
    assert len(Other.seen) == 1  # a definite answer: not asked again


def test_a_record_answer_is_read_and_no_path_ends_in_a_bare_question_mark(other):
    """``add`` sent ``?duplicates=`` with nothing after it: ``POST …/memories?``."""
    nm = other(201, *RECORD)
    memories = Memories(nm, "p_abc")
    assert memories.add("t", "r").id == "m1"
    assert memories.add("t", "r", duplicates="skip").id == "m1"
    assert Other.seen == ["/v1/projects/p_abc/memories",
                          "/v1/projects/p_abc/memories?duplicates=skip"]


def test_neuralminds_own_answers_pass_the_checks(repo):
    """Every kind of answer the checks read — records, pages, lists, searches, jobs, 204s —
    from the real server."""
    memories = repo.memories
    a = memories.add("Answers pass", "r", tags=["pass"])
    b = memories.add("Answers pass too", "r")
    assert memories.get(a.id).id == a.id
    assert memories.update(a.id, rationale="changed").rationale == "changed"
    assert sorted(memories.tag(a.id, "more").tags) == ["more", "pass"]
    assert memories.untag(a.id, "more").tags == ["pass"]
    assert [m.id for m in memories.list(tag="pass")] == [a.id]
    assert [m.id for m in memories.get_all(tag="pass")] == [a.id]
    assert a.id in [m.id for m in memories.search("answers pass", mode="keyword")]
    memories.link(a.id, b.id)
    assert [link["target"] for link in memories.links(a.id)] == [b.id]
    assert memories.unlink(a.id, b.id) is None and memories.links(a.id) == []
    memories.save_collection("passing", tag=["pass"])
    assert memories.delete_collection("passing") is None
    assert [t["count"] for t in memories.tags() if t["tag"] == "pass"] == [1]
    assert memories.delete(b.id) is None
    with pytest.raises(NotFound):
        memories.get(b.id)
    assert memories.decay(dry_run=True).status == "done"


# -- export: the wrong stream, one cut short, one reset ------------------------------------

LINE = json.dumps({"memory": {"id": "a"}, "history": [], "links": [], "contradictions": []}
                  ).encode() + b"\n"


class Export(QuietHandler):
    """An export stream that ``breaks``: "cut" (a Content-Length longer than what is sent:
    one line and part of the next), "reset" (one line of a chunked stream, then, once
    ``release`` is set, the connection reset)."""

    breaks = "cut"
    release = threading.Event()

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        if self.breaks == "cut":
            self.send_header("Content-Length", "200")
            self.end_headers()
            self.wfile.write(LINE + LINE[:20])
            self.close_connection = True
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(LINE), LINE))
        self.release.wait(10)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()  # the socket's last reference: closing it now resets the connection
        self.connection.close()


@pytest.fixture
def export(monkeypatch):
    """``export(breaks)``: a client's export from a server whose stream breaks so."""
    Export.release = threading.Event()
    with http_server(Export) as url:
        def started(breaks: str):
            monkeypatch.setattr(Export, "breaks", breaks)
            return Memories(NeuralMindClient(url, token="x"), "p_abc").export()
        yield started
        Export.release.set()  # a handler still waiting ends


@pytest.mark.parametrize("breaks", ["cut", "reset"])
def test_an_export_cut_short_or_reset_says_how_far_it_came(export, breaks):
    """A line cut off was json's JSONDecodeError; a reset, ConnectionResetError."""
    lines = export(breaks)
    assert next(lines) == json.loads(LINE)
    Export.release.set()
    with pytest.raises(BrokenAnswer, match=r"^GET /v1/projects/p_abc/memories/export: the "
                                           r"export from http://127\.0\.0\.1:\d+ broke off "
                                           r"after 1 records, without its end") as broken:
        next(lines)
    assert isinstance(broken.value.__cause__, ValueError if breaks == "cut" else OSError)


@pytest.mark.parametrize("answer", [HTML, ("application/json", b'{"hello": "world"}')])
def test_an_export_that_is_not_jsonl_is_not_neuralminds(other, answer):
    """A web page was json's JSONDecodeError; a JSON object, one record of {'hello': …}."""
    nm = other(200, *answer)
    with pytest.raises(BrokenAnswer) as broken:
        list(Memories(nm, "p_abc").export())
    assert str(broken.value) == (f"the server at {nm.url} answered 200 with a body that is not "
                                 f"JSONL ({answer[0]}): is it NeuralMind?")


def test_the_real_export_still_streams(repo):
    repo.memories.add("Exported whole", "r")
    lines = list(repo.memories.export())
    assert "Exported whole" in [line["memory"]["title"] for line in lines]


# -- a 401 says where the token came from; get_all says get_all ----------------------------

def test_a_401_names_where_the_token_came_from_never_the_token(served, tmp_path, monkeypatch):
    """A stale NEURALMIND_API_TOKEN hid the home's own token behind "invalid token"."""
    monkeypatch.delenv("NEURALMIND_API_URL", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "token").write_text("nm_from_the_file\n")
    cases = [
        ({"token": "nm_given"}, None, "the token sent was the one given (token=)"),
        ({}, "nm_from_env", "the token sent was NEURALMIND_API_TOKEN's, which comes before "
                            "the home's own: correct or unset it"),
        ({}, None, f"the token sent was the home's, from {home / 'token'}"),
    ]
    for kw, env, said in cases:
        if env:
            monkeypatch.setenv("NEURALMIND_API_TOKEN", env)
        else:
            monkeypatch.delenv("NEURALMIND_API_TOKEN", raising=False)
        with pytest.raises(Unauthorized) as refused:
            NeuralMindClient(served.url, home=home, **kw).projects.page()
        assert refused.value.token_from == said
        assert str(refused.value).startswith(f"{refused.value.message}; {said} (401 ")
        assert "nm_given" not in str(refused.value) and "nm_from" not in str(refused.value)


def test_get_all_names_get_all(repo):
    """mem0's get_all(limit=100) said "list() reads every page itself"."""
    with pytest.raises(TypeError, match=r"^get_all\(\) reads every page itself: give limit to "
                                        r"page\(\) instead$"):
        repo.memories.get_all(limit=100)
    with pytest.raises(TypeError, match=r"^get_all\(\) got 'user_id', which GET "):
        repo.memories.get_all(user_id="alice")
    with pytest.raises(TypeError, match=r"^list\(\) reads every page itself"):
        repo.memories.list(cursor="c")


def test_a_server_that_never_answers_the_contract_fails_the_call_once():
    """A timeout reading the contract went on to the call's own request: each checked call
    waited twice its timeout, on two connections."""
    import time
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.extend(listener.accept() for _ in range(2)),
                     daemon=True).start()
    nm = NeuralMindClient(f"http://127.0.0.1:{listener.getsockname()[1]}", token="x", timeout=1)
    started = time.monotonic()
    with pytest.raises(TimedOut, match=r"^GET /v1/openapi\.json: no answer from .* within 1 s"):
        list(Memories(nm, "p_abc").list(tag="a"))
    assert time.monotonic() - started < 1.8 and len(accepted) == 1
    listener.close()
