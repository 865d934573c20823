"""The Embedder protocol and the packaged ONNX MiniLM implementation (issue: embeddings)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from kernel.errors import Unavailable


@runtime_checkable
class Embedder(Protocol):
    model_id: str
    dim: int
    max_tokens: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array (len(texts), dim), rows L2-normalised."""


def default_embedder(settings) -> Embedder:
    raise Unavailable("no embedding model is configured", code="semantic_unavailable")
