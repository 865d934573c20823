"""The default answer, with no model to call: the sentences of the best sources that answer
the question, each cited. A sentence scores by the question's topic words it shares (weighted
by how rare they are among the candidates), by meaning when the embedder is available, and a
little by its source's rank when it shares one; the best three, at most two from one source,
are the answer. Chosen on LoCoMo dev with bench/ask_locomo.py (docs/performance-ui.md)."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from neuralmind import STOPWORDS

log = logging.getLogger("neuralmind.ask")

MAX_SENTENCES = 3
PER_SOURCE = 2
KEEP_RATIO = 0.6  # a sentence below this share of the best one's score is left out
EMBED_AT_MOST = 8  # candidate sentences given a vector (plus the question)
SENTENCE_CHARS = 400
UNRELATED = 0.3  # below this cosine, a sentence sharing no word with the question is unrelated
WORD = re.compile(r"[A-Za-z0-9]+")
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])|\n\s*\n|\n(?=\s*[-*#>] )")
VOWEL = re.compile(r"[aeiouy]")
NOTHING = "None of the sources found answers this question."


def stem(word: str) -> str:
    """A light stemmer, so that "uses", "use", "used" and "using", or "stores" and "storing",
    meet: a plural cut (-ies to -y; -s, not -ss, -us or -is), then -ing or -ed (not -eed)
    when a vowel is left, a doubled consonant undone ("logging", "log"), then a final -e."""
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    for suffix in ("ing", "ed"):
        base = word[: -len(suffix)]
        if word.endswith(suffix) and not word.endswith("eed") and len(base) >= 2 \
                and VOWEL.search(base):
            word = base[:-1] if len(base) > 3 and base[-1] == base[-2] not in "lsz" else base
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


# words of asking that name no topic ("which library do we use?", "is it ok to …?"): they
# neither count as shared nor weigh in a sentence's score
ASKING = frozenset(map(stem, "use ok okay way thing one".split()))


def terms(text: str) -> list[str]:
    """Lower-case stems (``stem``) of the words but stopwords, camelCase and snake_case
    split."""
    out = []
    for word in WORD.findall(CAMEL.sub(" ", text)):
        word = word.lower()
        if word not in STOPWORDS and len(word) >= 2:
            out.append(stem(word))
    return out


def sentences(text: str) -> list[str]:
    parts = (" ".join(p.split()) for p in SPLIT.split(text or ""))
    return [p[:SENTENCE_CHARS] for p in parts if len(WORD.findall(p)) >= 2]


def title(source: dict[str, Any]) -> str:
    """A source's title on one line: the answer is prose, a line break in a title is none."""
    return " ".join(source["title"].split())


def is_place(source: dict[str, Any]) -> bool:
    """A code symbol, whose one sentence says where it is: a documentation section is prose."""
    return source["kind"] == "code" and source.get("file_type") != "docs"


def candidates(sources: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, str]]:
    """``(source, sentence, text it is scored on)`` for every source: a code symbol is one
    sentence saying where it is; a memory or a documentation section gives its sentences."""
    out = []
    for source in sources:
        name = title(source)
        if is_place(source):
            out.append((source, f"{name} is at {source['cite']}", f"{name} {source['text'][:600]}"))
            continue
        for sentence in sentences(source["text"]) or [name]:
            out.append((source, sentence, f"{name} {sentence}"))
    return out


class Extractive:
    """An answer provider (``answer_provider``) that quotes the sources."""

    name = "extractive"
    model = None

    def __init__(self, embed: Callable[[list[str]], Any] | None = None):
        self.embed = embed

    def answer(self, question: str, sources: list[dict[str, Any]], stream: bool = False
               ) -> Iterator[str]:
        picked = self.pick(question, sources)
        if not picked:
            yield NOTHING
            return
        named: set[int] = set()
        for i, (source, sentence) in enumerate(picked):
            if source["n"] not in named and sentence != title(source) and \
                    not sentence.endswith(source["cite"]):  # the first quote says whose it is
                sentence = f"{title(source)}: {sentence}"
            named.add(source["n"])
            stop = sentence[-1] if sentence[-1] in ".!?" else "."
            yield ("" if i == 0 else " ") + f"{sentence.rstrip('.!?')} [{source['n']}]{stop}"

    def pick(self, question: str, sources: list[dict[str, Any]]) -> list[tuple[dict, str]]:
        """The sentences that answer, best first. One qualifies by sharing a topic word of
        the question (``ASKING`` words are none), or — a memory's or a document's, not a
        symbol's place, which says nothing but a name — by meaning alone (a cosine of at
        least ``UNRELATED``). The rank prior lifts only a sentence that shares a word, so a
        source's rank never puts a sentence that matches nothing first."""
        units = candidates(sources)
        asked = set(terms(question)) - ASKING
        unit_terms = [set(terms(text)) & asked for _, _, text in units]
        df: dict[str, int] = {}  # rarity among all the candidates, not only those embedded
        for seen in unit_terms:
            for term in seen:
                df[term] = df.get(term, 0) + 1
        idf = {t: math.log(1 + len(units) / n) for t, n in df.items()}
        rank, per_kind = {}, {}
        for source in sources:  # each kind comes best first; scores of two kinds don't compare
            rank[id(source)] = per_kind[source["kind"]] = per_kind.get(source["kind"], -1) + 1
        prior = [1.0 / (1 + rank[id(source)]) if seen else 0.0
                 for (source, _, _), seen in zip(units, unit_terms)]
        if self.embed is not None and len(units) > EMBED_AT_MOST:
            # a vector each costs a model run: only for the likeliest units (words shared,
            # then the source's rank); on LoCoMo dev the answers cite as well as with all
            keep = sorted(sorted(range(len(units)),
                                 key=lambda i: -(len(unit_terms[i]) + prior[i]))[:EMBED_AT_MOST])
            units, unit_terms, prior = ([xs[i] for i in keep] for xs in (units, unit_terms, prior))
        if not units:
            return []
        keyword = [sum(idf[t] for t in seen) for seen in unit_terms]
        meaning = self._cosines(question, [text for _, _, text in units])
        top = max(keyword) or 1.0
        scored = []
        for i, (source, _, _) in enumerate(units):
            near = bool(meaning) and meaning[i] >= UNRELATED and not is_place(source)
            if not (unit_terms[i] or near):
                continue
            score = keyword[i] / top * (0.5 if meaning else 1.0) + 0.1 * prior[i]
            if meaning:
                score += 0.5 * meaning[i]
            scored.append((score, i))
        if not scored:
            return []  # no word of the question, nothing near it in meaning: nothing answers
        scored.sort(key=lambda x: (-x[0], x[1]))
        best = scored[0][0]
        picked, per = [], {}
        for score, i in scored:
            source, shown, _ = units[i]
            if len(picked) == MAX_SENTENCES or score < KEEP_RATIO * best:
                break
            if per.get(source["n"], 0) == PER_SOURCE or any(shown == s for _, s in picked):
                continue
            per[source["n"]] = per.get(source["n"], 0) + 1
            picked.append((source, shown))
        return picked

    def _cosines(self, question: str, texts: list[str]) -> list[float] | None:
        if self.embed is None:
            return None
        try:
            vectors = self.embed([question, *texts])
        except Exception as ex:  # no model is a supported configuration: keywords alone
            log.info("extractive answer without the embedder: %s", ex)
            return None
        return [float(v) for v in vectors[1:] @ vectors[0]]
