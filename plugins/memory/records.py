"""Pure record rules: building a record from a create body, applying a patch with its diff,
normalising file paths, the effective status, the content hash vectors are keyed by, and the
actor a history event names."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Any

from neuralmind import InvalidFields, today
from plugins.memory import times
from plugins.memory.decay import importance_of
from plugins.memory.models import MAX_ITEMS, RESERVED_IDS
from plugins.memory.text import nfc

LOC = tuple[str | int, ...]
# A relative path with no empty, "." or ".." segment and no backslash needs no normalising.
SIMPLE = re.compile(r"(?!\.{1,2}(?:/|$))[^/\\]+(?:/(?!\.{1,2}(?:/|$))[^/\\]+)*")


def new_id() -> str:
    return secrets.token_hex(8)


def content_sha(rec: dict[str, Any]) -> str:
    """What the vector embeds: title + rationale. A change here re-embeds."""
    return hashlib.sha1(f"{rec['title']}\n{rec['rationale']}".encode()).hexdigest()[:16]


def effective_status(rec: dict[str, Any], on: str) -> str:
    if rec["status"] == "ACTIVE" and rec["review_by"] and rec["review_by"] < on:
        return "STALE"
    return rec["status"]


def view(rec: dict[str, Any], on: str, strength: float) -> dict[str, Any]:
    return {**rec, "effective_status": effective_status(rec, on), "strength": round(strength, 6)}


def history_actor(rec: dict[str, Any], actor) -> str:
    """Who a history event names: the authenticated caller, except the loopback caller — the
    one local token stands for every agent on the machine, so the record's agent or author
    says more (spec 000 §4.2)."""
    if actor.kind == "loopback":
        return rec.get("agent") or rec.get("author") or actor.id
    return actor.id


def invalid(loc: LOC, msg: str, kind: str) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}


def located(ex, loc: LOC) -> list[dict[str, Any]]:
    """A pydantic ``ValidationError``'s errors, placed under ``loc`` (a batch item, a line);
    locations name fields, and the kernel puts them under the body. A validator's own words
    stand without the "Value error, " pydantic puts before them, as the kernel's answers to a
    single request have them (a batch item's errors are answered as they are here)."""
    return [{"loc": (*loc, *e["loc"]), "type": e["type"],
             "msg": e["msg"].removeprefix("Value error, ") if e["type"] == "value_error"
             else e["msg"]} for e in ex.errors(include_url=False)]


def fail(errors: list[dict[str, Any]], message: str | None = None) -> InvalidFields:
    return InvalidFields(errors, message)


def normalise_files(root: Path, files: list[str], loc: LOC, errors: list[dict[str, Any]]
                    ) -> list[str]:
    """Project-relative POSIX paths, in order, without duplicates; a path outside the project
    is an error at ``loc + (index,)``."""
    out: list[str] = []
    base = str(root)
    for i, raw in enumerate(map(nfc, files)):  # as the API takes them (models.Path)
        if "\0" in raw:  # no file has one; the OS refuses it with a ValueError
            errors.append(invalid((*loc, i), "a path cannot contain a NUL byte", "path_invalid"))
            continue
        if SIMPLE.fullmatch(raw):  # the common case: already relative and clean
            if raw not in out:
                out.append(raw)
            continue
        path = raw.replace("\\", "/")
        candidates = [os.path.normpath(path)] if not os.path.isabs(path) else [
            os.path.relpath(os.path.normpath(path), base),
            os.path.relpath(os.path.realpath(path), base)]
        rel = next((c for c in candidates if c != "." and c != ".." and not c.startswith("../")),
                   None)
        if rel is None:
            errors.append(invalid((*loc, i), f"{raw} is not inside the project", "path_outside_project"))
            continue
        if rel not in out:
            out.append(rel)
    return out


def check_review_by(value: dt.date | None, loc: LOC, errors: list[dict[str, Any]],
                    held: str | None = None) -> str | None:
    """``value`` as stored; a date already past is an error unless it is ``held``, the
    record's own (an edit sends an overdue record's date back as it was shown)."""
    if value is None:
        return None
    on, date = today(), value.isoformat()
    if date < on and date != held:
        errors.append(invalid(loc, f"{date} is in the past (today is {on}, in UTC)",
                              "date_in_past"))
    return date


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def build(body: dict[str, Any], *, root: Path, now: str, head: str, loc: LOC = (),
          errors: list[dict[str, Any]]) -> dict[str, Any]:
    """A new record from a validated create body: a ``MemoryIn``'s fields (``vars(body)``,
    as ``model_dump()`` has them without copying: the model is flat), or some of them."""
    if body.get("id") in RESERVED_IDS:
        errors.append(invalid((*loc, "id"), f"{body['id']} names a route; choose another id",
                              "reserved_id"))
    kind = body.get("kind", "decision")
    rec = {
        "id": body.get("id") or new_id(),
        "title": body["title"], "rationale": body["rationale"],
        "commit_sha": head if body.get("commit_sha") is None else body["commit_sha"],
        "files_affected": normalise_files(root, body.get("files_affected", []),
                                          (*loc, "files_affected"), errors),
        "decision_type": body.get("decision_type", "ARCHITECTURE"), "kind": kind,
        "importance": importance_of(kind, body.get("importance")),
        "pinned": bool(body.get("pinned", False)),
        "confidence": body.get("confidence", 1.0), "status": body.get("status", "ACTIVE"),
        "author": body.get("author"), "agent": body.get("agent"),
        "session_id": body.get("session_id"),
        "review_by": check_review_by(body.get("review_by"), (*loc, "review_by"), errors),
        "evidence": body.get("evidence", []),
        "rejected_alternatives": body.get("rejected_alternatives", []),
        "dependency_constraints": body.get("dependency_constraints", []),
        "tags": _unique(body.get("tags", [])),
        "created_at": now, "updated_at": now,
        "last_accessed_at": body.get("last_accessed_at"),
        "access_count": body.get("access_count", 0),
    }
    return rec


def patched(rec: dict[str, Any], patch: dict[str, Any], *, root: Path, now: str,
            loc: LOC = (), errors: list[dict[str, Any]]
            ) -> tuple[dict[str, Any], dict[str, list]]:
    """``(new record, {field: [old, new]})`` for the fields ``patch`` holds (only set ones);
    a change stamps it ``now``, or a millisecond past its ``updated_at`` (times.after)."""
    new = dict(rec)
    for field in ("rationale", "confidence", "importance", "pinned", "kind"):
        if patch.get(field) is not None:
            new[field] = patch[field]
    if "tags" in patch:
        new["tags"] = _unique(patch["tags"] or [])
    if "files_affected" in patch:
        new["files_affected"] = normalise_files(root, patch["files_affected"] or [],
                                                (*loc, "files_affected"), errors)
    if "review_by" in patch:
        new["review_by"] = check_review_by(patch["review_by"], (*loc, "review_by"), errors,
                                           rec["review_by"])
    for field, appended in (("evidence", "evidence_append"),
                            ("rejected_alternatives", "rejected_append")):
        if patch.get(appended):
            new[field] = rec[field] + patch[appended]
            if len(new[field]) > MAX_ITEMS:  # what a create takes, so an export imports
                errors.append(invalid((*loc, appended), f"a record holds at most {MAX_ITEMS} "
                                      f"{field.replace('_', ' ')}; it has {len(rec[field])}",
                                      "too_long"))
    changes = {f: [rec[f], new[f]] for f in new if new[f] != rec[f]}
    if changes:
        new["updated_at"] = times.after(rec["updated_at"], now)
    return new, changes
