"""Vectors held in process memory: a cache that reloads when its store's version stamp moves
(a write in another worker), and the top-k both search legs rank with."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


class VersionedCache(Generic[T]):
    """One value per key (a store's path), valid for one stamp (its version, the model id)."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[Hashable, T]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, stamp: Callable[[], Hashable],
            load: Callable[[], tuple[Hashable, T]]) -> T:
        """The value cached for ``key`` while ``stamp()`` is unchanged; else ``load()``, which
        returns the stamp it read with the value (it may write first, moving the stamp)."""
        found = self._items.get(key)
        if found is not None and found[0] == stamp():
            return found[1]
        with self._lock:  # one loader per process; the others wait and reuse its value
            found = self._items.get(key)
            if found is None or found[0] != stamp():
                found = self._items[key] = load()
        return found[1]

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s value (its store's project was removed): a file made anew at the same
        path starts its version stamps again, and could meet the old value's."""
        with self._lock:
            self._items.pop(key, None)


def top_k(scores: np.ndarray, k: int, keep: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``k`` highest ``scores``, best first, among the rows ``keep`` allows."""
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.argpartition(-scores, k - 1)[:k]
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    return idx[np.isfinite(scores[idx])]
