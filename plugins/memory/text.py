"""How the memory plugin reads words, one definition for every place that matches them: the
text its keyword index holds (SQLite's FTS5 and PostgreSQL's tsvector alike), the words of a
keyword query, and the second stage's word matching (:func:`plugins.memory.features.plain`).

Each engine folds text its own way — FTS5's ``unicode61`` strips Latin accents but not Greek
ones, PostgreSQL strips none (``unaccent`` is an extension) and lower-cases ``İ`` into two
characters — so the plugin folds in Python before text reaches either, and both see the same
words: :func:`fold`. ASCII text passes through as it is (lower-cased where this plugin
compares it): the engines already agree on it, and English search scores stay what they were.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Any

from neuralmind import combining_marks, keyword_text, unspaced


# A name written as one: words joined by the punctuation of code, paths and addresses, with
# no space between (``falcon.before``, ``std::move``, ``C:\src/app.py``, ``a->b``,
# ``https://x.io``). "_" needs none of this: it is part of a word (``user_id``). "-" is not
# one: prose joins words with it (``in-memory``, ``lock-in``), stopwords among them.
_JOINER = r"(?:->|[./\\@:#])+"


@cache
def _words() -> tuple[re.Pattern, re.Pattern, re.Pattern, re.Pattern]:
    """``(a word, a break the second stage reads, a break the keyword index reads, a name)``
    of text past ASCII, made at its first use (as :func:`neuralmind.combining_marks` is): most
    servers, and every English query, only ever meet ASCII."""
    marks = combining_marks()
    # "_" joins in a word (``user_id`` is a phrase) and in the second stage's text, while the
    # keyword index breaks on it, as FTS5 does
    return (re.compile(rf"[\w{marks}]+"), re.compile(rf"[^\w{marks}]+"),
            re.compile(rf"[^\w{marks}]+|_+"),
            re.compile(rf"[\w{marks}]+(?:{_JOINER}[\w{marks}]+)+"))


_ASCII_WORD = re.compile(r"\w+")  # what _words()'s word is over ASCII
_ASCII_NAME = re.compile(rf"\w+(?:{_JOINER}\w+)+")  # and its name
_ACCENTS = re.compile("[\u0300-\u036f]+")  # the combining diacritics of Latin, Greek, Cyrillic


def fold(text: str, *, query: bool = False) -> str:
    """``text`` as keyword matching compares it: NFKC with Chinese and Japanese runs split into
    character pairs (:func:`neuralmind.keyword_text`; ``query``: a query's form), case-folded
    (``Straße`` → ``strasse``, ``İstanbul`` → ``istanbul``), without Latin, Greek and Cyrillic
    accents (``café`` → ``cafe``, ``ё`` → ``е``), its spaces single."""
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFD", keyword_text(text, query=query).casefold())
    # Turkish dotless i folds to i, so "IĞDIR" and "Iğdır" fold alike
    text = unicodedata.normalize("NFC", _ACCENTS.sub("", text)).replace("ı", "i")
    return " ".join(text.split())


def indexed(text: str) -> str:
    """``text`` as the keyword index stores it: folded, every character that is no part of
    a word a space — so PostgreSQL's parser, which only knows ASCII punctuation, breaks
    ``«Kafka»`` where FTS5 does. ASCII is stored as written: both engines split and fold it
    alike (and a JSON-free, unchanged text keeps English bm25 scores as they were)."""
    return text if text.isascii() else _words()[2].sub(" ", fold(text)).strip()


def keyword_columns(rec: dict[str, Any]) -> tuple[str, str]:
    """A record's keyword text: its title, and its body — the rationale, evidence and tags."""
    body = " ".join([rec["rationale"], *rec["evidence"], *rec["tags"]])
    return indexed(rec["title"]), indexed(body)


def query_words(text: str) -> list[str]:
    """A query's words, folded, in order, each once. A word of Chinese or Japanese comes back
    as its character pairs (``数据 据库``), which a keyword query asks for as a phrase."""
    return list(dict.fromkeys(_folded(text)))


def _folded(text: str) -> list[str]:
    words = (_ASCII_WORD if text.isascii() else _words()[0]).findall(text)
    return [w for w in (fold(w, query=True) for w in words) if w]


def query_names(text: str) -> list[str]:
    """The names a query writes as one (``falcon.before``: see ``_JOINER``), each the phrase
    of its folded words (``falcon before``), in order, each once. A name's words are no prose:
    ``before`` in ``falcon.before`` is no stopword, and the name as written is what to find."""
    found = (_ASCII_NAME if text.isascii() else _words()[3]).findall(text)
    return list(dict.fromkeys(" ".join(_folded(name)) for name in found))


def as_prefix(word: str) -> bool:
    """Whether a keyword query matches ``word`` (a phrase: its last word) as the start of a
    word. Not a single character of a script written with spaces (``a``, ``x``, ``é``; the
    ``c`` of ``a.b.c``): nearly every record has a word it starts, so it is a word of its
    own. A Chinese or Japanese character is a prefix: of the pairs it begins
    (:func:`neuralmind.keyword_text`)."""
    last = word.rsplit(" ", 1)[-1]
    return len(last) > 1 or unspaced(last)


def plain(text: str) -> bytes:
    """``b" " + text + b" "`` folded, as UTF-8, with every character that is no part of a word
    (Unicode punctuation too: ``«Kafka»``, ``「PostgreSQL」``) a space; ``_`` stays, as query
    words keep it. ASCII takes a byte translation, as fast as before. The spaces around let
    ``b" " + word`` find a word's start and ``b" " + word + b" "`` a whole word."""
    if text.isascii():
        return b" " + text.lower().encode("ascii").translate(_PLAIN) + b" "
    return b" " + _words()[1].sub(" ", fold(text)).encode("utf-8", "replace") + b" "


_PLAIN = bytes(c if c < 128 and chr(c).isalnum() or c == 95 else 32 for c in range(256))


def latin_share(text: str) -> float:
    """The share of ``text``'s letters that are Latin (1.0 when it has none): how much of a
    query the packaged English model reads. It maps any two Chinese texts to a cosine of
    0.4–0.6, so a cosine says nothing about a query it cannot read."""
    if text.isascii():
        return 1.0
    letters = [c for c in text if c.isalpha()]
    latin = sum(c.isascii() or unicodedata.name(c, "").startswith("LATIN") for c in letters)
    return latin / len(letters) if letters else 1.0


def nfc(value: Any) -> Any:
    """A name compared as written — a tag, an author, a file path — in NFC: macOS hands out
    file names in NFD, and ``réseau`` typed there and elsewhere must be one tag."""
    return unicodedata.normalize("NFC", value) if isinstance(value, str) else value
