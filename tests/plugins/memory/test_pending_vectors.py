"""Records not embedded yet when a search comes: it embeds at most ``search_embed_max`` of
them itself and finds the others by their words alone, saying so in its notice (it embedded
them all: after 10,000 records written, the first search took 20 s here, 60 s on a loaded
server, past the CLI's timeout); and the backfill keeps embedding while writes go on (it
waited for them to pause, so under steady writes nothing was embedded)."""

from __future__ import annotations

import time

import pytest

from plugins.memory.plugin import memories
from tests.plugins.memory.conftest import Api, start

HELD_OFF = {"backfill_delay_s": 60, "search_embed_max": 5, "decay_sweep_hours": 0}


@pytest.fixture(scope="module")
def held_off(tmp_path_factory, backend):
    """A server whose backfill waits longer than a test: what a search finds missing stays so."""
    srv = start(tmp_path_factory.mktemp("held-home"), memory=HELD_OFF)
    yield srv
    srv.stop()


def pending(api: Api) -> int:
    return api.server.get(api.url(tail="stats")).json["vectors"]["pending"]


def test_a_search_embeds_a_few_and_finds_the_rest_by_their_words(held_off, tmp_path):
    (tmp_path / "p").mkdir()
    api = Api(held_off, tmp_path / "p")
    items = [{"op": "create", "title": f"Service {i} answers within {i} ms",
              "rationale": f"Measured on node {i}."} for i in range(11)]
    items.append({"op": "create", "title": "Ship the airship zeppelin parts by rail",
                  "rationale": "Rail freight is cheaper for oversized parts."})
    assert held_off.post(api.url(tail="batch"), {"items": items}).status == 200

    semantic = api.search("how fast do services answer", mode="semantic")
    assert semantic["notice"] == ("7 records written lately not embedded yet: left out of "
                                  "semantic search until the backfill embeds them (keyword "
                                  "and hybrid search find them by their words)")
    assert 0 < len(semantic["results"]) <= 5
    hybrid = api.search("zeppelin parts", mode="hybrid")
    assert hybrid["notice"].startswith("7 records written lately not embedded yet: searched "
                                       "by their words alone")
    assert hybrid["results"][0]["title"] == "Ship the airship zeppelin parts by rail"
    nothing = api.search("recipe for banana bread with walnuts", mode="semantic")
    assert nothing["results"] == []  # said first, then why it may have missed some
    assert nothing["notice"] == ("nothing relevant found: no record is close enough to the "
                                 "query in meaning or words; " + semantic["notice"])
    assert pending(api) == 12  # a read stores nothing

    # every vector stored: the notice goes, and the search is as it always was
    service = memories(held_off.kernel)
    store = service.store(held_off.kernel.projects.get(api.pid))
    assert service.searcher.fill(store, held_off.kernel.embedder) == 12  # the backfill's pass
    for mode in ("semantic", "hybrid"):
        assert api.search("how fast do services answer", mode=mode)["notice"] is None
    assert len(api.search("how fast do services answer", mode="semantic")["results"]) > 5


def test_the_backfill_keeps_up_while_writes_go_on(api):
    """Creates every few milliseconds, never pausing for ``backfill_delay_s`` (0.5 s): the
    backfill starts anyway, within a few delays, and stores vectors while they go on."""
    deadline = time.monotonic() + 15
    while True:
        api.create(title=f"Decision at {time.monotonic():.3f}")
        if api.server.get(api.url(tail="stats")).json["vectors"]["embedded"]:
            break
        assert time.monotonic() < deadline, "nothing was embedded while the writes went on"
        time.sleep(0.02)
