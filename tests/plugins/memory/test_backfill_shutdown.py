"""A server stopping while the background backfill embeds a batch: shutdown signalled the
backfill and closed the stores at once, so the batch under way met a closed store — on
PostgreSQL `memory backfill … failed: … the pool is already closed`, on SQLite a write after
the shutdown's checkpoint, or `OSError: [Errno 9] Bad file descriptor` from its lease's
release once the process exited. Now the shutdown waits for that batch (bounded), and a batch
still running past the wait ends without an error logged.

The model is the suite's fake embedder, held at its gate while the test stops the server:
the only way to be sure a batch is under way when the stop begins."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kernel.plugins import hookimpl
from plugins.memory import backfill
from tests.embeddings.fake_embedder import FakeEmbedder
from tests.plugins.memory.conftest import Api, memory_database, start

BATCH = 16


class GatedEmbedder(FakeEmbedder):
    """The fake model; each embedding waits until the test opens ``gate``."""

    def __init__(self):
        super().__init__("gated@1")
        self.entered, self.gate = threading.Event(), threading.Event()

    def embed(self, texts):
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts)


class GatedModel:
    def __init__(self, model: GatedEmbedder):
        self.model = model

    @hookimpl
    def embedder(self, kernel):
        return self.model


@pytest.fixture
def held(tmp_path):
    """A server whose backfill is embedding its first batch of 100 new records (held at the
    gate), its backfill thread, the model, and every memory log line (the server's own
    handler goes with its stop)."""
    model = GatedEmbedder()
    srv = start(tmp_path / "home", extra_plugins=[GatedModel(model)],
                memory={"decay_sweep_hours": 0, "backfill_batch": BATCH})
    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("neuralmind.memory")
    logger.addHandler(handler)
    try:
        (tmp_path / "proj").mkdir()
        api = Api(srv, tmp_path / "proj")
        r = srv.post(api.url(tail="batch"), {"items": [
            {"op": "create", "title": f"record {i}", "rationale": f"reason {i}"}
            for i in range(100)]})
        assert r.status == 200, r.body
        assert model.entered.wait(30), "the backfill never began"
        yield api, srv.kernel.state("memory").backfill._thread, model, lines
    finally:
        model.gate.set()
        srv.stop()
        logger.removeHandler(handler)


def stored(api) -> tuple[int, tuple]:
    """The vectors stored, and the backfill lease's (until, owner)."""
    with memory_database(api.server.home, api.dir, api.pid) as db:
        count = db.conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0]
        lease = db.conn.execute("SELECT value, owner FROM memory_meta "
                                "WHERE key = 'backfill_until'").fetchone()
    return count, (lease[0], lease[1])


def test_a_stopping_server_waits_for_the_batch_under_way(held):
    api, thread, model, lines = held
    stopping = threading.Thread(target=api.server.stop)
    stopping.start()
    time.sleep(0.3)
    assert stopping.is_alive(), "the stop did not wait for the batch being embedded"
    model.gate.set()
    stopping.join(30)
    assert not stopping.is_alive() and not thread.is_alive()
    # the batch under way was written and no other begun; the lease was given back
    assert stored(api) == (BATCH, (0, None))
    assert not [line for line in lines if "backfill" in line], lines


def test_a_batch_outlasting_the_wait_ends_without_an_error(held, monkeypatch):
    api, thread, model, lines = held
    monkeypatch.setattr(backfill, "STOP_WAIT_S", 0.05)
    api.server.stop()  # gives up waiting: the stores close under the batch
    model.gate.set()
    thread.join(30)
    assert not thread.is_alive()
    failed = [line for line in lines if "backfill" in line and "failed" in line]
    assert failed == [], failed
