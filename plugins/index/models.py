"""Request and response models of the index routes, and the ``[index]`` settings."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from neuralmind import ConfigSection, Model, no_nul, text

Mode = Literal["keyword", "semantic", "hybrid"]
FileType = Literal["code", "docs", "config"]
RuleType = Literal["path", "folder_name", "file_name", "extension", "pattern", "max_file_size",
                   "hidden_files"]


class LearnRates(ConfigSection):
    """``[index.learn_rates]``: how much one co-activation of each kind strengthens a link
    between two files (``unhelpful``: how much that signal weakens it); docs/index.md."""

    read: float = Field(0.05, ge=0, le=1)
    edit: float = Field(0.2, ge=0, le=1)
    test: float = Field(0.1, ge=0, le=1)
    query: float = Field(0.05, ge=0, le=1)
    search: float = Field(0.03, ge=0, le=1)
    helpful: float = Field(0.3, ge=0, le=1)
    unhelpful: float = Field(0.5, ge=0, le=1)


class IndexSettings(ConfigSection):
    """``[index]`` in the config."""

    max_file_bytes: int = Field(1_000_000, gt=0, description="files above this are not indexed")
    embed_chars: int = Field(320, ge=64, le=4096,
                             description="characters of a node's code its vector is made of")
    test_embed_chars: int = Field(
        128, ge=64, le=4096,
        description="the same for test code (tests/, test_*.py, *_test.go, *.spec.ts …): its name "
                    "says what it checks, and its body, mostly setup and asserts, half of a "
                    "tree's embedding time (docs/index.md)")
    embed_mode: Literal["docfirst", "code", "metadata"] = Field(
        "docfirst", description="docfirst: the name as words, the docstring, then the code "
                                "without it; code: kind, name and the node's code as written; "
                                "metadata: kind, name, signature and docstring only (the older "
                                "NeuralMind's choice)")
    embed_batch: int = Field(256, ge=1, le=4096, description="texts handed to the embedder at once")
    keyword_weight: float = Field(0.02, ge=0, le=1, description="hybrid: weight of the keyword leg")
    hub_weight: float = Field(0.3, ge=0, le=1, description="semantic and hybrid: cosine − "
                              "this × the node's hubness (0: the plain cosine)")
    default_budget: int = Field(8000, ge=256, le=200_000)
    watch_debounce_s: float = Field(0.5, ge=0.05, le=30)
    learning: bool = Field(True, description="query, search, activity and feedback train the "
                                             "links between files (docs/index.md)")
    learn_half_life_days: float = Field(365.0, gt=0, le=3650,
                                        description="a link unused this long weighs half")
    learn_rates: LearnRates = Field(default_factory=LearnRates)
    learn_flush_s: float = Field(1.0, ge=0.05, le=60,
                                 description="how often query and search learning is written")
    learn_session_s: float = Field(1800.0, ge=0, le=86_400, description=(
        "an activity is linked with what its session touched this recently"))
    learn_max_files: int = Field(20, ge=2, le=200, description=(
        "an activation of more files than this (a sweeping change) links nothing"))
    max_document_bytes: int = Field(1_048_576, gt=0, description=(
        "largest document POST …/documents takes (the kernel's max_body_bytes applies first)"))
    max_document_sections: int = Field(2000, gt=0, description=(
        "most sections (headings, and parts of 1,500 characters) a document POST …/documents "
        "may become; its text may be at most 4 × max_document_bytes characters"))


class BuildIn(Model):
    full: bool = Field(False, description="re-parse every file, not only changed ones "
                                          "(vectors are still reused by content hash)")
    wait: bool = Field(False, description="run inline and answer 200 with the finished job")


class CodeSearchIn(Model):
    query: text(2000)
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
    source: Literal["repo", "ingested"] = Field("repo", description="ingested: a document sent "
                                                 "to POST …/documents")


class CodeSearchOut(Model):
    project_id: str
    query: str
    mode: Mode
    results: list[CodeSearchHit]
    notice: str | None = Field(None, description="why a hybrid search fell back to keyword only")


class QueryIn(Model):
    question: text(4000)
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


NAME_MAX = 255  # bytes in a file or folder name, the most a file system allows


def _file_names(value: str) -> str:
    """A path whose every name a file could have: what rules are matched against (a longer
    name made a pattern's * backtrack for seconds)."""
    if any(len(part.encode()) > NAME_MAX for part in value.split("/")):
        raise ValueError(f"a file or folder name is at most {NAME_MAX} bytes")
    return value


class RuleTestIn(Model):
    path: Annotated[str, AfterValidator(_file_names)] = Field(
        min_length=1, max_length=4096, description="project-relative, or absolute inside the "
                                                   "project")


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
    source: Literal["repo", "ingested"] = "repo"
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


# -- the structural graph ---------------------------------------------------------------------

ProjectPath = Annotated[str, Field(min_length=1, max_length=4096,
                                   description="project-relative, or absolute inside the project"),
                        AfterValidator(no_nul)]
NodeId = Annotated[str, Field(min_length=1, max_length=64)]


class NodeRef(Model):
    id: str
    label: str = Field(description="qualified name (Cart.total)")
    kind: str
    path: str
    line: int


class GraphStep(Model):
    src: NodeRef
    kind: Literal["calls", "imports", "inherits"]
    how: Literal["exact", "name"] = Field(description="exact: resolved through imports, scope "
                                          "and classes; name: the only definition of that name")
    dst: NodeRef


class ImpactIn(Model):
    files: list[ProjectPath] = Field(default_factory=list, max_length=100,
                                     description="changed files")
    nodes: list[NodeId] = Field(default_factory=list, max_length=100,
                                description="changed nodes (ids from search or documents)")
    depth: int = Field(2, ge=1, le=6, description="edges to follow from a changed node")
    limit: int = Field(100, ge=1, le=1000)
    guessed: bool = Field(True, description="follow edges resolved by a unique name as well")

    @model_validator(mode="after")
    def _something_changed(self):
        if not self.files and not self.nodes:
            raise ValueError("name the changed files or nodes")
        return self


class Impacted(Model):
    node: NodeRef
    distance: int
    path: list[GraphStep] = Field(description="edges from this node to a changed one")


class FileRecord(Model):
    kind: str = Field(description='"decision" for the memory plugin\'s records')
    id: str | None = None
    title: str | None = None
    status: str | None = None


class ImpactedFile(Model):
    path: str
    distance: int = Field(description="0 for the changed files themselves")
    nodes: int = Field(description="impacted nodes in this file")
    decisions: list[FileRecord]


class ImpactOut(Model):
    project_id: str
    depth: int
    changed: list[NodeRef]
    impacted: list[Impacted]
    files: list[ImpactedFile]
    truncated: bool


class StructuralQuery(Model):
    node: NodeId | None = None
    file: ProjectPath | None = None
    depth: int = Field(1, ge=1, le=4)
    limit: int = Field(50, ge=1, le=500, description="per relation")
    guessed: bool = True


class Neighbor(Model):
    node: NodeRef
    distance: int
    how: Literal["exact", "name"]


class UnresolvedRef(Model):
    kind: str
    ref: str = Field(description="the reference as written (another package, a builtin …)")
    source: NodeRef


class StructuralOut(Model):
    project_id: str
    node: NodeRef | None = None
    file: str | None = None
    depth: int
    callers: list[Neighbor]
    callees: list[Neighbor]
    importers: list[Neighbor]
    imports: list[Neighbor]
    subclasses: list[Neighbor]
    bases: list[Neighbor]
    unresolved: list[UnresolvedRef]


# -- learned links ----------------------------------------------------------------------------

class SynapticQuery(Model):
    file: ProjectPath
    limit: int = Field(20, ge=1, le=200)


class SynapticNeighbor(Model):
    file: str
    weight: float = Field(description="0–1, decayed to now")
    count: int = Field(description="co-activations so far")
    updated_at: str
    indexed: bool


class SynapticOut(Model):
    project_id: str
    file: str
    indexed: bool = Field(True, description="whether the index holds the file (a deleted one "
                                            "keeps its learned links a while)")
    neighbors: list[SynapticNeighbor]


class ActivityIn(Model):
    files: list[ProjectPath] = Field(min_length=1, max_length=50)
    kind: Literal["read", "edit", "test"]
    session: Annotated[str, AfterValidator(no_nul)] | None = Field(
        None, min_length=1, max_length=128,
        description="groups activity across calls (default: the caller's actor)")


class ActivityOut(Model):
    project_id: str
    kind: str
    files: int
    pairs: int = Field(description="file pairs strengthened")
    session: str
    learning: bool
    not_indexed: list[str] = Field(description="files the index does not hold (new since the "
                                   "build, ignored, deleted, misspelt): not recorded, not linked")


class LinkFeedbackIn(Model):
    node: NodeId | None = None
    file: ProjectPath | None = None
    signal: Literal["helpful", "unhelpful"]
    related: list[ProjectPath] | None = Field(None, max_length=50, description=(
        "the files the signal is about together with this one (default: those it was last "
        "activated with, within an hour)"))


class LinkFeedbackOut(Model):
    project_id: str
    file: str
    signal: str
    pairs: int = Field(description="file pairs strengthened or weakened")
    related: list[str]
    learning: bool
    not_indexed: list[str] = Field(description="files the index does not hold: linked with "
                                   "nothing")


class NextIn(Model):
    files_open: list[ProjectPath] = Field(min_length=1, max_length=50)
    task: text(2000) | None = Field(
        None, description="what the agent is doing (searched for)")
    limit: int = Field(10, ge=1, le=50)


class NextReason(Model):
    kind: Literal["structural", "learned", "decision", "task"]
    detail: str
    weight: float | None = None
    id: str | None = Field(None, description="the decision's id")


class NextFile(Model):
    path: str
    score: float
    why: list[NextReason]


class NextOut(Model):
    project_id: str
    files_open: list[str]
    files: list[NextFile]
    not_indexed: list[str] = Field(default_factory=list, description=(
        "files_open the index does not hold (a typo, a new file not built yet): they add "
        "nothing"))


class SynapsePair(Model):
    a: str
    b: str
    weight: float
    count: int
    updated_at: str


class SynapseStatsOut(Model):
    project_id: str
    learning: bool
    half_life_days: float
    rates: dict[str, float]
    synapses: int
    files: int
    mean_weight: float
    strongest: list[SynapsePair]
    activations_7d: dict[str, int]
    counters: dict[str, int]


class SavingsQuery(Model):
    days: int = Field(30, ge=1, le=366)


class SavingsFigures(Model):
    calls: int
    tokens_served: int = Field(description="tokens query and search answered with")
    tokens_whole: int = Field(description="tokens of the whole files those answers came from")
    tokens_saved: int
    ratio: float | None = Field(description="whole ÷ served")


class SavingsDay(SavingsFigures):
    day: str
    kind: Literal["query", "search"]


class SavingsOut(Model):
    project_id: str
    days: int
    total: SavingsFigures
    by_kind: dict[str, SavingsFigures]
    per_day: list[SavingsDay]


# -- documents and validation -----------------------------------------------------------------

class DocumentIn(Model):
    name: str = Field(min_length=1, max_length=255, description="a file name: notes.md")
    content: str = Field(min_length=1, description="the text (PDFs: send the file as the body)")
    content_type: Literal["text/markdown", "text/plain", "text/html"] | None = Field(
        None, description="default: from the name's extension, else text/plain")


class IngestQuery(Model):
    name: str | None = Field(None, min_length=1, max_length=255,
                             description="the file name, when the body is the file itself")


class _Ingested(Model):
    project_id: str
    id: str
    name: str
    path: str = Field(description="where its nodes are: ingested:<id>/<name>")
    source: Literal["ingested"]
    content_type: str
    size: int
    created_at: str
    actor: str | None


class IngestedOut(_Ingested):
    nodes: int = Field(description="the sections it became")


class IngestedList(Model):
    items: list[IngestedOut] = Field(description="oldest first")


class IngestedDocument(_Ingested):
    nodes: list[DocumentNode]
    text: str = Field(description="the text that was indexed")


class ValidateIn(Model):
    write: bool = Field(False, description="repair what is missing or stale (admin)")


class ValidateCheck(Model):
    name: str
    ok: bool
    detail: str
    count: int | None = None
    repaired: bool = False


class ValidateOut(Model):
    project_id: str
    write: bool
    ok: bool
    checks: list[ValidateCheck]
