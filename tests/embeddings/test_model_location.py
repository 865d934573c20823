"""Where the model comes from: NEURALMIND_MODEL_DIR → [embeddings] model_dir → the packaged
files; the hash in model_id; every way of having no model is Unavailable with the hint."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from kernel import embeddings
from kernel.config import load_settings
from kernel.embeddings import OnnxEmbedder, default_embedder
from kernel.errors import Unavailable
from kernel import int8model
from kernel.int8model import RECIPE
from tests.support import provide_model

PACKAGED_ID = f"all-MiniLM-L6-v2-int8+{RECIPE}@{embeddings.PACKAGED_SHA256[:8]}"


def packaged(which: str) -> Path:
    path = embeddings._package_file(*getattr(embeddings, f"PACKAGED_{which}"))
    assert path is not None, "the packaged model must be installed for these tests"
    return path


@pytest.fixture(autouse=True)
def no_env_model(monkeypatch):
    monkeypatch.delenv("NEURALMIND_MODEL_DIR", raising=False)


@pytest.fixture
def custom_dir(tmp_path) -> Path:
    """The packaged model with one unknown protobuf field appended: the same network (onnx
    parsers skip unknown fields) in a file with another hash."""
    folder = tmp_path / "my-minilm"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(packaged("MODEL").read_bytes() + b"\xc2\x3e\x01x")
    (folder / "tokenizer.json").symlink_to(packaged("TOKENIZER"))
    return folder


def unavailable(embedder: OnnxEmbedder, settings_named: bool = True) -> Unavailable:
    with pytest.raises(Unavailable) as info:
        embedder.embed(["anything"])
    err = info.value
    assert (err.status, err.code) == (503, "semantic_unavailable")
    assert settings_named is ("[embeddings] model_dir" in err.message
                              and "NEURALMIND_MODEL_DIR" in err.message)
    status = embedder.status()
    assert status["loaded"] is False and status["model_id"] is None
    assert status["error"] == err.message
    return err


def test_the_packaged_model_is_the_default():
    embedder = OnnxEmbedder()
    assert embedder.model_id == PACKAGED_ID
    assert embedder._resolve().model == packaged("MODEL")


def test_a_custom_folder_is_named_by_its_hash_and_gives_its_vectors(custom_dir):
    digest = embeddings._sha256(custom_dir / "model.onnx")
    assert OnnxEmbedder(str(custom_dir)).model_id == f"my-minilm+{RECIPE}@{digest[:8]}" != PACKAGED_ID
    # the vectors are the file's own: compared as the files compute (no int8 form to derive)
    custom = OnnxEmbedder(str(custom_dir), compute="float")
    assert custom.model_id == f"my-minilm@{digest[:8]}"
    text = ["vectors of the same network"]
    np.testing.assert_allclose(custom.embed(text), OnnxEmbedder(compute="float").embed(text),
                               atol=1e-6)


def test_a_copy_of_the_packaged_model_keeps_its_id(tmp_path):
    for which, name in (("MODEL", "model.onnx"), ("TOKENIZER", "tokenizer.json")):
        (tmp_path / name).symlink_to(packaged(which))
    assert OnnxEmbedder(str(tmp_path)).model_id == PACKAGED_ID


def test_the_environment_wins_over_the_config_file(custom_dir, tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text(f'[embeddings]\nmodel_dir = "{tmp_path / "missing"}"\n')
    monkeypatch.setenv("NEURALMIND_MODEL_DIR", str(custom_dir))
    model_dir = load_settings(config).embeddings.model_dir
    assert model_dir == str(custom_dir)
    assert OnnxEmbedder(model_dir).model_id.startswith("my-minilm+")


def test_the_environment_wins_over_the_packaged_model(custom_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURALMIND_MODEL_DIR", str(custom_dir))
    assert OnnxEmbedder(load_settings().embeddings.model_dir).model_id.startswith("my-minilm+")
    monkeypatch.setenv("NEURALMIND_MODEL_DIR", str(tmp_path / "missing"))
    err = unavailable(OnnxEmbedder(load_settings().embeddings.model_dir))
    assert "NEURALMIND_MODEL_DIR" in err.message and "lacks model.onnx, tokenizer.json" in err.message


def test_a_missing_tokenizer_is_named(custom_dir):
    (custom_dir / "tokenizer.json").unlink()
    err = unavailable(OnnxEmbedder(str(custom_dir)))
    assert "lacks tokenizer.json" in err.message and "model.onnx," not in err.message


def test_a_file_that_is_not_a_model_is_unavailable_not_a_crash(custom_dir):
    (custom_dir / "model.onnx").write_bytes(b"this is not an onnx model")
    embedder = OnnxEmbedder(str(custom_dir))
    assert embedder.model_id.startswith("my-minilm+")  # found and hashed, but does not load
    err = unavailable(embedder)
    assert f"cannot load {custom_dir / 'model.onnx'}" in err.message
    assert unavailable(embedder).message == err.message  # remembered, not retried per call


def test_a_tokenizer_that_does_not_read_is_the_file_named(custom_dir):
    (custom_dir / "tokenizer.json").unlink()  # a link to the packaged file: never written
    (custom_dir / "tokenizer.json").write_text("{}")
    err = unavailable(OnnxEmbedder(str(custom_dir)))
    assert f"cannot load {custom_dir / 'tokenizer.json'}" in err.message
    assert f"cannot load {custom_dir / 'model.onnx'}" not in err.message


def test_a_packaged_model_with_the_wrong_hash_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "site" / embeddings.PACKAGED_MODEL[0]
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    (fake / "model.onnx").write_bytes(packaged("MODEL").read_bytes()[:-1] + b"\x00")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    err = unavailable(OnnxEmbedder())
    assert "sha256" in err.message and str(fake / "model.onnx") in err.message


def test_default_embedder_never_raises_on_a_bad_setting(tmp_path):
    settings = load_settings(embeddings={"model_dir": str(tmp_path / "nowhere")})
    embedder = default_embedder(settings)
    assert os.fspath(tmp_path / "nowhere") in embedder.status()["error"]
    unavailable(embedder)


def test_float_compute_runs_the_file_as_it_is_under_its_own_id(tmp_path):
    """``[embeddings] compute = "float"``: no derived model, the file's own id, vectors close
    to the int8-compute ones but never mixed with them (the ids differ)."""
    provide_model(tmp_path)  # the int8 one, for comparison; the float one adds no file
    exact = OnnxEmbedder(compute="float", cache_dir=tmp_path)
    assert exact.model_id == f"all-MiniLM-L6-v2-int8@{embeddings.PACKAGED_SHA256[:8]}"
    texts = ["rotate the signing keys weekly", "def parse(body): return json.loads(body)"]
    cosine = (exact.embed(texts) * OnnxEmbedder(cache_dir=tmp_path).embed(texts)).sum(axis=1)
    assert np.all(cosine > 0.98) and exact.model_id != PACKAGED_ID
    assert list(tmp_path.iterdir()) == [tmp_path / f"{embeddings.PACKAGED_SHA256[:16]}-{RECIPE}.onnx"]


def test_a_damaged_cached_model_is_named_then_derived_again_once_and_read_after(tmp_path):
    """One derivation serves four checks: a damaged cached file is named in the error, the
    deleted file is derived again — by two threads at once, each getting it whole — and
    another embedder reads it instead of deriving it."""
    cached = tmp_path / f"{embeddings.PACKAGED_SHA256[:16]}-{RECIPE}.onnx"
    cached.write_bytes(b"not a model")
    # the remedy is ours to name, not the settings: the packages are there, a new copy mends it
    err = unavailable(OnnxEmbedder(cache_dir=tmp_path), settings_named=False)
    assert f"cannot load {cached}" in err.message
    assert err.message.endswith("; delete it and it is derived again from "
                                f"{embeddings.locate_model(None).model}")
    cached.unlink()
    # two embedders of one process derive it at once into one folder: each gets it whole
    pair, results = [OnnxEmbedder(cache_dir=tmp_path) for _ in range(2)], {}
    threads = [threading.Thread(target=lambda e=e: results.update({e: e.embed(["derived again"])}))
               for e in pair]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, vectors = pair[0], results.get(pair[0])
    assert vectors is not None and vectors.shape == (1, 384), "a deriving thread failed"
    np.testing.assert_allclose(results[pair[1]], vectors, atol=1e-6)
    assert cached.stat().st_size > 1_000_000
    stamp = cached.stat().st_mtime_ns
    second = OnnxEmbedder(cache_dir=tmp_path)
    np.testing.assert_allclose(second.embed(["derived again"]), vectors, atol=1e-6)
    assert cached.stat().st_mtime_ns == stamp  # read, not derived again
    assert second.status()["load_ms"] < first.status()["load_ms"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [cached.name]  # no temporary left


def test_workers_starting_together_derive_the_model_once(tmp_path):
    """Two callers of ``derive`` on one empty folder (a server's workers, the test suite's
    xdist workers): one derives, the other waits and gets that same file — not a second
    derivation replacing it."""
    files = embeddings.locate_model(None)
    inodes = []

    def derive():
        inodes.append(int8model.derive(files.model, files.digest, tmp_path).stat().st_ino)

    threads = [threading.Thread(target=derive) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(inodes) == 2 and inodes[0] == inodes[1]
    assert [p.name for p in tmp_path.iterdir()] == [int8model.cached_path(files.digest,
                                                                          tmp_path).name]


def _tiny_model(path: Path) -> Path:
    """An ONNX graph of one MatMul on a constant weight: what the derivation rewrites, small
    enough to derive in a moment."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    weight = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])], "tiny",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_model_derived_without_a_cache_leaves_no_folder_behind(tmp_path, monkeypatch):
    """Without a cache folder (an embedder made by a script), the derived file lives in a
    temporary folder while it loads, then goes: they piled up 22 MB a process in /tmp."""
    import tempfile
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with int8model.derived(_tiny_model(tmp_path / "tiny.onnx"), "0" * 64, None) as path:
        assert path.is_file() and path.parent.parent == scratch
    assert list(scratch.iterdir()) == []
    cache = tmp_path / "cache"  # with one, the file stays where the next process finds it
    with int8model.derived(tmp_path / "tiny.onnx", "0" * 64, cache) as path:
        assert path.parent == cache
    assert path.is_file()


def test_a_derive_cut_short_leaves_no_child_and_its_files_go_at_the_next(tmp_path):
    """A process stopped while it derives (a server stopped in its first seconds): the
    quantizer child ends with it, rather than writing 22 MB no one will use; the partial
    files such a stop left (or an earlier release's orphan wrote) go at the next derive."""
    import signal
    import subprocess
    import sys
    import time
    files = embeddings.locate_model(None)
    cache = tmp_path / "models"
    cache.mkdir()
    left = cache / f".{int8model.cached_path(files.digest, cache).name}.abc123.tmp"
    left.write_bytes(b"\0" * 1024)
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from kernel import int8model; "
        "int8model.derive(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))"),
        str(files.model), files.digest, str(cache)])
    try:
        child = None
        deadline = time.monotonic() + 30
        while child is None and time.monotonic() < deadline:
            time.sleep(0.02)
            child = next((int(pid) for pid in os.listdir("/proc") if pid.isdigit()
                          and _ppid(pid) == parent.pid and b"kernel.int8model" in _cmdline(pid)),
                         None)
        assert child is not None, "the parent started no quantizer"
        partial = [p.name for p in cache.iterdir()]  # its own, not the one left before
        assert len(partial) == 1 and partial[0].endswith(".tmp") and not left.exists()
        parent.send_signal(signal.SIGKILL)  # as gunicorn ends a worker that does not stop
        parent.wait()
        deadline = time.monotonic() + 1  # the derive needs ~2.5 s more: it never ends so
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _alive(child), "the quantizer outlived the process that started it"
    finally:
        parent.kill()
        parent.wait()


def _ppid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    """Running: not gone, and not a zombie its new parent has yet to reap."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
