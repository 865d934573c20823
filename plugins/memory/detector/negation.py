"""Rule ``replaces`` / ``forbids``: one record negates what the other affirms ("instead of X",
"replace X", "stop using X", "X is deprecated", "no longer X" … against a record that uses X).

:func:`find_negations` marks each record's negated spans (and its clauses that complain or
prohibit, which endorse nothing); :func:`rule_negation` pairs them with the other record."""

from __future__ import annotations

import itertools

from plugins.memory.detector.words import GENERIC, STOP, Doc, Span, Tok, among, prefix_match

# cue (lower-case word sequence) -> kind; the negated object follows the cue
PREFIX_CUES = {
    ("instead", "of"): "replaces", ("rather", "than"): "replaces", ("in", "place", "of"): "replaces",
    ("replace",): "replaces", ("replaces",): "replaces", ("replacing",): "replaces",
    ("swap",): "replaces", ("move", "from"): "replaces", ("moves", "from"): "replaces",
    ("migrate", "from"): "replaces", ("switch", "from"): "replaces", ("away", "from"): "replaces",
    ("retire",): "replaces", ("retires",): "replaces", ("retiring",): "replaces",
    ("decommission",): "replaces", ("deprecate",): "replaces", ("phase", "out"): "replaces",
    ("over",): "replaces",
    ("drop",): "forbids", ("drops",): "forbids", ("dropping",): "forbids",
    ("remove",): "forbids", ("removes",): "forbids", ("removing",): "forbids",
    ("avoid",): "forbids", ("stop", "using"): "forbids", ("stop",): "forbids",
    ("no", "longer"): "forbids", ("not",): "forbids", ("no",): "forbids", ("never",): "forbids",
    ("without",): "forbids", ("forbid",): "forbids", ("disallow",): "forbids", ("ban",): "forbids",
    ("revoke",): "forbids", ("disable",): "forbids",
}
VERB_NEGATORS = {("no", "longer"), ("not",), ("never",)}
# state words that negate what precedes them: "X is deprecated", "X are decommissioned"
POSTFIX_CUES = {"deprecated": "replaces", "retired": "replaces", "removed": "forbids",
                "superseded": "replaces", "decommissioned": "replaces", "sunset": "replaces",
                "dropped": "forbids", "rejected": "forbids", "unsupported": "forbids",
                "replaced": "replaces", "retirement": "replaces", "out": "replaces"}
LINKS = {"is", "are", "was", "were", "be", "being", "been", "get", "gets", "now", "due", "for",
         "phased", "will", "then", "also"}
BOUNDARY = {"with", "for", "to", "in", "on", "at", "by", "because", "since", "so", "which", "that",
            "while", "but", "when", "where", "as", "if", "unless", "until", "after", "before",
            "is", "are", "was", "were", "will", "should", "must", "can", "cannot", "from", "into",
            "per", "across", "within", "between", "against", "like", "than", "during", "without"}
# negating a problem ("stop descriptor leaks", "avoid outages") agrees with naming the problem
PROBLEMS = {"leak", "leaks", "leaking", "outage", "outages", "incident", "incidents", "drift", "risk",
            "risks", "failure", "failures", "bug", "bugs", "error", "errors", "breakage", "downtime",
            "vulnerability", "vulnerabilities", "attack", "attacks", "abuse", "problem", "problems",
            "issue", "issues", "crash", "crashes", "confusion", "overhead", "toil", "waste", "pain",
            "burden", "limitation", "limitations", "bottleneck"}
# words that report trouble with something: a clause holding one does not endorse what it names
COMPLAINTS = {"stressful", "painful", "fragile", "unreliable", "flaky", "errorprone", "broke", "breaks",
              "broken", "hurt", "hurts", "slow", "slows", "costly", "expensive", "dangerous", "flaws",
              "stale", "unmaintained", "brittle", "clashes", "clash", "conflict", "conflicts", "lacks",
              "limited"}
PROHIBITIONS = {"not", "never", "cannot", "don't", "mustn't", "shouldn't", "won't", "can't"}
FILLER = {"using", "use", "the", "a", "an", "our", "any", "longer", "more", "new", "just", "only",
          "its", "their", "support", "access"}


def _object(cl: list[Tok], start: int, limit: int = 6) -> list[Tok]:
    out: list[Tok] = []
    i = start
    # "remove support for X", "stop the use of X": skip a filler head and its preposition
    while i < len(cl) and cl[i].low in FILLER:
        i += 1
        if i < len(cl) and cl[i].low in ("for", "of"):
            i += 1
    while i < len(cl) and len(out) < limit:
        t = cl[i]
        if t.low in BOUNDARY:
            break
        if t.low in ("and", "or", ","):
            nxt = cl[i + 1] if i + 1 < len(cl) else None
            if nxt is None or not (nxt.salient or nxt.low[0].isdigit()):
                break
        out.append(t)
        i += 1
    return out


def _relative(cl: list[Tok], obj: list[Tok]) -> list[Tok]:
    """The relative clause right after an object: "integrations that rely on web scraping"."""
    i = obj[-1].pos - cl[0].pos + 1
    if i < len(cl) and cl[i].low in ("that", "which", "who", "whose"):
        return [t for t in cl[i + 1:i + 8] if t.content and t.low not in GENERIC]
    return []


# cues by their first word, longest first ("no longer" before "no")
CUES_BY_FIRST: dict[str, list[tuple[tuple[str, ...], str]]] = {}
for _cue, _kind in sorted(PREFIX_CUES.items(), key=lambda kv: -len(kv[0])):
    CUES_BY_FIRST.setdefault(_cue[0], []).append((_cue, _kind))


def find_negations(doc: Doc) -> None:
    for cl in doc.clauses:
        # a rationale clause that complains or prohibits does not endorse what it names:
        # "kOps upgrades have been stressful", "... must not use a non-GOV.UK domain"
        if not cl[0].title and any(t.low in PROBLEMS or t.low in COMPLAINTS or t.low in PROHIBITIONS
                                   for t in cl):
            doc.complaint_idx.update(t.pos for t in cl)
    for cl in doc.clauses:
        words = [t.low for t in cl]
        for i in range(len(cl)):
            for cue, kind in CUES_BY_FIRST.get(words[i], ()):
                n = len(cue)
                if tuple(words[i:i + n]) != cue:
                    continue
                if cue == ("over",) and (i == 0 or words[i - 1] in STOP or not cl[i - 1].salient):
                    break  # "prefer A over B": only right after a name
                if cue == ("not",) and i + 1 < len(cl) and words[i + 1] in ("only", "just"):
                    break
                obj = _object(cl, i + n)
                if obj:
                    doc.neg.append(Span(" ".join(cue), kind, obj, cue in VERB_NEGATORS, _relative(cl, obj)))
                break
            if words[i] in POSTFIX_CUES:
                if words[i] == "out" and (i == 0 or words[i - 1] != "phased"):
                    continue
                j = i - 1
                while j >= 0 and words[j] in LINKS:
                    j -= 1
                if j == i - 1 and words[i] not in ("deprecated", "superseded", "decommissioned", "sunset"):
                    continue  # "removed X" is a verb; the state reading needs "X is removed"
                subj: list[Tok] = []
                while j >= 0 and len(subj) < 5 and words[j] not in BOUNDARY and words[j] not in ("and", "or"):
                    subj.insert(0, cl[j])
                    j -= 1
                subj = [t for t in subj if t.low not in ("the", "a", "an", "our", "its", "their")]
                if subj:
                    doc.neg.append(Span(words[i], POSTFIX_CUES[words[i]], subj, False))
    doc.neg_idx = {t.pos for s in doc.neg for t in s.toks}


def _conjuncts(toks: list[Tok]) -> list[list[Tok]]:
    """"React.FC and React.SFC" -> [React.FC], [React.SFC]."""
    out, cur = [], []
    for t in toks:
        if t.low in ("and", "or", ","):
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        out.append(cur)
    return out


def _stance_counts(doc: Doc, key: str) -> tuple[int, int, bool]:
    """(affirmed mentions, negated mentions, affirmed in the title) of a key in a record."""
    aff = neg = 0
    title = False
    for t in doc.toks:
        if not t.content or not prefix_match(t.key, key):
            continue
        if t.pos in doc.neg_idx:
            neg += 1
        elif t.pos not in doc.complaint_idx:
            aff += 1
            title = title or t.title
    return aff, neg, title


def rule_negation(da: Doc, db: Doc) -> list[tuple[float, str, str]]:
    """One record negates what the other affirms. Returns (strength, kind, explanation)."""
    found = []
    for neg_doc, other, nlab, olab in ((da, db, "A", "B"), (db, da, "B", "A")):
        other_words = {t.key for t in other.toks if t.content}
        other_names = other.affirmed(salient_only=True)
        other_title = other.affirmed(title_only=True)
        other_bi = other.bigrams()
        self_bi = neg_doc.bigrams()
        other_negated = {t.key for s in other.neg for t in s.toks if t.content and t.low not in GENERIC}
        for span in neg_doc.neg:
            for part in _conjuncts(span.toks):
                hits = _negation_hits(span, part, neg_doc, other, other_words, other_names, other_title,
                                      other_bi, self_bi, other_negated)
                if hits:
                    strength = 0.9 if span.toks[0].title else 0.75
                    phrase = " ".join(t.raw for t in span.toks)
                    found.append((strength, span.kind,
                                  f"{nlab} says '{span.cue} {phrase}' while {olab} affirms "
                                  f"{', '.join(dict.fromkeys(hits))}"))
                    break
    return found


def _negation_hits(span, part, neg_doc, other, other_words, other_names, other_title, other_bi,
                   self_bi, other_negated) -> list[str]:
    words = [t for t in part if t.content and t.low not in GENERIC]
    if not words or any(t.low in PROBLEMS for t in words):
        return []
    # both records negate the same thing: they agree
    if any(among(t.key, other_negated) for t in words + span.quals):
        return []
    # "no X that rely on Y": the other record must be about Y too
    if span.quals and not any(among(t.key, other.affirmed()) for t in span.quals):
        return []
    if span.verb_negation and not words[0].salient and part[0] is span.toks[0]:
        # "no longer inherit X": the negated thing is the verb; the other must use it too
        if not among(words[0].key, other.affirmed()):
            return []
    # the negated thing is the head ("remove the ECR lifecycle *policy*", "the dedicated load
    # balancer *tier*") and most of the phrase: the other record must mention them too
    head = [t for t in part if t.content and t.low not in FILLER]
    if len(head) > 1 and not among(head[-1].key, other_words):
        return []
    if sum(among(t.key, other_words) for t in head) * 3 < len(head) * 2:
        return []
    hits = []
    for t in words:
        if t.salient and among(t.key, other_names):
            aff, neg, in_title = _stance_counts(neg_doc, t.key)
            if not in_title and aff <= neg:  # the negating record does not itself endorse it
                hits.append(t.raw)
    for x, y in itertools.pairwise(words):
        if (x.key, y.key) in other_bi and (x.key, y.key) not in self_bi:
            hits.append(f"{x.raw} {y.raw}")
    if not hits and (span.toks[0].title or span.cue in POSTFIX_CUES):
        # between titles, or "X is retired/deprecated" against a title naming X: plain words count
        plain = [t for t in words if not t.salient]
        matched = [t.raw for t in plain if among(t.key, other_title)]
        if matched and len(matched) >= min(2, len(plain)):
            hits.extend(matched)
    return hits


