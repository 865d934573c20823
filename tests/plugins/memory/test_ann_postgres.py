"""On PostgreSQL the semantic leg stays the exact scan past ``ann_min_records``: ANN files on
one machine would miss the other servers' writes (plugins/memory/pgstore.py)."""

from __future__ import annotations

import pytest

from neuralmind import today
from plugins.memory.ann import CandidateLeg
from tests.plugins.memory.conftest import Api, start
from tests.plugins.memory.test_ann import ANN, QUERIES, batch, ids, records, state

pytestmark = pytest.mark.postgres_only("the PostgreSQL store's semantic leg")


def test_exact_search_on_postgresql(tmp_path):
    server = start(tmp_path / "home", memory=ANN)
    try:
        (tmp_path / "project").mkdir()
        api = Api(server, tmp_path / "project")
        batch(api, records(200, seed=2))  # above ann_min_records (150)
        found = ids(api.search(QUERIES[0], mode="semantic"))
        service, store, _ = state(api)
        leg = service.searcher.semantic(store, QUERIES[0], {"status": "ACTIVE"}, today(), 10)
        assert not isinstance(leg, CandidateLeg) and [h[0] for h in leg.hits][:len(found)] == found
        assert found and not service.searcher.ann.covers(store)
    finally:
        server.stop()
