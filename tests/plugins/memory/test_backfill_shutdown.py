"""A server stopping while the background backfill embeds a batch: shutdown signalled the
backfill and closed the stores at once, so the batch under way met a closed store — on
PostgreSQL `memory backfill … failed: … the pool is already closed`, on SQLite a write after
the shutdown's checkpoint, or `OSError: [Errno 9] Bad file descriptor` from its lease's
release once the process exited. Now the shutdown waits for that batch (bounded), and a batch
still running past the wait ends without an error logged. The wait then ran for the whole batch
(64 records by default, 7 s of long rationales: past the wait, the thread went on embedding
against closed stores); now the backfill stops after the embedding step under way
(`search.EMBED_STEP` texts), stores it, and has ended when the stop returns.

The model is the suite's fake embedder, held at its gate while the test stops the server:
the only way to be sure a batch is under way when the stop begins."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kernel.plugins import hookimpl
from plugins.memory import backfill, search
from tests.embeddings.fake_embedder import FakeEmbedder
from tests.plugins.memory.conftest import Api, memory_database, start

BATCH = 4 * search.EMBED_STEP  # a batch of several steps


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
    gate), its backfill (read now: the kernel's state goes with its stop), the model, and
    every memory log line (the server's own handler goes with its stop)."""
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
        yield api, srv.kernel.state("memory").backfill, model, lines
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


def test_a_stopping_server_waits_for_the_step_under_way(held):
    api, filler, model, lines = held
    thread = filler._thread
    stopping = threading.Thread(target=api.server.stop)
    stopping.start()
    for _ in range(300):  # until the shutdown has come to the memory plugin
        if filler._stopped:
            break
        time.sleep(0.01)
    time.sleep(0.3)
    assert filler._stopped and stopping.is_alive(), "the stop did not wait for the step"
    model.gate.set()
    opened = time.monotonic()
    stopping.join(backfill.BACKFILL_WAIT_S)
    # the stop returned once the step under way was done, the thread ended with it
    assert not stopping.is_alive() and not thread.is_alive()
    assert time.monotonic() - opened < backfill.BACKFILL_WAIT_S
    # the step under way was written, and none of the batch's other steps embedded; the lease
    # was given back
    assert model.calls == 1  # counted once past the gate
    assert stored(api) == (search.EMBED_STEP, (0, None))
    assert not [line for line in lines if "backfill" in line], lines


def test_a_batch_outlasting_the_wait_ends_without_an_error(held, monkeypatch):
    api, filler, model, lines = held
    thread = filler._thread
    monkeypatch.setattr(backfill, "BACKFILL_WAIT_S", 0.05)
    api.server.stop()  # gives up waiting: the stores close under the batch
    model.gate.set()
    thread.join(30)
    assert not thread.is_alive()
    failed = [line for line in lines if "backfill" in line and "failed" in line]
    assert failed == [], failed
