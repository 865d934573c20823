"""Words and records as the rules read them: tokens with a normalised and a stemmed key,
whether each names a thing (a product, an identifier, an acronym, a version, a literal), and
clauses. The per-word functions are memoised: the same words recur in every record."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from functools import lru_cache

STOP = frozenset("""a about above after again against all also am an and any are as at be because
been before being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers him his how i if in into is it its itself just
me more most my no nor not now of off on once only or other our ours out over own same she should
so some such than that the their theirs them then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you
your yours let lets get gets got via per every""".split())

# Words too common in engineering decisions to identify a subject on their own.
GENERIC = frozenset("""use uses used using make makes made keep kept run runs running set sets
new old current default defaults instead rather platform platforms system systems service
services team teams code data thing things way ways need needs needed want wants work works
support supported decision decisions record records project projects app apps application
applications user users people time times value values change changes changed one two three
least most more less only just now still already also first next last each every all any
same other another own based like well good better best etc via per option options case cases
part parts level levels type types number numbers kind kinds available able""".split())

NUMBER_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
                "fifteen": 15, "twenty": 20, "thirty": 30, "sixty": 60, "hundred": 100}

UNITS = {  # unit word -> (dimension, factor to the base unit)
    "ms": ("time", 0.001), "millisecond": ("time", 0.001), "milliseconds": ("time", 0.001),
    "s": ("time", 1), "sec": ("time", 1), "secs": ("time", 1), "second": ("time", 1),
    "seconds": ("time", 1), "min": ("time", 60), "mins": ("time", 60), "minute": ("time", 60),
    "minutes": ("time", 60), "h": ("time", 3600), "hr": ("time", 3600), "hrs": ("time", 3600),
    "hour": ("time", 3600), "hours": ("time", 3600), "day": ("time", 86400),
    "days": ("time", 86400), "week": ("time", 604800), "weeks": ("time", 604800),
    "month": ("time", 2629800), "months": ("time", 2629800), "year": ("time", 31557600),
    "years": ("time", 31557600), "kb": ("size", 1e3), "mb": ("size", 1e6), "gb": ("size", 1e9),
    "kib": ("size", 1024), "mib": ("size", 1024 ** 2), "gib": ("size", 1024 ** 3),
    "%": ("ratio", 0.01), "percent": ("ratio", 0.01),
}

TOKEN = re.compile(
    r"'[^']{1,40}'|\"[^\"]{1,40}\"|`[^`]{1,40}`"        # quoted literals
    r"|\d+(?:[.,]\d+)*(?:/\d+)?%?"                       # numbers, versions, 600,000, CIDRs
    r"|[A-Za-z_*<>{}$][\w.*<>{}$/+#-]*[\w*>}+#]"         # words, identifiers: Node.js, a_b, ci/cd
    r"|[A-Za-z]"
)
CLAUSE_END = re.compile(r"[.;:!?](?=\s|$)|\s[-\u2013\u2014]\s")
PARENS = re.compile(r"[()]")
SIGN_IN = re.compile(r"\b(?:sign|log)(?:s|ed|ing)?[ -](?:in|on)\b", re.I)
# "one-hour", "32-bit", "five-minute": a number glued to a unit
NUM_HYPHEN = re.compile(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")-([a-z]+)\b", re.I)


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match plural and verb forms of plain words."""
    for suf, rep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if len(word) > len(suf) + 3 and word.endswith(suf) and not word.endswith("ss"):
            return word[: -len(suf)] + rep
    return word


# spellings of one thing
SYNONYMS = {"ssl": "tls", "k8s": "kubernetes", "postgres": "postgresql", "pg": "postgresql",
            "js": "javascript", "ts": "typescript", "py": "python", "gh": "github",
            "ci/cd": "cicd", "mins": "minutes", "secs": "seconds"}


@lru_cache(maxsize=65_536)
def norm(raw: str) -> str:
    w = raw.strip("'\"`").lower()
    if re.fullmatch(r"[a-z]+(?:-[a-z]+)+", w) and not w.startswith(("non-", "un-")):
        w = w.replace("-", "")  # read-only == readonly, auto-accept == autoaccept
    return SYNONYMS.get(w, w)


# first halves of ordinary English hyphenated words (read-only, self-hosted, multi-cluster)
WORD_PREFIXES = frozenset("""self non multi re co pre post read auto well high low long short full
half third one two three single double cross semi sub super inter intra anti over under out in up
down off on mid near far left right built hand opt end top day week year real near open close
client server user per de un dry hard soft wide fine coarse large small fast slow""".split())


@dataclass
class Tok:
    raw: str
    low: str          # normalised
    key: str          # stemmed form used for matching
    salient: bool     # a named thing: product, identifier, acronym, version, literal
    content: bool     # not a stopword
    title: bool
    pos: int
    gap: str = ""     # what stands between the previous token and this one: '#' in "#12"


@lru_cache(maxsize=65_536)
def is_name(raw: str, first_in_clause: bool) -> bool:
    if raw[0] in "'\"`" or any(c.isdigit() for c in raw) or re.search(r"[_./#+*<>]", raw[1:]):
        return True
    if raw.count("-") >= 2:
        return True  # yyyy-mm-dd, x-frame-options
    if "-" in raw and raw.split("-", 1)[0].lower() not in WORD_PREFIXES:
        return True  # node-fetch, asset-master: a compound without an English prefix is a name
    if len(raw) >= 2 and raw.isupper():
        return True  # acronym
    if re.search(r"[a-z][A-Z]", raw):
        return True  # ReadOnly, ElastiCache, kOps
    return raw[0].isupper() and not first_in_clause and raw.lower() not in STOP


@dataclass
class Span:
    cue: str
    kind: str            # replaces | forbids
    toks: list[Tok]
    verb_negation: bool  # "not X", "no longer X": the first word may be a verb
    quals: list[Tok] = field(default_factory=list)  # "X that rely on Y": Y narrows what is negated


@dataclass
class Doc:
    toks: list[Tok]
    clauses: list[list[Tok]]
    neg: list[Span] = field(default_factory=list)
    neg_idx: set[int] = field(default_factory=set)   # positions of tokens inside negated spans
    complaint_idx: set[int] = field(default_factory=set)  # tokens of clauses that report a problem

    def affirmed(self, salient_only: bool = False, title_only: bool = False) -> set[str]:
        return {t.key for t in self.toks
                if t.pos not in self.neg_idx and t.pos not in self.complaint_idx and t.content
                and (t.salient or not salient_only) and (t.title or not title_only)}

    def bigrams(self) -> set[tuple[str, str]]:
        out = set()
        for cl in self.clauses:
            words = [t for t in cl if t.content and t.low not in GENERIC]
            for x, y in itertools.pairwise(words):
                if y.pos - x.pos <= 2 and x.pos not in self.neg_idx and y.pos not in self.neg_idx:
                    out.add((x.key, y.key))
        return out


# Nouns for things a system files one by one under a number: a tracker's bugs, issues, tickets,
# pull and merge requests, tasks, stories, epics, incidents and defects; a CI system's
# jobs and builds; a shop's orders, invoices, receipts, shipments, customers and accounts; a
# register's RFCs, PEPs and ADRs; the items, records, entries and rows of a list. The number
# right after one of them (singular: "bugs 191" is a count) picks one item out of many: it
# names what is talked about and sets nothing. These are a closed class; the nouns whose number
# IS a setting (port 8080, protocol 4, pool size 20), the numbered steps of a sequence, which
# say when (release 12, sprint 14, phase 2), and the product names numbered by version
# (PostgreSQL 14, npm 7) are open classes no list could hold, so a number right after any other
# word is still read as a value. ("case" is left out: "in case 3 nodes fail" counts nodes; an
# imperative "Order 2 GPUs" is read as order 2, a missed setting rather than a false conflict.)
IDENTIFIER_NOUNS = frozenset("""bug issue ticket pr mr task story epic incident defect job build
order invoice receipt shipment customer account rfc pep adr item record entry row""".split())
NUMBERING = frozenset({"number", "no", "nr"})  # "ticket number 12"
# a noun under one of these is any item, not a named one: "give each task 2 CPUs" counts CPUs
QUANTIFIERS = frozenset({"a", "an", "each", "every", "per", "any"})
# after the number, what makes it an amount: "invoice 500 EUR", "issue 3 tokens per user"
CURRENCIES = frozenset("""eur usd gbp chf jpy cny inr cad aud sek nok dkk pln euro euros dollar
dollars pound pounds yen cent cents""".split())
COPULAS = frozenset({"is", "are", "was", "were", "be", "been"})  # "uploads are retried 3 times"
# what a decision does to a setting ("PR 88 sets the timeout to 30 s")
SETTING_VERBS = frozenset("""set sets raise raises lower lowers increase increases decrease
decreases reduce reduces bump bumps change changes switch switches cap caps limit limits enable
enables disable disables pin pins move moves adopt adopts introduce introduces configure
configures default defaults""".split())
# a number after these is the one chosen ("Use RFC 9110", "Follow PEP 8") ...
CHOOSE = frozenset("""use uses pin pins adopt adopts require requires follow follows target
targets choose chooses prefer prefers select selects""".split())
# ... and after "to" in a clause holding one of these ("Pin the image to build 20240101")
CHOOSE_TO = frozenset("""pin pins pinned set sets switch switches switched upgrade upgrades
upgraded downgrade downgrades downgraded move moves moved migrate migrates migrated bump bumps
bumped update updates updated change changes changed roll rolls rolled revert reverts
reverted""".split())
# words that cite an item rather than talk about it: "…, see #12", "per #7", "After incident 7,
# set …"; and a tracker's closing keywords, which cite when set off from the claim ("Fixes #12:
# use Redis", "Enable keep-alive (fixes bug 191)", "…, fixes #12") but open a claim about the
# item ("Fix bug 191 before the 2.4 release"). Not "fixed"/"closed": "Bug 191 is fixed".
REFERS = frozenset("see refs ref re cf per after following".split())
CLOSES = frozenset("fix fixes close closes resolve resolves address addresses".split())
CITING = REFERS | CLOSES
# whose number cites when it does something to a setting: a change request or decision record
CHANGES = frozenset({"pr", "mr", "adr"})
# things a team picks one of by number ("Build 1234 is the release candidate"); a tracker's
# item described ("Bug 191 is the crash in the parser") stays what the clause is about
PICKED = frozenset({"build", "rfc", "pep"})


def _amount(cl: list[Tok], i: int) -> bool:
    """The number at ``cl[i]`` counts or measures: a unit, a currency or "times" after it, or
    "per" one word on ("order 3 days", "invoice 500 EUR", "issue 3 tokens per user")."""
    nxt = cl[i + 1].low if i + 1 < len(cl) else ""
    return (nxt in UNITS or nxt in CURRENCIES or nxt in ("times", "per")
            or (i + 2 < len(cl) and cl[i + 2].low == "per"))


def _chosen(cl: list[Tok], j: int, i: int) -> bool:
    """The item ``cl[j..i]`` is the value a clause picks, not what it is about: after a choice
    verb ("Use RFC 9110", "Pin the image to build 20240101"), after "is the" ("The release
    candidate is build 1234"), or before it when picked by number (``PICKED``: "Build 1234 is
    the release candidate", never "Bug 191 is the crash in the parser")."""
    k = j - 1
    if k >= 0 and cl[k].low == "the":
        k -= 1
    if k >= 0 and (cl[k].low in CHOOSE or cl[k].low in COPULAS
                   or (cl[k].low == "to" and any(c.low in CHOOSE_TO for c in cl[:k]))):
        return True
    return (cl[j].low in PICKED and i + 2 < len(cl) and cl[i + 1].low in COPULAS
            and cl[i + 2].low == "the")


def _in_parens(cl: list[Tok], j: int) -> bool:
    """``cl[j]`` stands inside a parenthesis opened earlier in the clause and not yet closed."""
    for k in range(j, -1, -1):
        g = cl[k].gap
        if "(" in g or ")" in g:
            return g.rfind("(") > g.rfind(")")
    return False


def _cited(cl: list[Tok], j: int, i: int, spans: set[int]) -> bool:
    """The item ``cl[j..i]`` files or cites the clause rather than being what it is about: in
    parentheses ("Raise the timeout to 60 s (#341)", "(fixes bug 191)"), after a citing word
    ("…, see #12 and #14", "Use Redis, fixes #12"; a closing keyword only after the claim), or
    a change request doing something to a setting ("PR 88 sets the request timeout to 30 s")."""
    if cl[j].low in CHANGES and i + 1 < len(cl) and cl[i + 1].low in SETTING_VERBS:
        return True
    if _in_parens(cl, j):
        return True
    k = j - 1
    while k >= 0 and (k in spans or cl[k].low in ("and", "or")):  # "#12 and #14"
        k -= 1
    return k >= 0 and (cl[k].low in REFERS or (cl[k].low in CLOSES and k > 0))


def identifiers(cl: list[Tok]) -> tuple[set[int], frozenset]:
    """The whole numbers of a clause that identify a numbered item (never a value), and the items
    (kind, number) the clause is about. An identifier is written right after its noun ("bug 191",
    "PR 88", "ticket number 12", "issue #12") or after '#' (kind "#" with no such noun: "fixes
    #12"); anything else between ("ticket=12", "ticket > 12", "is"), an amount after ("order 3
    days", "invoice 500 EUR", "retry the job 3 times"), a quantifier before ("each task 2 CPUs")
    or a choice ("Use RFC 9110", "Build 1234 is the release candidate") leaves the number a
    value. An identifier that only files or cites the clause is not what it is about (see
    ``_cited``), nor is one in a clause made of nothing else ("ADR 12: Use Jenkins", "Bug 191
    fix: …")."""
    found: list[tuple[int, int]] = []  # (start, number) of each identifier
    for i, t in enumerate(cl):
        hashed = t.gap in ("#", "(#", "[#")  # not a Markdown heading: "## 3 replicas"
        if not t.raw.isdigit() or not (hashed or not t.gap) or _amount(cl, i):
            continue
        j = i - 1
        if j > 0 and not t.gap and cl[j].low in NUMBERING and not cl[j].gap:
            j -= 1
        noun = (j >= 0 and t.gap in ("", "#") and cl[j].low in IDENTIFIER_NOUNS
                and not (j > 0 and cl[j - 1].low in QUANTIFIERS))
        if noun and not t.gap and _chosen(cl, j, i):
            continue
        if noun or hashed:
            found.append((j if noun else i, i))
    spans = {k for j, i in found for k in range(j, i + 1)}
    if all(k in spans or t.low in CITING or t.low in ("and", "or") for k, t in enumerate(cl)):
        return {i for _, i in found}, frozenset()  # a label: "ADR 12", "Fixes #12", "Bug 191 fix"
    items = {(cl[j].low if j < i else "#", cl[i].raw) for j, i in found
             if not _cited(cl, j, i, spans)}
    return {i for _, i in found}, frozenset(items)


def other_items(x: frozenset, y: frozenset) -> bool:
    """Both name items of one kind and none in common: ticket 12 and ticket 13, not ticket 12
    and PR 88 (a PR may be ticket 12's fix)."""
    return not (x & y) and bool({k for k, _ in x} & {k for k, _ in y})


def parse(record: dict) -> Doc:
    toks: list[Tok] = []
    clauses: list[list[Tok]] = []
    for text, is_title in ((record.get("title") or "", True), (record.get("rationale") or "", False)):
        text = NUM_HYPHEN.sub(r"\1 \2", text)
        text = SIGN_IN.sub("login", text)
        # a title's parentheses are kept (no token holds them) so that an identifier knows it
        # is cited in parentheses: "Raise the timeout to 60 s (#341)"
        text = text if is_title else PARENS.sub(". ", text)
        for chunk in CLAUSE_END.split(text):
            cl: list[Tok] = []
            end = 0
            for m in TOKEN.finditer(chunk):
                raw = m.group(0)
                low = norm(raw)
                gap, end = chunk[end:m.start()].strip(), m.end()
                if not low:
                    continue
                literal = raw[0] in "'\"`" or any(c.isdigit() for c in raw)
                key = low if literal or not low.isalpha() else stem(low)
                t = Tok(raw, low, key, is_name(raw, not cl), low not in STOP, is_title, len(toks),
                        gap)
                cl.append(t)
                toks.append(t)
            if cl:
                clauses.append(cl)
    return Doc(toks, clauses)


def share_salience(da: Doc, db: Doc) -> None:
    """A word written as a name anywhere in either record is a name everywhere (kops / kOps)."""
    names = {t.key for d in (da, db) for t in d.toks if t.salient and t.low.isalpha()}
    for d in (da, db):
        for t in d.toks:
            if t.key in names and t.content and t.low not in GENERIC:
                t.salient = True


def prefix_match(x: str, y: str) -> bool:
    if x == y:
        return True
    if x.isalpha() and y.isalpha() and min(len(x), len(y)) >= 4 and abs(len(x) - len(y)) <= 4:
        return x.startswith(y) or y.startswith(x)
    return False


def among(key: str, keys: set[str]) -> bool:
    return any(prefix_match(key, k) for k in keys)


