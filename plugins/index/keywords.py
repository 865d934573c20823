"""The text of the keyword leg, the same on both sides: what FTS5 stores for a node and what a
query asks it for. Both go through the kernel's ``keyword_text`` (NFKC, so an NFD name from
macOS equals the name typed; Chinese and Japanese runs as overlapping character pairs, as the
tokenizer takes a run for one word), and words are any script's letters, digits and combining
marks, not ASCII's alone (``données`` is one term, not ``donn OR es``; ``हिन्दी`` one, not
``ह OR न OR द``), as FTS5's ``unicode61`` reads them."""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from neuralmind import STOPWORDS, combining_marks, keyword_text, unspaced

_ASCII_WORD = re.compile(r"[^\W_]+")  # letters and digits; ``_`` parts snake_case
# camelCase boundaries, run over a word's shape (A upper, a other letter, 0 digit) rather than
# the word, so they hold for ``Größenrechner`` or ``ÉcoleNormale`` too
_CAMEL = re.compile(r"A+(?!a)|A?a+|0+")
MAX_TERMS = 32


@cache
def _word() -> re.Pattern:
    """A word past ASCII: letters and digits of any script and the marks inside them (made at
    first use, as :func:`neuralmind.combining_marks` is)."""
    return re.compile(rf"(?:[^\W_]|[{combining_marks()}])+")


def _words(text: str) -> list[str]:
    return (_ASCII_WORD if text.isascii() else _word()).findall(text)


def _shape(word: str) -> str:
    return "".join("A" if c.isupper() else "0" if c.isdecimal() else "a" for c in word)


def _parts(word: str) -> list[str]:
    return [word[m.start():m.end()] for m in _CAMEL.finditer(_shape(word))]


def fts_text(text: str) -> str:
    """Text for the FTS index: as ``keyword_text`` puts it, plus the parts of each camelCase
    identifier (snake_case already splits on ``_`` in unicode61), so ``parseConfigFile``
    matches "parse config"."""
    text = keyword_text(text)
    extra = []
    for word in set(_words(text)):
        parts = _parts(word)
        if len(parts) > 1:
            extra.extend(parts)
    return f"{text}\n{' '.join(extra)}" if extra else text


def node_keywords(qualname: str, signature: str, docstring: str, text: str) -> tuple[str, str]:
    """A node's two FTS columns: label (its name and signature, weighted up) and body."""
    return fts_text(f"{qualname} {signature}"), fts_text(f"{docstring}\n{text}")


def _terms(word: str) -> list[str]:
    """One query word's FTS terms, quoted: the phrase of its pairs when it holds Chinese or
    Japanese (each pair alone would match any text that shares a character pair with it), one
    such character as a prefix (every pair it begins, and a run it ends), else the word and
    its camelCase parts."""
    pieces = keyword_text(word, query=True).split()
    if len(pieces) > 1:
        return [f'"{" ".join(pieces)}"']
    if unspaced(word):
        return [f'"{word}"*']
    return [f'"{t}"' for t in (word.lower(), *(part.lower() for part in _parts(word)))]


def fts_query(query: str) -> str | None:
    """An OR of the query's distinct terms (identifiers split, stopwords dropped — all kept
    when every one is a stopword, so ``only_in`` or ``is_not`` still finds its name)."""
    # NFKC before the words are found: an NFD accent is a mark of its own, no letter
    words = _words(unicodedata.normalize("NFKC", query))
    terms = list(dict.fromkeys(t for word in words for t in _terms(word)))
    kept = [t for t in terms if t.strip('"') not in STOPWORDS] or terms
    return " OR ".join(kept[:MAX_TERMS]) or None
