"""Long records as several passages, so a search finds a record by any of its paragraphs.

The model reads 256 tokens (~180 words) of a text: a record's own vector, of its title and
rationale, says little about the rationale's end. A record whose rationale is longer than
``passage_min_chars`` also gets one vector per sentence-aligned window of at most
``passage_chars`` characters, each embedded with the title in front; it scores as its best
vector. The vectors share the record's ``memory_vectors`` row (the own vector first), so a
change of the record re-embeds them all and a store without passages reads the same.
"""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[\"'])")


def windows(text: str, size: int) -> list[str]:
    """Sentence-aligned windows of at most ``size`` characters (a longer sentence is cut at
    words; a short tail joins the window before it)."""
    out: list[str] = []
    current = ""
    for sentence in SENTENCE_END.split(text.strip()):
        sentence = " ".join(sentence.split())
        while len(sentence) > size:
            cut = sentence.rfind(" ", 0, size + 1)
            cut = cut if cut > 0 else size
            if current:
                out.append(current)
                current = ""
            out.append(sentence[:cut])
            sentence = sentence[cut:].lstrip()
        if current and len(current) + 1 + len(sentence) > size:
            out.append(current)
            current = ""
        current = f"{current} {sentence}" if current else sentence
    if current:
        if out and len(current) < size // 3:
            out[-1] = f"{out[-1]} {current}"
        else:
            out.append(current)
    return out


def embed_texts(title: str, rationale: str, min_chars: int | None, size: int) -> list[str]:
    """What a record's vectors are made of: its title and rationale, then (when passages are
    on and the rationale is over ``min_chars``) the title before each window."""
    own = f"{title}\n{rationale}"
    if min_chars is None or len(rationale) <= min_chars:
        return [own]
    return [own, *(f"{title}\n{w}" for w in windows(rationale, size))]
