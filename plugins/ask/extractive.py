"""The default answer, with no model to call: the sentences of the best sources that answer
the question, each cited. A sentence scores by the question's words it shares (weighted by
how rare they are among the candidates), by meaning when the embedder is available, and a
little by its source's rank; the best three, at most two from one source, are the answer.
Chosen on LoCoMo dev with bench/ask_locomo.py (docs/performance-ask.md)."""

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
NOTHING = "None of the sources found answers this question."


def terms(text: str) -> list[str]:
    """Lower-case words without stopwords, camelCase and snake_case split, plural and -ing/-ed
    endings cut, so "tokens", "token" and "tokenized" meet."""
    out = []
    for word in WORD.findall(CAMEL.sub(" ", text)):
        word = word.lower()
        if word in STOPWORDS or len(word) < 2:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 3 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.append(word)
    return out


def sentences(text: str) -> list[str]:
    parts = (" ".join(p.split()) for p in SPLIT.split(text or ""))
    return [p[:SENTENCE_CHARS] for p in parts if len(WORD.findall(p)) >= 2]


def candidates(sources: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, str]]:
    """``(source, sentence, text it is scored on)`` for every source: a code symbol is one
    sentence saying where it is; a memory or a documentation section gives its sentences."""
    out = []
    for source in sources:
        title = source["title"]
        if source["kind"] == "code" and source.get("file_type") != "docs":
            out.append((source, f"{title} is at {source['cite']}",
                        f"{title} {source['text'][:600]}"))
            continue
        for sentence in sentences(source["text"]) or [title]:
            out.append((source, sentence, f"{title} {sentence}"))
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
            if source["n"] not in named and sentence != source["title"] and \
                    not sentence.endswith(source["cite"]):  # the first quote says whose it is
                sentence = f"{source['title']}: {sentence}"
            named.add(source["n"])
            stop = sentence[-1] if sentence[-1] in ".!?" else "."
            yield ("" if i == 0 else " ") + f"{sentence.rstrip('.!?')} [{source['n']}]{stop}"

    def pick(self, question: str, sources: list[dict[str, Any]]) -> list[tuple[dict, str]]:
        units = candidates(sources)
        asked = set(terms(question))
        unit_terms = [set(terms(text)) for _, _, text in units]
        rank, per_kind = {}, {}
        for source in sources:  # each kind comes best first; scores of two kinds don't compare
            rank[id(source)] = per_kind[source["kind"]] = per_kind.get(source["kind"], -1) + 1
        prior = [1.0 / (1 + rank[id(source)]) for source, _, _ in units]
        if self.embed is not None and len(units) > EMBED_AT_MOST:
            # a vector each costs a model run: only for the likeliest units (words shared,
            # then the source's rank); on LoCoMo dev the answers cite as well as with all
            keep = sorted(sorted(range(len(units)),
                                 key=lambda i: -(len(unit_terms[i] & asked) + prior[i]))[:EMBED_AT_MOST])
            units, unit_terms, prior = ([xs[i] for i in keep] for xs in (units, unit_terms, prior))
        if not units:
            return []
        df: dict[str, int] = {}
        for seen in unit_terms:
            for term in seen & asked:
                df[term] = df.get(term, 0) + 1
        idf = {t: math.log(1 + len(units) / n) for t, n in df.items()}
        keyword = [sum(idf.get(t, 0.0) for t in seen & asked) for seen in unit_terms]
        meaning = self._cosines(question, [text for _, _, text in units])
        if not max(keyword) and max(meaning or [0.0]) < UNRELATED:
            return []  # no word of the question, nothing near it in meaning: nothing answers
        top = max(keyword) or 1.0
        scored = []
        for i in range(len(units)):
            score = keyword[i] / top * (0.5 if meaning else 1.0) + 0.1 * prior[i]
            if meaning:
                score += 0.5 * meaning[i]
            scored.append((score, i))
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
