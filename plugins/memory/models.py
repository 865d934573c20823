"""The memory plugin's request, response and settings models (pydantic).

Enumerations are strict but case-insensitive on input, so ``"bugfix"`` and ``"BUGFIX"`` are the
same type while ``"BUG"`` is a 422. Lengths are bounded so one record cannot grow without limit.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BeforeValidator, ConfigDict, Field, StringConstraints,
                      model_validator)

from neuralmind import ConfigSection, ISODate, Model, PageQuery, matching, no_nul, text
from neuralmind.client import MEMORY_ROUTES as RESERVED_IDS  # noqa: F401 (records.py)
from plugins.memory import times
from plugins.memory.text import nfc

DECISION_TYPES = ("ARCHITECTURE", "DEPENDENCY", "TEST", "REFACTOR", "BUGFIX", "CONFIG")
STATUSES = ("ACTIVE", "STALE", "INVALIDATED", "ARCHIVED", "SUPERSEDED", "MERGED")
KINDS = ("decision", "fact", "preference", "procedure", "episode")
MAX_ITEMS = 200  # a record's evidence, rejected alternatives, dependency constraints: each
LINK_TYPES = ("supersedes", "depends_on", "relates_to", "contradicts", "merged_into")
STRATEGIES = ("keep_newest", "keep_oldest", "keep_important", "keep_both", "manual")
CONFLICTS = ("replaces", "forbids", "setting_value", "polarity")  # the detector's kinds
HISTORY_KINDS = ("created", "amended", "invalidated", "restored", "stale", "feedback", "linked",
               "unlinked", "superseded", "merged", "archived", "contradiction",
               "contradiction_resolved", "imported", "deleted")  # docs/memory.md, History
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


DecisionType = Annotated[Literal[DECISION_TYPES], BeforeValidator(_upper)]
Status = Annotated[Literal[STATUSES], BeforeValidator(_upper)]
StatusFilter = Annotated[Literal[(*STATUSES, "ALL")], BeforeValidator(_upper)]
Kind = Annotated[Literal[KINDS], BeforeValidator(_lower)]
LinkType = Annotated[Literal[LINK_TYPES], BeforeValidator(_lower)]
Strategy = Annotated[Literal[STRATEGIES], BeforeValidator(_lower)]
Mode = Annotated[Literal["keyword", "semantic", "hybrid"], BeforeValidator(_lower)]

Title, Rationale, Item = text(300), text(20_000), text(2_000)
# names compared as written (tags, files, authors: filters match them exactly) are taken in
# NFC before their length is counted: an NFD "ä" is two code points
Tag, Path = Annotated[text(64), BeforeValidator(nfc)], Annotated[text(1_024), BeforeValidator(nfc)]
Short = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200),
                  AfterValidator(no_nul), BeforeValidator(nfc)]
MemoryId = Annotated[str, matching(ID_PATTERN, "an id is 1 to 64 letters, digits and . _ : - "
                                             "(beginning with a letter or digit)")]
# hex only: maintenance hands it to `git diff`, where a leading "-" would be an option
CommitSha = Annotated[str, matching(r"^[0-9a-fA-F]*$", "a commit is its hexadecimal sha (0-9, a-f)",
                                    strip_whitespace=True, max_length=64)]
Name = Annotated[str, matching(NAME_PATTERN, "a name is 1 to 64 letters, digits and . _ - "
                                          "(beginning with a letter or digit)")]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
Importance = Annotated[float, Field(ge=0.0, le=1.0)]


class MemorySettings(ConfigSection):
    """The ``[memory]`` config section. Fusion constants were chosen by ``neuralmind eval memory``
    on ``../shared/eval`` (docs/performance-memory.md)."""

    removed = {"feedback_step": "feedback_up and feedback_down set the steps of 'helpful' and "
                                "'unhelpful' now (0.05 and 0.10 by default)"}

    fusion: Literal["blend", "rrf"] = "blend"
    keyword_weight: float = Field(0.5, ge=0.0, le=1.0, description="blend: weight of the keyword leg")
    rrf_k: int = Field(10, ge=1, le=1_000)
    pool_factor: int = Field(4, ge=1, le=50, description="each leg's pool: max(factor × limit, pool_min)")
    pool_min: int = Field(20, ge=1, le=1_000)
    semantic_floor: float = Field(0.20, ge=-1.0, le=1.0,
                                  description="semantic mode drops results below this cosine")
    hybrid_floor: float = Field(-1.0, ge=-1.0, le=1.0,
                                description="hybrid drops semantic-only hits below this cosine")
    hybrid_tail: float = Field(0.01, ge=0.0, le=1.0, description="hybrid drops results "
                               "scoring below this share of the best one")
    rerank: bool = Field(True, description="hybrid: order the legs' pools with the shipped "
                         "second stage (false: the fusion rule)")
    floor: bool = Field(True, description="every mode: nothing when no record is close to the "
                        "query in meaning and none holds most of its rare words")
    floor_cosine: float = Field(0.30, ge=-1.0, le=1.0, description="floor: best cosine below this")
    floor_coverage: float = Field(0.70, ge=0.0, le=1.0, description="floor: best share of "
                                  "the query's idf mass below this")
    floor_probability: float = Field(0.30, ge=0.0, le=1.0, description="hybrid floor: it also "
                                     "needs the best calibrated probability below this")
    floor_keyword_alone: float = Field(0.20, ge=0.0, le=1.0, description="floor of keyword "
                                       "search without a model: best share below this")
    model_scripts: Literal["latin", "any"] = Field("latin", description="the scripts the "
                                                   "embedding model reads: a query mostly in "
                                                   "others needs keyword hits in every mode "
                                                   "('latin': the packaged English model)")
    passages: bool = Field(True, description="long records also get one vector per passage")
    passage_min_chars: int = Field(1_000, ge=100, le=20_000,
                                   description="passages for a rationale longer than this")
    passage_chars: int = Field(700, ge=100, le=5_000, description="a passage's most characters")
    session_context: bool = Field(True, description="hybrid: a record's neighbours in its "
                                  "session (session_id, created_at order) inform its rank")
    decay_weight: float = Field(0.3, ge=0.0, le=1.0,
                                description="hybrid: score × (1 − w × (1 − strength))")
    feedback_up: float = Field(0.05, gt=0.0, le=0.5, description="confidence step of 'helpful'")
    feedback_down: float = Field(0.10, gt=0.0, le=0.5, description="confidence step of 'unhelpful'")
    feedback_floor: float = Field(0.10, ge=0.0, le=1.0, description="feedback never goes below")
    backfill_delay_s: float = Field(0.5, ge=0.0, le=60.0, description="debounce after a write")
    backfill_batch: int = Field(64, ge=1, le=1_024)
    backfill_lease_s: float = Field(60.0, ge=1.0, le=3_600.0)
    search_embed_max: int = Field(256, ge=0, le=100_000, description="the most missing "
                                  "vectors a search embeds itself; it finds the others by "
                                  "their words alone until the backfill embeds them")
    keyword_postings: int = Field(10_000, ge=100, le=10_000_000, description="the keyword "
                                  "leg scores at most about this many matches (rarest words "
                                  "first), from 20,000 records on")
    ann: bool = Field(True, description="semantic leg on an HNSW index in large projects")
    ann_min_records: int = Field(50_000, ge=1, description="the HNSW index from this many "
                                 "records on; an exact scan below")
    ann_rebuild_rows: int = Field(2_000, ge=1, le=1_000_000, description="vectors written "
                                  "since the last build that call the next (scanned exactly "
                                  "meanwhile)")
    ann_fetch: int = Field(4, ge=1, le=50, description="candidates asked of the graph: "
                           "fetch × the leg's pool, then ranked exactly")
    ann_expansion_search: int = Field(256, ge=8, le=4_096, description="HNSW ef at search")
    ann_expansion_add: int = Field(128, ge=8, le=4_096, description="HNSW ef at build")
    ann_connectivity: int = Field(16, ge=4, le=128, description="HNSW links per node")
    ann_threads: int = Field(1, ge=0, le=64, description="threads of a build (0: all cores)")
    ann_build_memory_mb: int = Field(1_024, ge=64, le=1_048_576, description="PostgreSQL: "
                                     "maintenance_work_mem of a project's HNSW build; ~2 KB a "
                                     "record keeps the graph in memory (1M records: ~2,100)")
    decay_sweep_hours: float = Field(24.0, ge=0.0, le=8_760.0,
                                     description="the daemon's decay sweep period; 0 turns it off")


# -- records ---------------------------------------------------------------------------------

class MemoryFields(Model):
    """Fields a client may set when creating a record."""

    title: Title
    rationale: Rationale
    commit_sha: CommitSha | None = None
    files_affected: list[Path] = Field(default_factory=list, max_length=500)
    decision_type: DecisionType = "ARCHITECTURE"
    kind: Kind = Field("decision", description="decision, fact, preference, procedure or episode")
    importance: Importance | None = Field(None, description="0–1; default by kind (docs/memory.md)")
    pinned: bool = Field(False, description="never decays, never archived")
    confidence: Confidence = 1.0
    status: Status = "ACTIVE"
    author: Short | None = None
    agent: Short | None = None
    session_id: Short | None = None
    review_by: ISODate | None = Field(None, description="ISO date; STALE once it has passed (UTC)")
    evidence: list[Item] = Field(default_factory=list, max_length=MAX_ITEMS)
    rejected_alternatives: list[Item] = Field(default_factory=list, max_length=MAX_ITEMS)
    dependency_constraints: list[Item] = Field(default_factory=list, max_length=MAX_ITEMS)
    tags: list[Tag] = Field(default_factory=list, max_length=50)


class MemoryIn(MemoryFields):
    id: MemoryId | None = Field(None, description="A client-chosen id; 409 when it exists")
    supersedes: list[MemoryId] = Field(default_factory=list, max_length=50, description=(
        "Records this one replaces: each gets a supersedes link and becomes SUPERSEDED"))


class MemoryPatch(Model):
    """Changes to a record; a field left out is unchanged."""

    rationale: Rationale | None = None
    confidence: Confidence | None = None
    importance: Importance | None = None
    pinned: bool | None = None
    kind: Kind | None = None
    tags: list[Tag] | None = Field(None, max_length=50)
    files_affected: list[Path] | None = Field(None, max_length=500)
    review_by: ISODate | None = None
    evidence_append: list[Item] = Field(default_factory=list, max_length=MAX_ITEMS)
    rejected_append: list[Item] = Field(default_factory=list, max_length=MAX_ITEMS)
    supersedes: list[MemoryId] = Field(default_factory=list, max_length=50, description=(
        "Records this one replaces: each gets a supersedes link and becomes SUPERSEDED"))


class Memory(Model):
    id: str
    title: str
    rationale: str
    commit_sha: str
    files_affected: list[str]
    decision_type: str
    kind: str
    importance: float
    pinned: bool
    confidence: float
    status: str
    author: str | None
    agent: str | None
    session_id: str | None
    review_by: str | None
    evidence: list[str]
    rejected_alternatives: list[str]
    dependency_constraints: list[str]
    tags: list[str]
    created_at: str
    updated_at: str
    last_accessed_at: str | None = Field(description="The last recall (search hit or read)")
    access_count: int
    effective_status: str = Field(description="STALE once review_by has passed, else status")
    strength: float = Field(description="Retention now, 0–1, by the project's decay policy")


class Duplicate(Model):
    id: str
    title: str
    status: str
    score: float


class Contradiction(Model):
    id: str
    a: str = Field(description="The older record")
    b: str = Field(description="The newer record")
    confidence: float
    kind: str | None = Field(description="replaces, forbids, setting_value or polarity")
    explanation: str = Field(description="The conflicting phrases; A is the older record")
    status: Literal["open", "resolved"]
    detected_at: str
    resolved_at: str | None = None
    resolved_by: str | None = None
    strategy: str | None = None
    outcome: dict[str, Any] | None = None


class Contradictions(Model):
    count: int
    items: list[Contradiction]


class MemoryCreated(Memory):
    possible_duplicates: list[Duplicate] = Field(
        default_factory=list, description="Advisory: up to 3 similar ACTIVE records")
    contradictions: Contradictions = Field(
        default_factory=lambda: Contradictions(count=0, items=[]),
        description="Open contradictions with ACTIVE neighbours found by this write")


class CreateQuery(Model):
    duplicates: Literal["keyword", "hybrid", "none"] = Field(
        "keyword", description="How to look for possible duplicates (hybrid embeds the title)")


class Filters(Model):
    """Filters shared by listing and search, combined with AND."""

    status: StatusFilter | None = Field(None, description="ACTIVE unless the collection says")
    file: list[Path] = Field(default_factory=list, description="Any of these files (repeatable)")
    tag: list[Tag] = Field(default_factory=list, description="Any of these tags (repeatable)")
    kind: list[Kind] = Field(default_factory=list, description="Any of these kinds (repeatable)")
    type: DecisionType | None = None
    author: Short | None = None
    agent: Short | None = None
    session_id: Short | None = None
    created_after: ISODate | None = Field(None, description="Inclusive (UTC date)")
    created_before: ISODate | None = Field(None, description="Inclusive (UTC date)")
    min_confidence: Confidence | None = None
    collection: Name | None = Field(None, description=(
        "A saved filter (…/collections/{name}); filters given here override its own"))


class ListQuery(Filters, PageQuery):
    pass


class SearchIn(Filters):
    query: text(2_000)
    kinds: list[Kind] = Field(default_factory=list, description=(
        "kind's other name (consolidate's): records of any kind either names"))
    mode: Mode = "hybrid"
    limit: int = Field(10, ge=1, le=25)
    view: Literal["full", "compact"] = "full"
    expand: bool = Field(False, description=(
        "Add the records linked to the hits, marked linked_from, scored below their source"))

    @model_validator(mode="after")
    def _kinds(self) -> SearchIn:
        """Both names are published fields, so every client (HTTP, MCP's recall, the Python
        client, which read the OpenAPI document) takes either; ``kind`` is what filters."""
        self.kind = list(dict.fromkeys([*self.kind, *self.kinds]))
        return self


class LinkedFrom(Model):
    id: str
    type: str


class ScoredMemory(Memory):
    score: float
    linked_from: LinkedFrom | None = None


class CompactMemory(Model):
    id: str
    title: str
    status: str
    kind: str
    score: float
    files_affected: list[str]
    linked_from: LinkedFrom | None = None


class SearchOut(Model):
    project_id: str
    query: str
    mode: str
    results: list[ScoredMemory] | list[CompactMemory]
    notice: str | None = None


# -- lifecycle ---------------------------------------------------------------------------------

class InvalidateIn(Model):
    reason: Item


class RestoreIn(Model):
    commit_sha: CommitSha | None = None


class FeedbackIn(Model):
    """Spec 000 G9: ``{signal, note?}``; ``helpful: bool`` is still read (v1 is additive)."""

    signal: Annotated[Literal["helpful", "unhelpful"], BeforeValidator(_lower)] | None = None
    helpful: bool | None = Field(None, description="Deprecated spelling of signal")
    note: Item | None = None

    @model_validator(mode="after")
    def _one_signal(self) -> FeedbackIn:
        if self.signal is None and self.helpful is None:
            raise ValueError("give signal: helpful or unhelpful")
        if self.signal is not None and self.helpful is not None:
            raise ValueError("give signal or its deprecated spelling helpful, not both")
        if self.signal is None:
            self.signal = "helpful" if self.helpful else "unhelpful"
        return self


class HistoryEvent(Model):
    id: str
    at: str
    kind: str
    actor: str | None
    changes: dict[str, Any]
    note: str | None


class TimelineCommit(Model):
    sha: str
    author: str
    subject: str
    files: list[str]


class TimelineEntry(Model):
    at: str
    source: Literal["history", "git"]
    kind: str = Field(description="The history event's kind, or 'commit'")
    actor: str | None
    note: str | None = None
    changes: dict[str, Any] = Field(default_factory=dict)
    commit: TimelineCommit | None = None


class Timeline(Model):
    memory_id: str
    items: list[TimelineEntry]


# -- kinds, tags, stats ------------------------------------------------------------------------

class TagsIn(Model):
    tags: list[Tag] = Field(min_length=1, max_length=50)


class TagsQuery(Model):
    tag: list[Tag] = Field(min_length=1, description="Tags to remove (repeatable)")


class TagCount(Model):
    tag: str
    count: int


class TagsOut(Model):
    items: list[TagCount]


class StatusQuery(Model):
    status: StatusFilter = Field("ALL", description="Count records of this effective status")


class VectorCounts(Model):
    model_id: str | None
    embedded: int
    pending: int


class MemoryStats(Model):
    project_id: str
    total: int
    by_kind: dict[str, int]
    by_status: dict[str, int] = Field(description="Effective status")
    by_author: dict[str, int]
    by_agent: dict[str, int]
    by_tag: dict[str, int]
    vectors: VectorCounts


# -- links and graph ---------------------------------------------------------------------------

class LinkIn(Model):
    target: MemoryId
    type: LinkType
    note: Item | None = None


class Link(Model):
    source: str
    target: str
    type: str
    created_at: str
    actor: str | None
    note: str | None


class LinkedItem(Link):
    direction: Literal["out", "in"] = Field(description="out: this record is the source")


class LinksOut(Model):
    items: list[LinkedItem]


class UnlinkQuery(Model):
    target: MemoryId
    type: LinkType | None = Field(None, description="Only links of this type (default: all)")


class GraphQuery(Model):
    depth: int = Field(2, ge=1, le=4)


class GraphNode(Model):
    id: str
    title: str
    kind: str
    status: str
    depth: int


class GraphOut(Model):
    root: str
    nodes: list[GraphNode]
    edges: list[Link]


# -- decay -------------------------------------------------------------------------------------

HalfLife = Annotated[float, Field(ge=1.0, le=36_500.0)]


class DecayPolicy(Model):
    """A project's decay policy (docs/memory.md gives the formula)."""

    enabled: bool = True
    half_life_days: dict[Kind, HalfLife] = Field(default_factory=lambda: {
        "decision": 180.0, "fact": 120.0, "preference": 365.0, "procedure": 180.0,
        "episode": 14.0})
    access_boost: float = Field(0.1, ge=0.0, le=1.0, description="added to importance per recall")
    archive_threshold: float = Field(0.05, ge=0.0, le=1.0,
                                     description="a sweep archives records whose strength is below")


class DecayPolicyPatch(Model):
    enabled: bool | None = None
    half_life_days: dict[Kind, HalfLife] | None = Field(None, description="Kinds given change")
    access_boost: float | None = Field(None, ge=0.0, le=1.0)
    archive_threshold: float | None = Field(None, ge=0.0, le=1.0)


class JobQuery(Model):
    wait: bool = Field(False, description="Run before answering (200) instead of 202 + Location")


class DryRunIn(Model):
    dry_run: bool = Field(False, description="Report what would change; change nothing")


class ConsolidateIn(DryRunIn):
    kinds: list[Kind] = Field(default_factory=list, description="Only these kinds (default all)")
    threshold: float = Field(0.85, ge=0.5, le=1.0,
                             description="Cosine of title + rationale at or above which two merge")


# -- contradictions ----------------------------------------------------------------------------

def _automatic(value: Any) -> Any:
    if value == "manual":
        raise ValueError("auto_resolve cannot be manual: manual needs the new record's text")
    return value


AutoStrategy = Annotated[Strategy, AfterValidator(_automatic)]


class ContradictionConfig(Model):
    check_on_store: bool = Field(True, description="Check each create and patch")
    threshold: float = Field(0.5, ge=0.0, le=1.0, description="Detector confidence to report")
    auto_resolve: AutoStrategy | None = Field(None, description=(
        "Resolve each new contradiction with this strategy (not manual); null: leave open"))


class ContradictionConfigPatch(Model):
    check_on_store: bool | None = None
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    auto_resolve: AutoStrategy | None = None


class ContradictionQuery(PageQuery):
    status: Literal["open", "resolved", "all"] = "open"
    memory_id: MemoryId | None = Field(None, description="Only those involving this record")


class ResolveIn(Model):
    strategy: Strategy
    title: Title | None = Field(None, description="manual: the new record's title (default B's)")
    rationale: Rationale | None = Field(None, description="manual: the new record's text")

    @model_validator(mode="after")
    def _manual_text(self) -> ResolveIn:
        if self.strategy == "manual" and self.rationale is None:
            raise ValueError("manual needs rationale: the text of the record that replaces both")
        return self


class Resolved(Model):
    contradiction: Contradiction
    kept: list[str]
    superseded: list[str]
    created: str | None = Field(None, description="manual: the new record's id")


class CheckOut(Model):
    memory_id: str
    count: int
    items: list[Contradiction]


# -- collections -------------------------------------------------------------------------------

class CollectionFilters(Model):
    """A saved filter: any of the list/search filters."""

    status: StatusFilter | None = None
    file: list[Path] = Field(default_factory=list, max_length=100)
    tag: list[Tag] = Field(default_factory=list, max_length=50)
    kind: list[Kind] = Field(default_factory=list)
    type: DecisionType | None = None
    author: Short | None = None
    agent: Short | None = None
    session_id: Short | None = None
    created_after: ISODate | None = None
    created_before: ISODate | None = None
    min_confidence: Confidence | None = None


class CollectionIn(Model):
    filters: CollectionFilters
    description: Short | None = None


class Collection(Model):
    name: str
    filters: CollectionFilters
    description: str | None
    created_at: str
    updated_at: str


class CollectionsOut(Model):
    items: list[Collection]


# -- batch, export, import ---------------------------------------------------------------------

class BatchItem(Model):
    """One batch operation; its other fields are those of its op's single request — a create's,
    a patch's or an invalidate's body, none for a delete — and one the op does not take is
    refused (service.py ``_not_taken``)."""

    model_config = ConfigDict(extra="allow")

    op: Literal["create", "patch", "delete", "invalidate"]
    id: MemoryId | None = None
    if_match: Annotated[str, StringConstraints(max_length=64)] | None = Field(None, description=(
        "patch, invalidate, delete: the record's updated_at (or *), as the If-Match header of "
        "their single routes: the item fails (precondition_failed) when it no longer holds"))


class BatchIn(Model):
    items: list[BatchItem] = Field(min_length=1, max_length=1_000)
    atomic: bool = Field(True, description=(
        "All or nothing (422 when any item is bad); false applies the items that validate"))


class BatchError(Model):
    loc: list[str | int]
    msg: str
    type: str


class BatchResult(Model):
    op: str
    id: str | None
    status: Literal["ok", "error"] = "ok"
    errors: list[BatchError] = Field(default_factory=list)


class BatchOut(Model):
    items: list[BatchResult]


# a time of an import, stored as the server writes times: as written, an offset or the basic
# format would sort apart from the times around it, and every reader compares them as text
Timestamp = Annotated[str, AfterValidator(times.utc)]


class StoredMemory(MemoryFields):
    """A record as exported: every stored field, nothing computed."""

    id: MemoryId
    commit_sha: CommitSha = ""
    importance: Importance | None = None
    created_at: Timestamp
    updated_at: Timestamp
    last_accessed_at: Timestamp | None = None
    access_count: int = Field(0, ge=0, le=2 ** 63 - 1)


def kept(max_length: int) -> Any:
    """Text of an export's history, links and contradictions, which an import restores as it
    is (docs/memory.md): no NUL, as every text field (PostgreSQL's text cannot hold one), and
    bounded — neither stripped nor put in NFC, so export → import gives the same bytes back."""
    return Annotated[str, StringConstraints(max_length=max_length), AfterValidator(no_nul)]


# as long as what the server writes: a name (an event's id; an actor, which a token names in
# at most 200 characters, as Short), a link's note (an Item), and its longest note (an
# explanation is shorter), a stale event's changed files: 500 paths of 1,024 characters at most
KeptName, KeptLinkNote, KeptNote = kept(200), kept(2_000), kept(520_000)


class ExportedEvent(HistoryEvent):
    id: KeptName
    at: Timestamp
    kind: Literal[HISTORY_KINDS]
    actor: KeptName | None
    note: KeptNote | None


class ExportedLink(Link):
    source: MemoryId
    target: MemoryId
    type: LinkType
    created_at: Timestamp
    actor: KeptName | None
    note: KeptLinkNote | None


class ExportedContradiction(Contradiction):
    """A contradiction as an export line holds it: what the detector and a resolution write,
    checked as the record's own fields are (its times sort and page the list)."""

    id: Annotated[str, matching(r"^c_[0-9a-f]{12}$",
                                "a contradiction id is c_ and 12 hexadecimal digits")]
    a: MemoryId
    b: MemoryId
    confidence: Confidence
    kind: Literal[CONFLICTS] | None
    explanation: KeptNote
    detected_at: Timestamp
    resolved_at: Timestamp | None = None
    resolved_by: KeptName | None = None
    strategy: Literal[STRATEGIES] | None = None

    @model_validator(mode="after")
    def _resolved_when_closed(self) -> ExportedContradiction:
        if (self.status == "resolved") != (self.resolved_at is not None):
            raise ValueError("resolved_at is given when, and only when, status is resolved")
        return self


class ExportLine(Model):
    memory: StoredMemory
    history: list[ExportedEvent]
    links: list[ExportedLink] = Field(default_factory=list,
                                      description="Links this record is the source of")
    contradictions: list[ExportedContradiction] = Field(
        default_factory=list, description="Contradictions this record is the newer of (b)")


class ExportQuery(Model):
    format: Literal["ndjson", "json", "md"] = Field(
        "ndjson", description="ndjson (one line per record; import reads it), json (one array), "
                              "md (Markdown, one section per record)")


class ImportQuery(Model):
    mode: Literal["skip", "overwrite"] = "skip"


class ImportOut(Model):
    created: int
    overwritten: int
    skipped: int
