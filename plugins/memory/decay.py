"""Importance and decay: how strongly a record is retained now, and what ranking makes of it.

A record's **strength** is its importance (plus a boost per recall), halved every half-life of
its kind since it was last touched — written, or recalled (returned by a search):

    strength = 1                                                        if pinned
    strength = min(1, importance + access_boost × access_count) × 0.5 ^ (days / half_life[kind])

where ``days`` counts from the later of ``updated_at`` and ``last_accessed_at``. Hybrid search
multiplies a hit's score by :func:`rank_factor` (``[memory] decay_weight``); the decay sweep
archives records whose strength fell below the policy's ``archive_threshold``. Both are pure
functions of a record's fields, so a later ranking stage can take strength as a feature.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

# Importance of a record created without one, by kind: what an agent would lose by forgetting.
DEFAULT_IMPORTANCE = {"decision": 0.8, "fact": 0.6, "preference": 0.7, "procedure": 0.7,
                      "episode": 0.4}
DAY_S = 86_400.0


def policy_of(saved: dict[str, Any] | None) -> dict[str, Any]:
    """A project's decay policy as stored (``store.config("decay")``), defaults filled in."""
    from plugins.memory.models import DecayPolicy
    return DecayPolicy.model_validate(saved or {}).model_dump()


def importance_of(kind: str, given: float | None) -> float:
    return DEFAULT_IMPORTANCE[kind] if given is None else given


def parse_time(stamp: str) -> dt.datetime:
    """An ISO 8601 UTC timestamp as stored (``…Z``)."""
    return dt.datetime.fromisoformat(stamp)


def last_touched(rec: dict[str, Any]) -> str:
    return max(rec["updated_at"], rec.get("last_accessed_at") or "")


def strength(rec: dict[str, Any], policy: dict[str, Any], now: dt.datetime) -> float:
    """Retention of ``rec`` at ``now`` under ``policy`` (a DecayPolicy as a dict), 0–1."""
    if rec["pinned"]:
        return 1.0
    days = max(0.0, (now - parse_time(last_touched(rec))).total_seconds() / DAY_S)
    base = min(1.0, rec["importance"] + policy["access_boost"] * rec["access_count"])
    return base * 0.5 ** (days / policy["half_life_days"][rec["kind"]])


def rank_factor(value: float, weight: float) -> float:
    """What a hit's hybrid score is multiplied by: 1 for a full-strength record, down to
    ``1 − weight`` for a forgotten one, so decay reorders near ties and never hides a hit."""
    return 1.0 - weight * (1.0 - value)


def strengths(recs: dict[str, dict[str, Any]], policy: dict[str, Any] | None,
              now: dt.datetime) -> dict[str, float]:
    """``{id: strength}``; every record at full strength when the policy is off (None)."""
    if policy is None or not policy["enabled"]:
        return dict.fromkeys(recs, 1.0)
    return {mid: strength(rec, policy, now) for mid, rec in recs.items()}


def to_archive(recs: list[dict[str, Any]], policy: dict[str, Any], now: dt.datetime
               ) -> list[tuple[dict[str, Any], float]]:
    """The records a sweep archives: not pinned, strength below the threshold, weakest first."""
    if not policy["enabled"]:
        return []
    found = [(rec, strength(rec, policy, now)) for rec in recs if not rec["pinned"]]
    return sorted(((rec, s) for rec, s in found if s < policy["archive_threshold"]),
                  key=lambda pair: (pair[1], pair[0]["id"]))
