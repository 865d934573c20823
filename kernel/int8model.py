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
import signal
import stat
import subprocess
import sys
import tempfile
import threading
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
        if target.is_file():
            return target
        # every derive into the folder holds this lock: a partial file here now is one a
        # process stopped while deriving left behind (22 MB each, and the float graph's 90)
        for stale in cache_dir.glob(".*.onnx.*"):
            stale.unlink(missing_ok=True)
        return _derive(source, target)
    finally:
        os.close(folder)  # and the lock with it


def _derive(source: Path, target: Path) -> Path:
    # a name of its own (".<target>.XXXX.tmp", hidden, beside it): two threads (or workers)
    # deriving beside each other never share it
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    try:
        code, said = _quantize(source, partial)
        if code != 0 or not partial.stat().st_size:
            tail = (said.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"deriving the int8 model failed: {tail}")
        os.replace(partial, target)  # whole or not at all; a worker deriving beside us is harmless
    finally:
        partial.unlink(missing_ok=True)
    return target


def _quantize(source: Path, target: Path) -> tuple[int, str]:
    """Run the derivation in a child process: ``(its exit code, what it said on stderr)``.
    The child ends when we do (a worker stopped while it derives, :func:`_exit_with_parent`:
    it holds a pipe from us as its stdin), so no quantizer outlives its server to write a file
    no one will use."""
    with tempfile.TemporaryFile() as said, subprocess.Popen(
            # -P: never the working directory's own kernel/ package (a repository may have one)
            [sys.executable, "-P", "-m", "kernel.int8model", str(source), str(target)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=said) as child:
        try:
            code = child.wait(timeout=DERIVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            raise RuntimeError("deriving the int8 model failed: it took longer than "
                               f"{DERIVE_TIMEOUT_S} s") from None
        said.seek(0)
        return code, said.read().decode(errors="replace")


def _exit_with_parent() -> None:
    """In the child: end when the deriving process does. On Linux the kernel kills us the
    moment it dies (``PR_SET_PDEATHSIG``; a thread could wait a second for the interpreter
    lock while the quantizer's C code holds it). Elsewhere — and where it died before that
    was set — stdin, the pipe it holds open, closes. Run by hand from a terminal, stdin is no
    pipe, and nothing is watched. What we leave half written, the next derive sweeps away."""
    if sys.platform == "linux":
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if not stat.S_ISFIFO(os.fstat(0).st_mode):
        return

    def watch() -> None:
        while os.read(0, 4096):  # unbuffered: a buffered read would hold a lock at exit
            pass
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _derive_here(source: str, target: str) -> None:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # beside the target, named after it (the quantizer's own file too), not in /tmp: what a
    # child killed midway leaves is then a partial file the next derive sweeps away
    folded = f"{target}.folded.onnx"
    try:
        options = ort.SessionOptions()
        # basic optimisations fold the int8 weights back to float constants, which is what
        # the quantizer needs to see (it only rewrites MatMuls on constant weights)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = folded
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        quantize_dynamic(folded, target, weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"MatMulConstBOnly": True})
    finally:
        Path(folded).unlink(missing_ok=True)


if __name__ == "__main__":
    import logging
    _exit_with_parent()
    logging.disable(logging.WARNING)  # the quantizer's advice about pre-processing
    _derive_here(sys.argv[1], sys.argv[2])
