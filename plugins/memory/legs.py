"""What the semantic leg hands to the second stage: beside its best records, the query's
cosine for every record (a keyword-only hit needs one), the records' own vectors and their
neighbours in a session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


def session_neighbours(sessions: list[str | None], created: list[str], ids):
    """Each row's previous and next row of the same session in creation order (-1 none)."""
    prev, nxt = np.full(len(ids), -1), np.full(len(ids), -1)
    order = sorted((i for i, s in enumerate(sessions) if s),
                   key=lambda i: (sessions[i], created[i], ids[i]))
    for a, b in zip(order, order[1:]):
        if sessions[a] == sessions[b]:
            nxt[a], prev[b] = b, a
    return prev, nxt


@dataclass
class SemanticLeg:
    """What the semantic leg found: its best records ``hits`` ``[(id, cosine, confidence)]``
    and the query's cosine for every record, which the second stage reads."""

    index: Any  # plugins.memory.search.VectorIndex
    scores: Any
    hits: list[tuple[str, float, float]]

    def _rows(self, ids: list[str]):
        return np.array([self.index.row.get(m, -1) for m in ids], dtype=np.int64)

    def cosine(self, ids: list[str]):
        """The query's cosine for each record (0 for one not embedded yet)."""
        rows = self._rows(ids)  # first: an ANN leg's index grows to hold them
        return _take(self.scores, rows, 0.0)

    def vectors(self, ids: list[str]):
        """The records' own vectors (zeros for one not embedded yet)."""
        rows = self._rows(ids)
        out = np.zeros((len(ids), self.index.matrix.shape[1]), np.float32)
        out[rows >= 0] = self.index.own(rows[rows >= 0])
        return out

    def neighbours(self, ids: list[str]):
        """Each record's previous and next record in its session: their cosines (-1 none)
        and ids (None)."""
        rows = self._rows(ids)
        out = []
        for links in (self.index.prev, self.index.next):
            linked = _take(links, rows, -1)
            out.append((_take(self.scores, linked, -1.0),
                        [self.index.ids[r] if r >= 0 else None for r in linked]))
        (prev_cos, prev_ids), (next_cos, next_ids) = out
        return prev_cos, next_cos, prev_ids, next_ids


def _take(values, rows, missing):
    """``values[rows]``, ``missing`` where a row is -1."""
    out = np.full(len(rows), missing, dtype=np.asarray(values).dtype)
    found = rows >= 0
    out[found] = values[rows[found]]
    return out
