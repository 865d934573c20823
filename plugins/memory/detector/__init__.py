"""An LLM-free contradiction detector for two memory records.

``detect(a, b, cosine=None)`` answers "can these two both hold?" with a :class:`Verdict`
``(is_contradiction, confidence, explanation, kind)``. A record is a dict with ``title`` and
``rationale``; ``files_affected`` and ``tags`` only count as evidence of a shared subject.
Three rules (modules of this package), each naming the phrases it rests on:

* ``replaces`` / ``forbids`` (:mod:`.negation`): one record negates what the other affirms;
* ``setting_value`` (:mod:`.values`): the same setting with different values;
* ``polarity`` (:mod:`.polarity`): opposite stances on the same subject.

Records whose titles are about different numbered items of one kind ("Bug 191 is fixed …" /
"Bug 221 is fixed …", :func:`different_items`) are about different things: never a
contradiction. An item only cited ("Fixes #12: use Redis", "(fixes bug 191)", "PR 88 sets the
timeout to 30 s") or chosen ("Use RFC 9110") is not what a title is about
(``words.identifiers``). Titles state decisions and rationales often mention the old state, so
title evidence counts more. Confidence is the best finding's strength × (0.4 + 0.6 ×
subject), where subject is how much the records share a topic (the embedding cosine mapped
from [0.25, 0.60] to [0, 1] when known, else word overlap; +0.15 for a shared file, +0.1 for a
shared tag), plus 0.05 for each other rule that agrees. Measured on bench/data/contradictions
(``neuralmind eval contradictions``). Stdlib only, pure and stateless.
"""

from __future__ import annotations

from typing import NamedTuple

from plugins.memory.detector.negation import find_negations, rule_negation
from plugins.memory.detector.polarity import rule_polarity
from plugins.memory.detector.values import rule_settings
from plugins.memory.detector.words import (GENERIC, Doc, identifiers, other_items, parse,
                                            share_salience)

THRESHOLD = 0.5


class Verdict(NamedTuple):
    is_contradiction: bool
    confidence: float
    explanation: str
    kind: str | None


def _subject(ra: dict, rb: dict, da: Doc, db: Doc, cosine: float | None) -> float:
    """How much the two records are about the same thing, 0..1."""
    if cosine is not None:
        s = (cosine - 0.25) / (0.6 - 0.25)
    else:
        wa = {t.key for t in da.toks if t.content and t.low not in GENERIC}
        wb = {t.key for t in db.toks if t.content and t.low not in GENERIC}
        s = len(wa & wb) / max(1, min(len(wa), len(wb))) * 2.5
    if set(ra.get("files_affected") or []) & set(rb.get("files_affected") or []):
        s += 0.15
    if set(ra.get("tags") or []) & set(rb.get("tags") or []):
        s += 0.1
    return max(0.0, min(1.0, s))


def findings(a: dict, b: dict) -> list[tuple[float, str, str]]:
    """Every (strength, kind, explanation) the rules find for the pair, strongest first."""
    da, db = parse(a), parse(b)
    share_salience(da, db)
    find_negations(da)
    find_negations(db)
    out = rule_negation(da, db) + rule_settings(a, b, da, db) + rule_polarity(da, db)
    return sorted(out, key=lambda f: -f[0]), da, db


def title_items(record: dict) -> frozenset:
    """The numbered items (kind, number) a record's title is about."""
    title = parse({"title": record.get("title")})
    return frozenset().union(*(identifiers(cl)[1] for cl in title.clauses))


def different_items(a: dict, b: dict) -> str | None:
    """When the two titles are about different numbered items of one kind ("Bug 191 is fixed in
    the parser" / "Bug 221 is fixed in the parser"), the records are about different things,
    whatever else they share: "A 'bug 191' vs B 'bug 221'". Items a title only cites
    ("Fixes #12: …", "…, see #12") do not count. Else None."""
    ia, ib = title_items(a), title_items(b)
    if not other_items(ia, ib):
        return None
    named = [", ".join(f"'{k} {n}'" if k != "#" else f"'#{n}'" for k, n in sorted(x))
             for x in (ia, ib)]
    return f"A {named[0]} vs B {named[1]}"


def detect(a: dict, b: dict, cosine: float | None = None, threshold: float = THRESHOLD) -> Verdict:
    """Can records ``a`` and ``b`` both hold? ``cosine`` is their embedding similarity, if known."""
    found, da, db = findings(a, b)
    if not found:
        return Verdict(False, 0.0, "no conflicting phrases found", None)
    if apart := different_items(a, b):
        return Verdict(False, 0.0, f"about different items: {apart}", None)
    subject = _subject(a, b, da, db, cosine)
    strength, kind, why = found[0]
    bonus = 0.05 * (len({k for _, k, _ in found}) - 1)  # different rules agreeing
    confidence = round(min(1.0, strength * (0.4 + 0.6 * subject) + bonus), 3)
    extra = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return Verdict(confidence >= threshold, confidence, why + extra, kind)
