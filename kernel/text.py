"""Text measures the plugins share: the stopwords keyword legs drop, the form text takes in a
keyword index, and the one token estimate every context budget is counted in (the embedder
keeps its tokenizer private)."""

from __future__ import annotations

import re
import unicodedata
from functools import cache

STOPWORDS = frozenset("""a about above after again against all am an and any are as at be because
been before being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same self she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what
when where which while who whom why will with would you your yours yourself yourselves""".split())

TOKEN_COUNTER = "estimate_chars_div_4"


def estimate_tokens(text: str) -> int:
    """One token per four characters, rounded up; for code it runs ~20% under the MiniLM
    tokenizer (≈3.1 characters per token on CoSQA functions)."""
    return (len(text) + 3) // 4


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # C0, DEL, C1, line separators


def one_line(text: str) -> str:
    """``text`` — a path, or a name made of one — as a line of text an agent reads shows it:
    each control character written as its escape (``\\n``, ``\\t``, ``\\x1b``, ``\\u2028``).
    A file may be named with a line break, and a raw one would add a heading or a line of the
    file name's choosing. One form for whoever writes such a line and whoever finds it again
    (the index's query context, the ask plugin reading it)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


# Han, Hiragana and Katakana: scripts written without spaces between words
_UNSPACED = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                       "\U00020000-\U0002fa1f]+")


def keyword_text(text: str, *, query: bool = False) -> str:
    """``text`` as a keyword index stores it and a keyword query asks for it, the same on both
    sides: NFKC-normalised (so an NFD name from macOS, a full-width letter or a half-width
    katakana equals its usual form), each run of Chinese or Japanese split into its overlapping
    character pairs and then its last character (``数据库`` → ``数据 据库 库``) set apart from the
    words around it. A keyword tokenizer takes such a run for one word, so a word inside a
    sentence could never match; pairs are how a dictionary-free index finds it (a
    two-character word is the commonest kind): a query run of two or more characters is the
    phrase of its pairs, and a query of one character (:func:`unspaced`) a prefix, which every
    pair it begins and the run's last character match. ``query``: a query's form, where a run
    of two or more characters is its pairs alone (the phrase a longer run holds too)."""
    return _UNSPACED.sub(_query_pairs if query else _pairs, unicodedata.normalize("NFKC", text))


def unspaced(text: str) -> bool:
    """Whether ``text`` is all in a script written without spaces (Han, Hiragana, Katakana)."""
    return _UNSPACED.fullmatch(text) is not None


def _pairs(run: re.Match) -> str:
    chars = run.group()
    return " " + " ".join([*_pair_list(chars), chars[-1]]) + " "


def _query_pairs(run: re.Match) -> str:
    chars = run.group()
    return " " + " ".join(_pair_list(chars) or [chars]) + " "


def _pair_list(chars: str) -> list[str]:
    return [chars[i:i + 2] for i in range(len(chars) - 1)]


@cache
def combining_marks() -> str:
    """A regex character class body of the Basic Multilingual Plane's combining marks: part
    of a word in Indic scripts, Thai and Hebrew points (``हिन्दी`` is one word to a keyword
    tokenizer), which ``\\w`` leaves out. Made at its first use: listing them takes ~20 ms,
    which a process that only ever meets ASCII need not pay."""
    chars = [chr(c) for c in range(0x80, 0x10000) if unicodedata.category(chr(c))[0] == "M"]
    ranges, start = [], None
    for a, b in zip(chars, chars[1:] + [None]):
        start = start or a
        if b is None or ord(b) != ord(a) + 1:
            ranges.append(re.escape(start) + ("-" + re.escape(a) if a != start else ""))
            start = None
    return "".join(ranges)
