"""Rule ``polarity``: the same subject with opposite poles — enable/disable, allow/forbid,
public/private, keep/retire, supported/unsupported, pinned/latest … on a shared name or two
shared words. A clause that compares ("older than 3.40.1 are not supported") is skipped."""

from __future__ import annotations

from dataclasses import dataclass

from plugins.memory.detector.words import GENERIC, Doc, among

POLES = {  # word -> (concept, pole)
    "enable": ("enable", 1), "enables": ("enable", 1), "enabled": ("enable", 1),
    "disable": ("enable", -1), "disables": ("enable", -1), "disabled": ("enable", -1),
    "allow": ("allow", 1), "allows": ("allow", 1), "allowed": ("allow", 1), "permit": ("allow", 1),
    "may": ("allow", 1), "grant": ("allow", 1),
    "forbid": ("allow", -1), "deny": ("allow", -1), "block": ("allow", -1), "prohibit": ("allow", -1),
    "disallow": ("allow", -1), "revoke": ("allow", -1), "ban": ("allow", -1),
    "public": ("public", 1), "private": ("public", -1),
    "shared": ("shared", 1), "dedicated": ("shared", -1),
    "keep": ("keep", 1), "keeps": ("keep", 1), "retain": ("keep", 1), "reintroduce": ("keep", 1),
    "add": ("keep", 1), "introduce": ("keep", 1), "adopt": ("keep", 1), "continue": ("keep", 1),
    "retire": ("keep", -1), "drop": ("keep", -1), "remove": ("keep", -1), "decommission": ("keep", -1),
    "deprecate": ("keep", -1), "revert": ("keep", -1), "abandon": ("keep", -1),
    "supported": ("support", 1), "support": ("support", 1), "unsupported": ("support", -1),
    "inheritable": ("inherit", 1), "non-inheritable": ("inherit", -1),
    "synchronous": ("sync", 1), "asynchronous": ("sync", -1),
    "mutable": ("mutable", 1), "immutable": ("mutable", -1),
    "required": ("required", 1), "optional": ("required", -1),
    "manual": ("manual", 1), "automatic": ("manual", -1), "automatically": ("manual", -1),
    "naive": ("aware", -1), "aware": ("aware", 1),
    "eager": ("eager", 1), "lazy": ("eager", -1), "lazily": ("eager", -1), "eagerly": ("eager", 1),
    "pin": ("pin", 1), "pinned": ("pin", 1), "pinning": ("pin", 1),
    "latest": ("pin", -1), "newest": ("pin", -1), "floating": ("pin", -1),
}
NEGATORS = {"not", "no", "never", "without", "longer", "don't", "won't", "isn't", "aren't"}
# a clause that compares ("older than X are not supported") states a condition, not a stance
COMPARATIVE = {"than", "older", "newer", "earlier", "later", "below", "above", "least", "most"}


@dataclass
class Stance:
    concept: str
    pole: int
    word: str
    obj: set[str]
    names: set[str]
    title: bool


def stances(doc: Doc) -> list[Stance]:
    out = []
    for cl in doc.clauses:
        words = [t.low for t in cl]
        if COMPARATIVE & set(words):
            continue
        for i, t in enumerate(cl):
            entry = POLES.get(t.low)
            if not entry:
                continue
            concept, pole = entry
            if NEGATORS & set(words[max(0, i - 3):i]):
                pole = -pole
            obj = [u for j, u in enumerate(cl) if j != i and u.content and u.low not in GENERIC
                   and u.low not in POLES and u.low not in NEGATORS]
            out.append(Stance(concept, pole, t.raw, {u.key for u in obj},
                              {u.key for u in obj if u.salient}, t.title))
        # a bare "No X" without a polar word: X is not kept
        if words[0] == "no" and not any(w in POLES for w in words):
            obj = [u for u in cl[1:] if u.content and u.low not in GENERIC]
            out.append(Stance("keep", -1, "no", {u.key for u in obj}, {u.key for u in obj if u.salient},
                              cl[0].title))
    return out


def _overlap(x: set[str], y: set[str]) -> set[str]:
    return {a for a in x if among(a, y)}


def rule_polarity(da: Doc, db: Doc) -> list[tuple[float, str, str]]:
    found = []
    sa, sb = stances(da), stances(db)
    pa = {(s.concept, s.pole) for s in sa}
    pb = {(s.concept, s.pole) for s in sb}
    for x in sa:
        for y in sb:
            if x.concept != y.concept or x.pole == y.pole:
                continue
            both_titles = x.title and y.title
            # a record that holds both poles of a concept is ambiguous, unless titles disagree
            if not both_titles and ((x.concept, -x.pole) in pa or (y.concept, -y.pole) in pb):
                continue
            shared = _overlap(x.obj, y.obj)
            if not (_overlap(x.names, y.names) or len(shared) >= 2):
                continue
            strength = 0.85 if both_titles else 0.7 if (x.title or y.title) else 0.55
            found.append((strength, "polarity",
                          f"opposite stance on {', '.join(sorted(shared))[:80]}: A '{x.word}' "
                          f"({'+' if x.pole > 0 else '-'}) vs B '{y.word}' ({'+' if y.pole > 0 else '-'})"))
    return found


