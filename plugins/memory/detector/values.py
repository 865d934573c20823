"""Rule ``setting_value``: the same key with different values — numbers with units (300 s =
5 minutes), versions, CIDRs, quoted or assigned literals (``USE_TZ = False``), counts ("one
cluster" / "multi-cluster"), and the names a title assigns to one role ("Use X as the CI
runner"). A scope word on each side (staging/production, read-only/read-write …) keeps two
settings apart; where both titles give a key a value, only the titles are compared.

A number that identifies a numbered item ("bug 191", "PR 88", "order 1234", "#12": see
``words.identifiers``) is not a value: it names what the value is about, like a scope word.
Two values whose clauses name items of one kind and none in common are about different items
(order 1234's delivery time, order 5678's) and are not one setting.

Words near two values are not enough to make them one setting: each value is also named by
its *phrase*, the words written against it ("HTTP client read_timeout = 30 s", "Retry uploads
3 times", "a 30 second read timeout") less the verbs that say what to do with it. When each
side's phrase holds a word found nowhere around the other value, the two name different
settings (read_timeout / connect_timeout) or the same setting of different subjects
(Postgres / Redis pool max_connections, uploads / webhooks retries): not one setting."""

from __future__ import annotations

import re
from dataclasses import dataclass

from plugins.memory.detector.words import (COPULAS, GENERIC, NUMBER_WORDS, SETTING_VERBS, STOP,
                                            UNITS, Doc, Tok, among, identifiers, norm,
                                            other_items, stem)

@dataclass
class Setting:
    key: set[str]         # content-word keys around the value (what the value is for)
    value: object         # normalised value
    shown: str            # the value as written
    dim: str              # cidr | literal | version | number[:unit] | time | size | ratio | count | names
    title: bool
    negated: bool         # written as the old value: "from X", "instead of X"
    aliases: frozenset = frozenset()  # for names: initials of multi-word names (Open Policy Agent -> opa)
    scope: frozenset = frozenset()    # scope words anywhere in the value's clause (read-only, staging)
    phrase: frozenset = frozenset()   # the words that name the value: its setting and subject
    items: frozenset = frozenset()    # (kind, number) of the items its clause names ("bug 191")


CIDR = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}/\d{1,2}$")
VERSION = re.compile(r"\d+(?:\.\d+){1,3}$")
NUM = re.compile(r"\d{1,3}(?:,\d{3})+$|\d+(?:\.\d+)?%?$")
QUANT = {"multi": "many", "multiple": "many", "several": "many", "single": 1, "one": 1,
         "two": 2, "three": 3}
# words naming one side of a scope: settings whose keys name different members of one group are
# about different things (read-only vs read-write role, staging vs production VPC)
SCOPES = [
    {"production", "prod", "staging", "integration", "test", "dev", "development", "preprod",
     "nonprod", "sandbox", "live", "nonlive"},
    {"readonly", "readwrite", "read+write", "write"},
    {"frontend", "backend"}, {"internal", "external"}, {"ingress", "egress"},
    {"upload", "download"}, {"minimum", "maximum", "min", "max"},
    {"primary", "replica", "secondary"}, {"amber", "red", "green"}, {"client", "server"},
]
WINDOW = 6


def _num(raw: str) -> float | None:
    low = raw.lower()
    if low in NUMBER_WORDS:
        return float(NUMBER_WORDS[low])
    if NUM.match(raw):
        return float(raw.rstrip("%").replace(",", ""))
    return None


def _context_key(cl: list[Tok], i: int, skip: int = 0) -> set[str]:
    keys = set()
    for j in range(max(0, i - WINDOW), min(len(cl), i + WINDOW + 1)):
        t = cl[j]
        if i <= j <= i + skip or not t.content or t.low in GENERIC or t.low in UNITS:
            continue
        if t.low[0].isdigit() or t.low in NUMBER_WORDS or t.low in QUANT:
            continue
        keys.add(t.key)
    return keys


# what a decision does to a setting, not part of the setting's name ("Set X", "Lower X to 5")
VERBS = SETTING_VERBS | frozenset("""use uses keep keeps make makes give gives assign assigns
require requires need needs allow allows run runs get gets have has had go goes stay stays remain
remains become becomes start starts""".split())
# words that tie a value to the phrase that names it: "X = 5", "X is 5", "X to 5", "X of 5"
LINKING = frozenset({"is", "are", "was", "were", "be", "to", "of", "at", "a", "an", "the", "now",
                     "only"})
# "... = 100 for the Redis pool", "... 5 times on webhooks": the subject written after a value
SUBJECT_PREPS = frozenset({"for", "on", "in"})
ARTICLES = frozenset({"a", "an", "the", "our", "its", "their", "each", "every", "all"})


def _phrase(cl: list[Tok], i: int, skip: int = 0) -> frozenset:
    """The words written against the value at ``cl[i]`` (and its unit, ``skip`` tokens after
    it): the run of words right before it, past a linking word ("read_timeout = 30", "TTL of
    300", "uploads are retried 3 times"), or when nothing names it there, the run right after
    it ("a 30 second read timeout"); and the subject a preposition adds after it ("= 100 for
    the Redis pool"). A stop word ends a run; verbs, generic words, units and numbers stay
    out."""
    def run(js) -> set[str]:
        out: set[str] = set()
        for j in js:
            t = cl[j]
            if t.low in COPULAS:
                continue
            if not t.content:
                break
            if not (t.low in GENERIC or t.low in VERBS or t.low in UNITS or t.low in NUMBER_WORDS
                    or t.low in QUANT or t.low[0].isdigit()):
                out.add(t.key)
        return out

    j = i - 1
    while j >= 0 and cl[j].low in LINKING:
        j -= 1
    after = i + 1 + skip
    words = run(range(j, -1, -1)) or run(range(after, len(cl)))
    if after < len(cl) and cl[after].low in SUBJECT_PREPS:
        k = after + 1
        while k < len(cl) and cl[k].low in ARTICLES:
            k += 1
        words |= run(range(k, len(cl)))
    return frozenset(words)


def _literal(v: str) -> str:
    v = v.strip("'\"`").lower()
    return v.rsplit(".", 1)[-1] if re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", v) else v


ALL_SCOPES = frozenset().union(*SCOPES)


def _values(doc: Doc) -> list[Setting]:
    out: list[Setting] = []
    for cl in doc.clauses:
        words = [t.low for t in cl]
        scope = frozenset(w for w in words if w in ALL_SCOPES)
        numbers, items = identifiers(cl)
        start = len(out)
        for i, t in enumerate(cl):
            if i in numbers:
                continue
            raw = t.raw.strip("'\"`,")
            neg = t.pos in doc.neg_idx or (i > 0 and words[i - 1] == "from")
            nxt = words[i + 1] if i + 1 < len(cl) else ""
            n_before, skip = len(out), 0  # skip: a unit written after the value
            if CIDR.match(raw):
                out.append(Setting(_context_key(cl, i), raw, raw, "cidr", t.title, neg))
            elif t.raw[0] in "'\"`":
                out.append(Setting(_context_key(cl, i), _literal(raw), raw, "literal", t.title, neg))
            elif VERSION.match(raw) and nxt not in UNITS:
                out.append(Setting(_context_key(cl, i), tuple(int(x) for x in raw.split(".")), raw,
                                   "version", t.title, neg))
            elif (n := _num(raw)) is not None and (raw[0].isdigit() or nxt in UNITS):
                unit = "%" if raw.endswith("%") else nxt
                skip = 1 if unit in UNITS or (unit and unit not in STOP and unit.isalpha()) else 0
                if unit in UNITS:
                    dim, f = UNITS[unit]
                    if i > 0 and words[i - 1] in ("every", "each", "per"):
                        dim = "period"  # "every twelve months" is a cadence, not a duration
                    out.append(Setting(_context_key(cl, i, 1), round(n * f, 6), f"{raw} {unit}", dim,
                                       t.title, neg))
                elif unit and unit not in STOP and unit.isalpha():
                    out.append(Setting(_context_key(cl, i, 1), n, f"{raw} {unit}", "number:" + stem(unit),
                                       t.title, neg))
                else:
                    out.append(Setting(_context_key(cl, i), n, raw, "number", t.title, neg))
            for st in out[n_before:]:
                st.phrase = _phrase(cl, i, skip)
            # quantities of a noun: "one cluster", "a single minor version", "multi-cluster"
            parts = t.raw.lower().split("-", 1)
            if parts[0] in QUANT and (len(parts) == 2 or parts[0] in ("one", "single", "two", "three",
                                                                       "multiple", "several")):
                noun = parts[1] if len(parts) == 2 else None
                k = i + 1
                while len(parts) == 1 and k < len(cl) and k <= i + 4 and cl[k].content:
                    if cl[k].low.isalpha() and cl[k].low not in GENERIC:
                        noun = cl[k].low
                    k += 1
                if noun:
                    out.append(Setting({stem(noun)}, QUANT[parts[0]], t.raw, "count", t.title, neg))
        for st in out[start:]:
            st.scope = scope
            st.items = items
    return out


def _at(doc: Doc, is_title: bool, key: str) -> tuple[list[Tok], int] | None:
    """Where identifier ``key`` is written in the title (or the rationale): (clause, index)."""
    for cl in doc.clauses:
        if cl[0].title != is_title:
            continue
        for i, t in enumerate(cl):
            if t.low == key:
                return cl, i
    return None


ASSIGN = re.compile(r"(?:\bset\s+)?([A-Za-z][\w.]*[A-Za-z0-9_])\s*(=|\bdefaults?\s+to\b|\bto\b)\s*"
                    r"('[^']+'|\"[^\"]+\"|[\w.:/+-]+)")


def _assignments(record: dict, doc: Doc) -> list[Setting]:
    """``KEY = VALUE``, ``KEY defaults to VALUE``, ``set KEY to VALUE`` for identifier-like keys;
    the phrase is the key with the words written against it ("Redis pool max_connections")."""
    out = []
    for text, is_title in ((record.get("title") or "", True), (record.get("rationale") or "", False)):
        for m in ASSIGN.finditer(text):
            key, op, val = m.group(1), m.group(2), m.group(3).rstrip(".,;")
            identifier = "_" in key or any(c.isdigit() for c in key)
            if op == "=" and not (identifier or key.isupper() or key.islower()):
                continue
            if op != "=" and not (identifier or m.group(0).lower().startswith("set ")):
                continue
            st = Setting({key.lower()}, _literal(val), val, "literal", is_title, False)
            where = _at(doc, is_title, norm(key))
            if where is not None:
                cl, i = where
                bare = val.strip("'\"`").lower()
                v = next((k for k in range(i + 1, min(len(cl), i + 5))
                          if cl[k].raw.strip("'\"`").lower() == bare), i + 1)
                st.phrase = _phrase(cl, v) | {cl[i].key}
                st.items = identifiers(cl)[1]
            out.append(st)
    return out


# "Use X as/for ROLE", "Format ROLE as X", "Switch ROLE to X", "ROLE through X": the names a
# title assigns to one role
VALUE_FIRST = {"use", "adopt", "introduce", "choose", "prefer", "standardise", "standardize"}
ROLE_FIRST = {"format": ("as",), "name": ("as",), "call": ("as",), "write": ("as",),
              "store": ("in", "as", "on"), "keep": ("in",), "host": ("on", "in"), "declare": ("in",),
              "switch": ("to",), "move": ("to",), "migrate": ("to",), "run": ("on", "in"),
              "build": ("with",), "deploy": ("with", "to")}
ROLE_SEPARATORS = ("through", "via", "using", "use", "uses")


def _role_assignments(doc: Doc) -> list[Setting]:
    out = []
    cl = doc.clauses[0] if doc.clauses and doc.clauses[0][0].title else []
    words = [t.low for t in cl]
    if not words:
        return out
    value: list[Tok] = []
    role: list[Tok] = []
    if words[0] in VALUE_FIRST:
        for j in range(len(words) - 1, 0, -1):
            if words[j] in ("as", "for"):
                value, role = cl[1:j], cl[j + 1:]
                break
    elif (v := next((i for i, w in enumerate(words) if w in ROLE_FIRST
                     and set(ROLE_FIRST[w]) & set(words[i + 1:])), None)) is not None:
        j = next(k for k in range(v + 1, len(words)) if words[k] in ROLE_FIRST[words[v]])
        role, value = cl[v + 1:j], cl[j + 1:]
    else:
        for sep in ROLE_SEPARATORS:
            if sep in words[1:]:
                j = words.index(sep, 1)
                role, value = cl[:j], cl[j + 1:]
                break
    names = {t.key for t in value if t.salient and t.low not in GENERIC}
    role_keys = {t.key for t in role if t.content and t.low not in GENERIC} - names
    if names and role_keys:
        caps = [t.low for t in value if t.raw[:1].isupper() and t.low.isalpha()]
        aliases = frozenset({"".join(w[0] for w in caps)} if len(caps) >= 2 else set())
        out.append(Setting(role_keys, frozenset(names), " ".join(t.raw for t in value), "names",
                           True, False, aliases))
    return out


def settings_of(record: dict, doc: Doc) -> list[Setting]:
    return _values(doc) + _assignments(record, doc) + _role_assignments(doc)


def _scope_clash(x: set[str], y: set[str]) -> bool:
    for group in SCOPES:
        gx, gy = x & group, y & group
        if gx and gy and not (gx & gy):
            return True
    return False


def _named_apart(x: Setting, y: Setting) -> bool:
    """Each value's phrase holds a word found nowhere around the other: "read_timeout" /
    "connect_timeout", "Postgres pool" / "Redis pool", "uploads" / "webhooks"."""
    around_x, around_y = _singular(x.key | x.phrase), _singular(y.key | y.phrase)
    return (any(not among(w, around_y) for w in _singular(x.phrase))
            and any(not among(w, around_x) for w in _singular(y.phrase)))


def _singular(words: set[str]) -> set[str]:
    """keys / key: the stemmer leaves short plurals alone."""
    return {w[:-1] if w.endswith("s") and not w.endswith("ss") and w.isalpha() else w
            for w in words}


def _same_key(x: Setting, y: Setting) -> bool:
    if x.dim != y.dim and {x.dim, y.dim} != {"number", "time"}:
        return False
    shared = x.key & y.key
    if not shared or _scope_clash(x.key | x.scope, y.key | y.scope):
        return False
    if other_items(x.items, y.items):  # order 1234's delivery time, order 5678's
        return False
    if _named_apart(x, y):
        return False
    if x.dim in ("names", "count", "literal"):
        return True
    return len(shared) / min(len(x.key), len(y.key)) >= 0.34


def _equal(x: Setting, y: Setting) -> bool:
    if x.dim == "names":
        if x.value & y.value:
            return True
        return bool((x.aliases | x.value) & (y.aliases | y.value))
    if x.dim == y.dim:
        return x.value == y.value
    num, unit = (x, y) if x.dim == "number" else (y, x)
    return abs(num.value - unit.value) < 1e-6 or abs(num.value * 60 - unit.value) < 1e-6


def rule_settings(ra: dict, rb: dict, da: Doc, db: Doc) -> list[tuple[float, str, str]]:
    sa, sb = settings_of(ra, da), settings_of(rb, db)
    found, seen = [], set()
    for x in sa:
        if x.negated:
            continue
        for y in sb:
            if y.negated or not _same_key(x, y):
                continue
            xs = [s for s in sa if not s.negated and _same_key(s, y)]
            ys = [s for s in sb if not s.negated and _same_key(x, s)]
            # titles state the decision; when both titles give this key a value, compare those
            if any(s.title for s in xs) and any(s.title for s in ys):
                if not (x.title and y.title):
                    continue
                xs = [s for s in xs if s.title]
                ys = [s for s in ys if s.title]
            if any(_equal(p, q) for p in xs for q in ys):
                continue
            if (x.shown, y.shown) in seen:
                continue
            seen.add((x.shown, y.shown))
            strength = 0.9 if (x.title and y.title) else 0.75 if (x.title or y.title) else 0.6
            key = ", ".join(sorted(x.key & y.key))
            found.append((strength, "setting_value",
                          f"same setting ({key}) with different values: A '{x.shown}' vs B '{y.shown}'"))
    return found


