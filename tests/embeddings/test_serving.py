"""The embedder in a server: warmed in the background by a real daemon, reported by
GET /v1/embeddings/status (per worker under gunicorn), replaceable by a plugin, and its absence
breaks nothing else."""

from __future__ import annotations

import os
import time

from kernel.embeddings import PACKAGED_SHA256
from tests.embeddings import fake_embedder


def wait_loaded(server, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = server.get("/v1/embeddings/status")
        assert r.status == 200, r.body
        if r.json["loaded"]:
            return r.json
        time.sleep(0.1)
    raise AssertionError(f"model not loaded in {timeout} s:\n{server.output()}")


def test_the_daemon_answers_at_once_and_warms_the_model_in_the_background(make_server):
    server = make_server(serving=True, daemon=True, env={"NEURALMIND_EMBEDDINGS_WARM": "1"})
    assert server.request("GET", "/v1/health", auth=False).status == 200
    status = wait_loaded(server)  # no request asked for an embedding: the warm-up did it
    assert status["model_id"] == f"all-MiniLM-L6-v2-int8+dq8-v1@{PACKAGED_SHA256[:8]}"
    assert status["dim"] == 384 and status["load_ms"] > 0 and status.get("error") is None
    assert status["compute"] == "int8"
    # the int8 form was derived once into the home's model cache
    assert [p.name for p in (server.home / "models").iterdir()] == [
        f"{PACKAGED_SHA256[:16]}-dq8-v1.onnx"]
    assert status["threads"] == len(os.sched_getaffinity(0))  # one worker: all the cores
    assert server.request("GET", "/v1/embeddings/status", auth=False).status == 401


def test_without_warm_up_the_model_stays_unloaded(make_server):
    server = make_server(serving=True, workers=2)
    time.sleep(1)
    status = server.get("/v1/embeddings/status").json
    assert status["loaded"] is False and status["load_ms"] is None
    assert status["model_id"].startswith("all-MiniLM-L6-v2-int8+dq8-v1@")
    assert status["threads"] == max(1, len(os.sched_getaffinity(0)) // 2)  # cores ÷ workers


def test_no_model_is_reported_and_nothing_else_breaks(make_server, tmp_path, monkeypatch):
    missing = tmp_path / "no-model-here"
    monkeypatch.setenv("NEURALMIND_MODEL_DIR", str(missing))
    server = make_server(config="[embeddings]\nthreads = 3\n", embeddings={"warm": True})
    r = server.get("/v1/embeddings/status")
    assert r.status == 200
    assert r.json["model_id"] is None and r.json["loaded"] is False and r.json["threads"] == 3
    assert str(missing) in r.json["error"] and "[embeddings] model_dir" in r.json["error"]
    assert server.request("GET", "/v1/health", auth=False).status == 200
    assert server.get("/v1/projects").status == 200
    assert "Traceback" not in server.output()  # the failed warm-up is one log line


def test_a_plugin_embedder_replaces_the_model(make_server):
    server = make_server(extra_plugins=[fake_embedder.FakeEmbedderPlugin("fake-for-test@42")])
    status = server.get("/v1/embeddings/status").json
    assert status == {"model_id": "fake-for-test@42", "dim": 384, "loaded": True,
                      "load_ms": 0.0, "threads": 1, "compute": None, "remembered": None,
                      "error": None}


def test_the_fake_embedder_is_deterministic_and_normalised():
    a = fake_embedder.FakeEmbedder().embed(["the red fox", "the red fox jumps", "cold tea", ""])
    b = fake_embedder.FakeEmbedder().embed(["the red fox"])
    assert a.shape == (4, 384) and a.dtype == b.dtype == "float32"
    assert abs(float(a[0] @ b[0]) - 1) < 1e-6
    assert a[0] @ a[1] > a[0] @ a[2]
    assert all(abs(float(n) - 1) < 1e-6 for n in (a * a).sum(axis=1))
