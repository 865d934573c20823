"""The second stage, the floor and passages through HTTP, each against its setting turned off."""

from __future__ import annotations

from tests.plugins.memory.conftest import Api, start

FILLER = ("The storage layer keeps one SQLite file per project so that a backup is a copy of a "
          "single file. Writes go through one transaction that holds the row, its history event "
          "and the version stamp. Readers never block the writer because the journal runs in "
          "write-ahead mode. Each worker caches the vector matrix and checks the version stamp "
          "before a search. The keyword index uses the porter stemmer, which matched plural and "
          "verb forms in our measurements. Vectors are filled in the background a moment after "
          "writes pause, one worker per project at a time. A lease row in the same file decides "
          "which worker embeds, and it is renewed between batches. Exports stream one record per "
          "line with its whole history, oldest first, so an import restores them exactly. ")
LONG = (FILLER * 2 + "Unrelated to storage: the office coffee machine is descaled every Friday "
        "with citric acid, and whoever empties it last refills the beans.")
SHORT = [("Pin numpy below 3", "numpy 3 changes the dtype promotion rules we rely on."),
         ("Escape HTML in rendered templates",
          "Unescaped user names produced a cross-site scripting hole.")]


def project(server, path) -> Api:
    path.mkdir()
    return Api(server, path)


def fill(api: Api) -> dict:
    for title, rationale in SHORT:
        api.create(title=title, rationale=rationale)
    return api.create(title="Storage engine notes", rationale=LONG)


def test_a_long_record_is_found_by_its_last_paragraph(server, tmp_path):
    """Past the model's 256 tokens, the record's own vector knows nothing of its last
    paragraph; its passages do."""
    on = project(server, tmp_path / "on")
    long = fill(on)
    found = on.search("who refills the coffee beans", mode="semantic")["results"]
    assert found[0]["id"] == long["id"] and found[0]["score"] >= 0.35
    off_server = start(tmp_path / "home-off", memory={"passages": False})
    try:
        off = project(off_server, tmp_path / "off")
        fill(off)
        assert off.search("who refills the coffee beans", mode="semantic")["results"] == []
    finally:
        off_server.stop()


def test_settings_turn_the_second_stage_and_the_floor_off(server, tmp_path):
    """Off, hybrid ranks by the fusion rule (a record best in both legs scores 1.0 when decay
    does not weigh in) and a question about nothing here returns every record; on (the default), scores are the
    ranker's calibrated probabilities and that question returns nothing. A hit's tail — records
    under 1 % of the best score — is left out unless ``hybrid_tail`` is 0."""
    default = project(server, tmp_path / "default")
    fill(default)
    top = default.search("pin numpy below 3")["results"][0]
    assert top["title"] == "Pin numpy below 3" and 0.0 < top["score"] < 1.0
    assert default.search("recipe for banana bread with walnuts")["results"] == []
    top = default.search("pin numpy below 3")["results"]
    assert all(hit["score"] >= 0.01 * top[0]["score"] for hit in top)
    plain = start(tmp_path / "home-plain", memory={"rerank": False, "floor": False,
                                                   "decay_weight": 0.0, "hybrid_tail": 0.0})
    try:
        api = project(plain, tmp_path / "plain")
        fill(api)
        top = api.search("pin numpy below 3")["results"][0]
        assert top["title"] == "Pin numpy below 3" and top["score"] == 1.0
        assert len(api.search("recipe for banana bread with walnuts")["results"]) == 3
    finally:
        plain.stop()
