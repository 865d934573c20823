"""``POST /v1/projects/{project_id}/ask``: sources through the app's own routes, an answer
from the ``answer_provider`` hook, as JSON or as server-sent events."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

from neuralmind import APIError, operation
from plugins.ask.models import AskIn, AskOut, AskSource
from plugins.ask.providers import pieces
from plugins.ask.sources import gather

CITATIONS = re.compile(r"(?:\[\d+(?:\s*,\s*\d+)*\])+")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
ACCESSED = re.compile(r"(?:[)\]]|\w[\w.]*[._]\w+)$")  # f(), rows[0], sys.argv, my_list


def cited(answer: str, count: int) -> list[int]:
    """The source numbers ``answer`` cites (``[2]``, ``[1][3]``, ``[1, 3]``, ``WAL[1]``), first
    use first. Code is no citation: what a code span or block holds, and an index into a call,
    an index, a dotted or snake_case name (``sys.argv[2]``, ``rows()[1]``) — a model cites
    glued to a word as often as not, so a plain word before the marker is allowed."""
    found: dict[int, None] = {}
    text = CODE.sub(" ", answer)
    for run in CITATIONS.finditer(text):
        if ACCESSED.search(text, 0, run.start()):
            continue
        for n in map(int, re.findall(r"\d+", run.group())):
            if 1 <= n <= count:
                found[n] = None
    return list(found)


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class AskResource:
    def __init__(self, kernel, state):
        self.kernel, self.state = kernel, state

    @operation(permission="ask.read", body=AskIn, response=AskOut, tags=["ask"],
               media_type="text/event-stream",
               summary="Answer a question from the project's memories and code, citing them as "
                       "[n] (stream: true answers as server-sent events: sources, delta…, done)")
    def on_post(self, req, resp, project_id):
        started = time.perf_counter()
        body, project = req.context.body, req.context.project
        sources, notices = gather(self.kernel.caller(req), project.id, body.question,
                                  body.sources, body.context_budget or self.state.settings.default_budget)
        provider = self.kernel.pm.hook.answer_provider(kernel=self.kernel, project=project)
        answer = pieces(provider, body.question, sources, body.stream)
        first = next(answer, "")  # a provider that fails at once answers with the envelope

        def finish(text: str) -> AskOut:
            out = AskOut(project_id=project.id, question=body.question, answer=text,
                         cited=cited(text, len(sources)), sources=sources,
                         provider=provider.name, model=provider.model, notices=notices,
                         ms=round((time.perf_counter() - started) * 1000, 1))
            self._answered(req, out, body.stream)
            return out

        if not body.stream:
            return finish(first + "".join(answer))
        resp.content_type = "text/event-stream"
        resp.set_header("Cache-Control", "no-cache")
        resp.set_header("X-Accel-Buffering", "no")
        resp.stream = self._events(req, first, answer, finish, sources, notices)

    def _events(self, req, first: str, answer: Iterator[str], finish, sources, notices
                ) -> Iterator[bytes]:
        yield sse("sources", {"sources": [AskSource(**s).model_dump() for s in sources],
                              "notices": notices})
        parts = [first]
        if first:
            yield sse("delta", {"text": first})
        try:
            for piece in answer:
                parts.append(piece)
                yield sse("delta", {"text": piece})
        except APIError as ex:  # the status is sent: the failure goes in the stream
            yield sse("error", {"error": {"code": ex.code, "message": ex.message,
                                          "status": ex.status, "request_id": req.context.request_id,
                                          "details": ex.details}})
            return
        out = finish("".join(parts))
        yield sse("done", out.model_dump(include={"answer", "cited", "provider", "model", "ms"}))

    def _answered(self, req, out: AskOut, stream: bool) -> None:
        data = {"provider": out.provider, "model": out.model, "stream": stream,
                "sources": [s.cite for s in out.sources], "cited": out.cited, "ms": out.ms}
        if self.state.event_text:
            data.update(question=out.question, answer=out.answer)
        self.kernel.emit("ask.answered", project=req.context.project, actor=req.context.actor,
                         data=data, request_id=req.context.request_id)
