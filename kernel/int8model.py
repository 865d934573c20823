"""The packaged model with its matrix products computed in int8.

The packaged file stores its weights as int8 but computes in float32 (onnxruntime folds them
back to float at load). onnxruntime's own dynamic quantization (per output channel, weights
only as int8 constants, activations quantized per run) makes those products int8: on these
machines a short query takes ~1.9 ms instead of ~5 ms and code chunks 1.7× less CPU, with
vectors at cosine 0.990–0.994 of the float ones (docs/embeddings.md).

The derivation runs once per source model, in a child process (it holds the float graph and
its protobuf — a few hundred MB the server should not keep), and its result is cached under
``$NEURALMIND_HOME/models`` by the source file's hash and :data:`RECIPE`.

    python -m kernel.int8model SOURCE.onnx TARGET.onnx
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RECIPE = "dq8-v1"  # bump when the steps below change: cached files then derive anew
DERIVE_TIMEOUT_S = 300


def cached_path(source_digest: str, cache_dir: Path) -> Path:
    return cache_dir / f"{source_digest[:16]}-{RECIPE}.onnx"


@contextmanager
def derived(source: Path, source_digest: str, cache_dir: Path | None) -> Iterator[Path]:
    """The int8-compute model for ``source`` while it is being loaded: the cached file
    (:func:`derive`), or without ``cache_dir`` one derived into a private temporary folder
    that is removed afterwards — a loaded ONNX session holds the model in memory, not its
    file, and a folder left for the OS to clean piled up 22 MB a process in /tmp."""
    if cache_dir is not None:
        yield derive(source, source_digest, cache_dir)
        return
    folder = Path(tempfile.mkdtemp(prefix="neuralmind-model-"))
    try:
        yield _derive(source, folder / "model.onnx")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def derive(source: Path, source_digest: str, cache_dir: Path) -> Path:
    """The int8-compute model for ``source`` in ``cache_dir``, derived on first use."""
    target = cached_path(source_digest, cache_dir)
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    # one process derives, the others (workers starting together) wait for its file: a lock
    # on the folder itself, so the folder holds nothing but models
    folder = os.open(cache_dir, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        return target if target.is_file() else _derive(source, target)
    finally:
        os.close(folder)  # and the lock with it


def _derive(source: Path, target: Path) -> Path:
    # a name of its own: two threads (or workers) deriving beside each other never share it
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    # -P: never the working directory's own kernel/ package (a user's repository may have one)
    done = subprocess.run([sys.executable, "-P", "-m", "kernel.int8model", str(source),
                           str(partial)], capture_output=True, text=True,
                          timeout=DERIVE_TIMEOUT_S)
    if done.returncode != 0 or not partial.stat().st_size:
        partial.unlink(missing_ok=True)
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"deriving the int8 model failed: {tail}")
    os.replace(partial, target)  # whole or not at all; a worker deriving beside us is harmless
    return target


def _derive_here(source: str, target: str) -> None:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        folded = os.path.join(tmp, "folded.onnx")
        options = ort.SessionOptions()
        # basic optimisations fold the int8 weights back to float constants, which is what
        # the quantizer needs to see (it only rewrites MatMuls on constant weights)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = folded
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        quantize_dynamic(folded, target, weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"MatMulConstBOnly": True})


if __name__ == "__main__":
    import logging
    logging.disable(logging.WARNING)  # the quantizer's advice about pre-processing
    _derive_here(sys.argv[1], sys.argv[2])
