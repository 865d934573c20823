"""Request and response models of the index routes, and the ``[index]`` settings."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from neuralmind import ConfigSection, Model

Mode = Literal["keyword", "semantic", "hybrid"]
FileType = Literal["code", "docs", "config"]
RuleType = Literal["path", "folder_name", "file_name", "extension", "pattern", "max_file_size",
                   "hidden_files"]


class IndexSettings(ConfigSection):
    """``[index]`` in the config."""

    max_file_bytes: int = Field(1_000_000, gt=0, description="files above this are not indexed")
    embed_chars: int = Field(320, ge=64, le=4096,
                             description="characters of a node's code its vector is made of")
    embed_mode: Literal["code", "metadata"] = Field(
        "code", description="code: kind, name and the node's code; metadata: kind, name, "
                            "signature and docstring only (the older NeuralMind's choice)")
    embed_batch: int = Field(256, ge=1, le=4096, description="texts handed to the embedder at once")
    keyword_weight: float = Field(0.03, ge=0, le=1, description="hybrid: weight of the keyword leg")
    default_budget: int = Field(8000, ge=256, le=200_000)
    watch_debounce_s: float = Field(0.5, ge=0.05, le=30)


class BuildIn(Model):
    full: bool = Field(False, description="re-parse every file, not only changed ones "
                                          "(vectors are still reused by content hash)")
    wait: bool = Field(False, description="run inline and answer 200 with the finished job")


class CodeSearchIn(Model):
    query: str = Field(min_length=1, max_length=2000)
    n: int = Field(10, ge=1, le=50)
    mode: Mode = "hybrid"
    file_type: FileType | None = None


class CodeSearchHit(Model):
    id: str
    label: str
    kind: str
    file_type: str
    source_file: str
    line: int
    score: float


class CodeSearchOut(Model):
    project_id: str
    query: str
    mode: Mode
    results: list[CodeSearchHit]
    notice: str | None = Field(None, description="why a hybrid search fell back to keyword only")


class QueryIn(Model):
    question: str = Field(min_length=1, max_length=4000)
    query_type: Literal["auto", "code", "docs"] = "auto"
    context_budget: int | None = Field(None, ge=256, le=200_000,
                                       description="tokens; default [index] default_budget")
    trace: bool = False


class Tokens(Model):
    total: int
    l0: int
    l1: int
    l2: int
    l3: int


class QueryOut(Model):
    project_id: str
    question: str
    context: str
    tokens: Tokens
    layers_used: list[str]
    reduction_ratio: float
    search_hits: int
    trace: dict[str, Any] | None = None


class WakeupOut(Model):
    project_id: str
    context: str
    tokens: Tokens
    layers_used: list[str]
    reduction_ratio: float
    warning: str | None = Field(None, description="set when files changed after the build")


class StatsOut(Model):
    project_id: str
    built: bool
    built_at: str | None
    built_head: str | None
    files: int
    nodes: int
    edges: int
    vectors: int
    languages: dict[str, dict[str, int]]
    edge_kinds: dict[str, int]
    index_bytes: int
    model_id: str | None
    token_counter: str


class RuleIn(Model):
    type: RuleType
    value: str = Field(min_length=1, max_length=1024)
    enabled: bool = True
    reason: str = Field("", max_length=500)


class RulePatch(Model):
    value: str | None = Field(None, min_length=1, max_length=1024)
    enabled: bool | None = None
    reason: str | None = Field(None, max_length=500)


class RuleOut(Model):
    id: str
    type: str
    value: str
    enabled: bool
    reason: str
    protected: bool
    created_at: str | None = None
    updated_at: str | None = None


class RuleCreated(RuleOut):
    files_removed: int = Field(0, description="indexed files the new rule took out of the index")


class RulesOut(Model):
    items: list[RuleOut]


class RuleTestIn(Model):
    path: str = Field(min_length=1, max_length=4096,
                      description="project-relative, or absolute inside the project")


class RuleTestOut(Model):
    path: str
    ignored: bool
    matched_rule: dict[str, Any] | None


class DocumentQuery(Model):
    path: str = Field(min_length=1, max_length=4096)


class DocumentNode(Model):
    id: str
    kind: str
    label: str
    signature: str
    docstring: str
    line: int
    end_line: int


class DocumentOut(Model):
    project_id: str
    path: str
    language: str
    file_type: str
    size: int
    lines: int
    indexed_at: str
    stale: bool = Field(description="the file changed on disk after it was indexed")
    nodes: list[DocumentNode]
    text: str


class WatchStatus(Model):
    project_id: str
    running: bool
    root: str | None = None
    pid: int | None = None
    started_at: str | None = None
    queued: int = 0
    last_event: dict[str, Any] | None = None
    last_indexed_at: str | None = None
    recent_errors: list[dict[str, Any]] = Field(default_factory=list)
