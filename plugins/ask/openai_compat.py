"""The built-in provider for any OpenAI-compatible chat endpoint (Ollama, llama.cpp server,
vLLM, LM Studio, a hosted API): ``POST {base_url}/chat/completions``, streamed or not.

Only the operator's ``[ask] base_url`` is ever contacted, directly (no proxy from the
environment), with the standard library's HTTP client. Failures become 502
``provider_error`` or 504 ``provider_timeout``; the upstream's own error message is passed
on (cut short), never our exception text."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from plugins.ask.providers import ProviderError, ProviderTimeout

SYSTEM = ("You answer questions about a software project using only the numbered sources you "
          "are given: decision records (memories) and code. Cite every claim with its source's "
          "number in square brackets, like [1] or [2][3]. If the sources do not answer the "
          "question, say so in one sentence. Be brief.")
UPSTREAM_MESSAGE = 300  # characters of the provider's own error message passed on


def prompt(question: str, sources: list[dict[str, Any]]) -> list[dict[str, str]]:
    blocks = []
    for s in sources:
        head = f"[{s['n']}] {'memory' if s['kind'] == 'memory' else 'code'} {s['cite']}: {s['title']}"
        blocks.append(f"{head}\n{s['text']}".strip())
    listing = "\n\n".join(blocks) or "(no sources were found)"
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Sources:\n\n{listing}\n\nQuestion: {question}"}]


class OpenAICompatible:
    """An answer provider (``answer_provider``) backed by a chat-completions endpoint."""

    name = "openai"

    def __init__(self, settings):
        self.settings = settings
        self.model = settings.model
        self.url = urlsplit(settings.base_url)
        self.where = f"{self.url.scheme}://{self.url.netloc}"

    def answer(self, question: str, sources: list[dict[str, Any]], stream: bool = False
               ) -> Iterator[str]:
        s = self.settings
        body = {"model": s.model, "messages": prompt(question, sources), "stream": stream,
                "temperature": s.temperature, "max_tokens": s.max_tokens}
        deadline = time.monotonic() + s.total_timeout_s
        conn, resp = self._post(body)
        try:
            if resp.status >= 400:
                raise self._refused(resp)
            if "text/event-stream" in (resp.getheader("Content-Type") or ""):
                yield from self._deltas(resp, deadline)
            else:
                yield self._content(self._read(resp, deadline))
        except TimeoutError:
            raise self._timeout() from None
        except (OSError, http.client.HTTPException) as ex:
            raise ProviderError(f"the provider at {self.where} broke off: {type(ex).__name__}") from None
        finally:
            conn.close()

    def _post(self, body: dict[str, Any]):
        s = self.settings
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        key = os.environ.get(s.api_key_env) if s.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        host, port = self.url.hostname, self.url.port
        if self.url.scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=s.connect_timeout_s,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=s.connect_timeout_s)
        try:
            conn.connect()
            conn.sock.settimeout(s.read_timeout_s)
            conn.request("POST", self.url.path + "/chat/completions", json.dumps(body).encode(),
                         headers)
            return conn, conn.getresponse()
        except TimeoutError:
            conn.close()
            raise self._timeout() from None
        except (OSError, http.client.HTTPException) as ex:
            conn.close()
            reason = ex.strerror if isinstance(ex, OSError) and ex.strerror else type(ex).__name__
            raise ProviderError(f"cannot reach the provider at {self.where}: {reason}") from None

    def _timeout(self) -> ProviderTimeout:
        s = self.settings
        return ProviderTimeout(f"the provider at {self.where} did not answer in time (connect "
                               f"{s.connect_timeout_s:g} s, read {s.read_timeout_s:g} s, total "
                               f"{s.total_timeout_s:g} s: [ask] *_timeout_s)")

    def _refused(self, resp) -> ProviderError:
        raw = resp.read(64 * 1024)
        try:
            said = json.loads(raw)["error"]
            said = said.get("message", "") if isinstance(said, dict) else str(said)
        except (ValueError, KeyError, TypeError):
            said = raw.decode("utf-8", "replace")
        said = " ".join(said.split())[:UPSTREAM_MESSAGE]
        return ProviderError(f"the provider at {self.where} answered {resp.status}"
                             + (f": {said}" if said else ""),
                             details={"provider_status": resp.status})

    def _read(self, resp, deadline: float) -> bytes:
        chunks = []
        while chunk := resp.read1(65536):
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise self._timeout()
        return b"".join(chunks)

    def _content(self, raw: bytes) -> str:
        try:
            return json.loads(raw)["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise ProviderError(f"the provider at {self.where} did not answer with a chat "
                                "completion") from None

    def _deltas(self, resp, deadline: float) -> Iterator[str]:
        """The text of each chunk. A stream ends with ``data: [DONE]`` or a chunk's
        ``finish_reason``: one that stops before either (the connection closed, a chunked
        body cut off) broke off midway, and half an answer must not read as a whole one."""
        finished = False
        for raw in resp:
            if time.monotonic() > deadline:
                raise self._timeout()
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                chunk = json.loads(data)
            except ValueError:
                raise ProviderError(f"the provider at {self.where} sent a malformed "
                                    "stream") from None
            if chunk.get("error"):
                raise ProviderError(f"the provider at {self.where} failed midway: "
                                    f"{str(chunk['error'])[:UPSTREAM_MESSAGE]}")
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    yield text
                finished = finished or bool(choice.get("finish_reason"))
        if not finished:
            raise ProviderError(f"the provider at {self.where} broke off: its stream ended "
                                "before the answer did")
