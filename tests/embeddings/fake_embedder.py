"""A small deterministic embedder for tests, supplied through the ``embedder`` hook.

Vectors are hashed bags of lower-cased words (so texts sharing words score higher), L2-normalised
float32, identical in every process. ``model_id`` comes from ``NEURALMIND_FAKE_EMBEDDER_ID``
(read when the hook runs), so a test can restart a server with another id and check that its
index re-embeds.

In-process: ``LocalServer(home, extra_plugins=[FakeEmbedderPlugin("fake@1")])`` (or
``Kernel(settings, extra_plugins=[…])``).
A real server: ``Server(home, plugins=["auth", ..., "fake_embedder"],
env=fake_embedder.server_env(tmp_dir, model_id="fake@1"))`` — the env puts an entry point
``fake_embedder`` in the ``neuralmind`` group on the server's path.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from kernel.plugins import hookimpl
from tests.support import plugin_site, pythonpath

ENV_ID = "NEURALMIND_FAKE_EMBEDDER_ID"
DEFAULT_ID = "fake-bag-of-words@1"


class FakeEmbedder:
    """Counts how many texts it embedded, so a test can see that re-embedding happened."""

    max_tokens = 256

    def __init__(self, model_id: str = DEFAULT_ID, dim: int = 384):
        self.model_id = model_id
        self.dim = dim
        self.calls = 0
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()) or [""]:
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                slot = int.from_bytes(digest[:4], "little") % self.dim
                out[row, slot] += 1.0 if digest[4] & 1 else -1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else np.eye(1, self.dim, dtype=np.float32)[0]
        return out

    def status(self) -> dict:
        return {"model_id": self.model_id, "dim": self.dim, "loaded": True, "load_ms": 0.0,
                "threads": 1}


class FakeEmbedderPlugin:
    """Registers one FakeEmbedder as the kernel's embedder."""

    def __init__(self, model_id: str | None = None, dim: int = 384):
        self.model_id = model_id
        self.dim = dim

    @hookimpl
    def embedder(self, kernel):
        return FakeEmbedder(self.model_id or os.environ.get(ENV_ID) or DEFAULT_ID, self.dim)


plugin = FakeEmbedderPlugin()


def server_env(tmp_dir: Path, model_id: str = DEFAULT_ID) -> dict[str, str]:
    """Environment for a ``tests.support.Server`` that can enable the ``fake_embedder`` plugin:
    a dist-info folder declaring the entry point, put on PYTHONPATH with the repository."""
    site = plugin_site(Path(tmp_dir) / "fake-embedder-site", "neuralmind-fake-embedder",
                       {"fake_embedder": "tests.embeddings.fake_embedder:plugin"})
    return {"PYTHONPATH": pythonpath(site), ENV_ID: model_id}
