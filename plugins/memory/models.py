"""The memory plugin's request, response and settings models (pydantic).

Enumerations are strict but case-insensitive on input, so ``"bugfix"`` and ``"BUGFIX"`` are the
same type while ``"BUG"`` is a 422. Lengths are bounded so one record cannot grow without limit.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, StringConstraints

from neuralmind import ConfigSection, ISODate, Model, PageQuery

DECISION_TYPES = ("ARCHITECTURE", "DEPENDENCY", "TEST", "REFACTOR", "BUGFIX", "CONFIG")
STATUSES = ("ACTIVE", "STALE", "INVALIDATED")
RESERVED_IDS = frozenset({"search", "batch", "export", "import", "maintenance"})
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


DecisionType = Annotated[Literal[DECISION_TYPES], BeforeValidator(_upper)]
Status = Annotated[Literal[STATUSES], BeforeValidator(_upper)]
StatusFilter = Annotated[Literal[(*STATUSES, "ALL")], BeforeValidator(_upper)]
Mode = Annotated[Literal["keyword", "semantic", "hybrid"], BeforeValidator(
    lambda v: v.strip().lower() if isinstance(v, str) else v)]

NOT_BLANK = r"\S"  # published with min_length: blanks are stripped, so "  " is refused too


def _text(max_length: int) -> Any:
    return Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                            max_length=max_length, pattern=NOT_BLANK)]


Title, Rationale, Item, Tag, Path = _text(300), _text(20_000), _text(2_000), _text(64), _text(1_024)
Short = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]
MemoryId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]


class MemorySettings(ConfigSection):
    """The ``[memory]`` config section. Fusion constants were chosen by ``neuralmind eval memory``
    on ``../shared/eval`` (docs/performance-memory.md)."""

    fusion: Literal["blend", "rrf"] = "blend"
    keyword_weight: float = Field(0.5, ge=0.0, le=1.0, description="blend: weight of the keyword leg")
    rrf_k: int = Field(10, ge=1, le=1_000)
    pool_factor: int = Field(4, ge=1, le=50, description="each leg's pool: max(factor × limit, pool_min)")
    pool_min: int = Field(20, ge=1, le=1_000)
    semantic_floor: float = Field(0.20, ge=-1.0, le=1.0,
                                  description="semantic mode drops results below this cosine")
    hybrid_floor: float = Field(-1.0, ge=-1.0, le=1.0,
                                description="hybrid drops semantic-only hits below this cosine")
    feedback_step: float = Field(0.1, gt=0.0, le=0.5)
    backfill_delay_s: float = Field(0.5, ge=0.0, le=60.0, description="debounce after a write")
    backfill_batch: int = Field(64, ge=1, le=1_024)
    backfill_lease_s: float = Field(60.0, ge=1.0, le=3_600.0)


# -- records ---------------------------------------------------------------------------------

class MemoryFields(Model):
    """Fields a client may set when creating a record."""

    title: Title
    rationale: Rationale
    commit_sha: Annotated[str, StringConstraints(strip_whitespace=True, max_length=64,
                                                 pattern=r"^[0-9a-fA-F]*$")] | None = None
    files_affected: list[Path] = Field(default_factory=list, max_length=500)
    decision_type: DecisionType = "ARCHITECTURE"
    confidence: Confidence = 1.0
    status: Status = "ACTIVE"
    author: Short | None = None
    agent: Short | None = None
    session_id: Short | None = None
    review_by: ISODate | None = Field(None, description="ISO date; STALE once it has passed (UTC)")
    evidence: list[Item] = Field(default_factory=list, max_length=200)
    rejected_alternatives: list[Item] = Field(default_factory=list, max_length=200)
    dependency_constraints: list[Item] = Field(default_factory=list, max_length=200)
    tags: list[Tag] = Field(default_factory=list, max_length=50)


class MemoryIn(MemoryFields):
    id: MemoryId | None = Field(None, description="A client-chosen id; 409 when it exists")


class MemoryPatch(Model):
    """Changes to a record; a field left out is unchanged."""

    rationale: Rationale | None = None
    confidence: Confidence | None = None
    tags: list[Tag] | None = Field(None, max_length=50)
    files_affected: list[Path] | None = Field(None, max_length=500)
    review_by: ISODate | None = None
    evidence_append: list[Item] = Field(default_factory=list, max_length=200)
    rejected_append: list[Item] = Field(default_factory=list, max_length=200)


class Memory(Model):
    id: str
    title: str
    rationale: str
    commit_sha: str
    files_affected: list[str]
    decision_type: str
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
    effective_status: str = Field(description="STALE once review_by has passed, else status")


class Duplicate(Model):
    id: str
    title: str
    status: str
    score: float


class MemoryCreated(Memory):
    possible_duplicates: list[Duplicate] = Field(
        default_factory=list, description="Advisory: up to 3 similar ACTIVE records")


class CreateQuery(Model):
    duplicates: Literal["keyword", "hybrid", "none"] = Field(
        "keyword", description="How to look for possible duplicates (hybrid embeds the title)")


class Filters(Model):
    """Filters shared by listing and search, combined with AND."""

    status: StatusFilter = "ACTIVE"
    file: list[Path] = Field(default_factory=list, description="Any of these files (repeatable)")
    tag: list[Tag] = Field(default_factory=list, description="Any of these tags (repeatable)")
    type: DecisionType | None = None
    author: Short | None = None
    agent: Short | None = None
    session_id: Short | None = None
    created_after: ISODate | None = Field(None, description="Inclusive (UTC date)")
    created_before: ISODate | None = Field(None, description="Inclusive (UTC date)")
    min_confidence: Confidence | None = None


class ListQuery(Filters, PageQuery):
    pass


class SearchIn(Filters):
    query: _text(2_000)
    mode: Mode = "hybrid"
    limit: int = Field(10, ge=1, le=25)
    view: Literal["full", "compact"] = "full"


class ScoredMemory(Memory):
    score: float


class CompactMemory(Model):
    id: str
    title: str
    status: str
    score: float
    files_affected: list[str]


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
    commit_sha: Annotated[str, StringConstraints(max_length=64, pattern=r"^[0-9a-fA-F]*$")] | None = None


class FeedbackIn(Model):
    helpful: bool
    note: Item | None = None


class HistoryEvent(Model):
    id: str
    at: str
    kind: str
    actor: str | None
    changes: dict[str, Any]
    note: str | None


# -- batch, export, import ---------------------------------------------------------------------

class BatchItem(Model):
    """One batch operation; its other fields are those of a create or a patch."""

    model_config = ConfigDict(extra="allow")

    op: Literal["create", "patch", "delete"]
    id: MemoryId | None = None


class BatchIn(Model):
    items: list[BatchItem] = Field(min_length=1, max_length=1_000)


class BatchResult(Model):
    op: str
    id: str


class BatchOut(Model):
    items: list[BatchResult]


class StoredMemory(MemoryFields):
    """A record as exported: every stored field, nothing computed."""

    id: MemoryId
    commit_sha: str = ""
    review_by: dt.date | None = None
    created_at: str
    updated_at: str


class ExportLine(Model):
    memory: StoredMemory
    history: list[HistoryEvent]


class ImportQuery(Model):
    mode: Literal["skip", "overwrite"] = "skip"


class ImportOut(Model):
    created: int
    overwritten: int
    skipped: int


class MaintenanceQuery(Model):
    wait: bool = Field(False, description="Run before answering (200) instead of 202 + Location")
