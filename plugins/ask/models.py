"""The ask plugin's request, response and settings models."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from neuralmind import ConfigSection, Model, matching, text

SourceKind = Literal["memories", "code"]


class AskSettings(ConfigSection):
    """``[ask]`` in the config. Without ``base_url`` answers are extractive and nothing is sent
    anywhere; with it, the question and its sources go to that endpoint only."""

    base_url: str | None = Field(None, description="an OpenAI-compatible API root, e.g. "
                                 "http://127.0.0.1:11434/v1 (Ollama); `/chat/completions` is added")
    model: str | None = Field(None, description="the model name the endpoint knows")
    api_key_env: Annotated[str, matching(
        r"^[A-Za-z_][A-Za-z0-9_]*$", "the name of an environment variable: letters, digits "
        "and _, not beginning with a digit")] | None = Field(
            None, description="the environment variable holding the API key")
    connect_timeout_s: float = Field(5.0, gt=0, le=120)
    read_timeout_s: float = Field(60.0, gt=0, le=3600,
                                  description="the longest wait for the provider's next bytes")
    total_timeout_s: float = Field(180.0, gt=0, le=3600, description="for the whole answer")
    max_tokens: int = Field(512, ge=16, le=32_000, description="the answer's length cap")
    temperature: float = Field(0.2, ge=0, le=2)
    default_budget: int = Field(3000, ge=256, le=32_000,
                                description="tokens of sources when a request names none")
    event_text: bool | None = Field(None, description="the question and answer in `ask.answered` "
                                    "events; default: on in loopback mode, off in server mode")

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http(s) URL such as http://127.0.0.1:11434/v1")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("base_url takes no query, fragment or credentials "
                             "(the key comes from api_key_env)")
        return value.strip().rstrip("/")

    @model_validator(mode="after")
    def _model_named(self) -> AskSettings:
        if self.base_url and not self.model:
            raise ValueError("base_url needs a model (the name the endpoint serves)")
        return self


QUESTION_MAX = 4000  # characters of a question, past its surrounding spaces
Question = text(QUESTION_MAX)


class AskIn(Model):
    question: Question
    stream: bool = Field(False, description="answer as server-sent events: `sources`, then "
                         "`delta`s, then `done` (an `error` event if the provider fails midway)")
    sources: list[SourceKind] = Field(default_factory=lambda: ["memories", "code"], min_length=1,
                                      max_length=2, description="where answers come from")
    context_budget: int | None = Field(None, ge=256, le=32_000,
                                       description="tokens of sources; default [ask] default_budget")


class AskSource(Model):
    n: int = Field(description="the number the answer cites as [n]")
    kind: Literal["memory", "code"]
    cite: str = Field(description="`memory:<id>` or `path:line`")
    title: str = Field(description="a memory's title; a code hit's symbol")
    text: str = Field(description="what the provider was given of the source")
    score: float
    memory_id: str | None = None
    path: str | None = None
    line: int | None = None


class AskOut(Model):
    project_id: str
    question: str
    answer: str = Field(description="the answer, citing sources as [n]")
    cited: list[int] = Field(description="the source numbers the answer cites, in order")
    sources: list[AskSource]
    provider: str = Field(description="`extractive`, `openai` or a plugin's provider")
    model: str | None = None
    notices: list[str] = Field(default_factory=list,
                               description="sources left out and why (not indexed, not allowed)")
    ms: float = Field(description="time to answer, sources included")
