"""Keyword queries drop the words that cost the most and say the least: in the search leg,
words in over half the records (bm25 weighs them ~0); in duplicate hints, all but the title's
rare words. A real store on each backend, no server needed."""

from __future__ import annotations

import pytest

from kernel.clock import today
from plugins.memory import records
from plugins.memory.models import MemorySettings
from plugins.memory.search import CORPUS_STOPWORD_MIN_RECORDS, HINT_MIN_RECORDS, Searcher
from plugins.memory.store import MemoryStore

NOW = "2026-01-01T00:00:00.000Z"
N = max(CORPUS_STOPWORD_MIN_RECORDS, HINT_MIN_RECORDS) + 100
EVERYTHING = {"status": "ALL"}


def fill(store: MemoryStore, root, items: list[tuple[str, str, str]]) -> None:
    """The records in one transaction (as a batch writes them): 5,000 commits, each a round
    trip on PostgreSQL, made the module wait ~20 s for what no test here is about."""
    built = [records.build({"id": mid, "title": title, "rationale": rationale}, root=root,
                           now=NOW, head="", errors=[]) for mid, title, rationale in items]
    with store.writing() as w:
        w.create([(rec, records.content_sha(rec), "t") for rec in built])


@pytest.fixture(scope="module")
def big(tmp_path_factory, new_store):
    """Enough records that all say "service" for both prunings; one about signing keys."""
    tmp_path = tmp_path_factory.mktemp("big")
    store = new_store("big")
    fill(store, tmp_path, [(f"m{i}", f"service note {i}", f"the service keeps record {i}")
                           for i in range(N)])
    fill(store, tmp_path, [("keys", "rotate the service signing keys weekly",
                            "the service signs tokens")])
    return store


def test_words_in_over_half_the_records_leave_the_keyword_leg(big):
    searcher = Searcher(MemorySettings(), kernel=None)
    assert searcher.informative(big, ["service", "signing"], 0.5, N) == ["signing"]
    hits = searcher.keyword(big, "service signing", EVERYTHING, today(), 10)
    assert [r["id"] for r, _ in hits] == ["keys"]  # not 600 ties on "service"
    # a query made only of common words keeps its rarest one and still finds records
    assert len(searcher.keyword(big, "service", EVERYTHING, today(), 10)) == 10


def test_duplicate_hints_match_the_titles_rare_words(big):
    searcher = Searcher(MemorySettings(), kernel=None)
    hits = searcher.similar_titles(big, "Rotate signing keys daily", EVERYTHING,
                                   today(), 4, exclude="new")
    assert [r["id"] for r, _ in hits] == ["keys"]
    assert searcher.similar_titles(big, "service", EVERYTHING, today(), 4,
                                   exclude="new")  # only common words: the rarest is kept


def test_counts_follow_the_store_and_small_stores_keep_every_word(tmp_path, big, new_store):
    searcher = Searcher(MemorySettings(), kernel=None)
    total = big.size_estimate()
    assert total == N + 1
    assert big.doc_counts(["service", "signing", "zzz"], total) == {
        "service": total, "signing": 1, "zzz": 0}
    small = new_store("small")
    fill(small, tmp_path, [(f"s{i}", "service note", "the service") for i in range(20)])
    assert searcher.informative(small, ["service", "note"], 0.5, 21) == ["service", "note"]


def test_the_keyword_leg_scores_a_bounded_number_of_matches(big):
    """From twice ``keyword_postings`` records on: rarest words first within the budget; a
    prefix when its matches fit, else the whole word; when even the rarest word matches
    more, keyword mode keeps it alone and hybrid's leg leaves it out (every record holds it:
    bm25 weighs it ~0). A smaller store keeps every word."""
    searcher = Searcher(MemorySettings(keyword_postings=N // 2), kernel=None)
    total = big.size_estimate()
    assert big.prefix_counts(["record", "sign"], total) == {"record": N, "sign": 1}
    assert searcher.budgeted(big, ["signing", "note"], keep_one=True) == '"signing"*'
    wide = Searcher(MemorySettings(keyword_postings=N), kernel=None)  # not bounded yet
    assert wide.budgeted(big, ["signing", "note"], keep_one=True) == '"signing"* OR "note"*'
    assert searcher.budgeted(big, ["service"], keep_one=True) == '"service"'
    assert searcher.budgeted(big, ["service"], keep_one=False) is None
    assert searcher.keyword(big, "service", EVERYTHING, today(), 10, full=False) == []
    assert len(searcher.keyword(big, "service", EVERYTHING, today(), 10)) == 10
    assert [r["id"] for r, _ in searcher.keyword(big, "service signing note", EVERYTHING,
                                                  today(), 10)] == ["keys"]
