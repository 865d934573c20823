"""Consolidation: near-duplicates of one kind merged into one record that keeps every sentence,
the union of files and tags, and links back; pinned records and other kinds left alone."""

from __future__ import annotations

from plugins.memory.consolidation import merged_text, sentences


def test_sentences_are_kept_once_in_the_order_written():
    recs = [{"rationale": "Use WAL. Readers never block!\nOne writer at a time."},
            {"rationale": "readers never  block. Checkpoints run hourly."}]
    assert sentences(recs[0]["rationale"]) == ["Use WAL.", "Readers never block!",
                                               "One writer at a time."]
    assert merged_text(recs) == ("Use WAL. Readers never block!\nOne writer at a time.\n\n"
                                 "Checkpoints run hourly.")
    assert merged_text([{"rationale": "One."}, {"rationale": "one. Two."}]) == "One. Two."


def test_a_procedure_keeps_its_lines_and_the_steps_it_repeats():
    """Merged, a list's lines were run together and a step done twice was done once."""
    steps = "Release steps:\n- Bump the version.\n- Run the tests.\n- Build.\n- Run the tests."
    recs = [{"rationale": steps}, {"rationale": "Release steps:\n- Run the tests.\n- Upload."}]
    assert merged_text(recs) == steps + "\n\n- Upload."


def test_dry_run_lists_clusters_and_a_merge_keeps_everything(api):
    a = api.create(title="Use WAL mode for the SQLite store",
                   rationale="Readers never block the writer. Hooks write concurrently.",
                   files_affected=["store.py"], tags=["sqlite"], importance=0.6,
                   evidence=["bench 1"], review_by="2998-01-01")
    b = api.create(title="Use WAL mode for the SQLite store",
                   rationale="Readers never block the writer. The watcher writes too.",
                   files_affected=["store.py", "watch.py"], tags=["wal"], importance=0.9,
                   review_by="2999-01-01")
    pinned = api.create(title="Use WAL mode for the SQLite store",
                        rationale="Readers never block the writer.", files_affected=["store.py"],
                        pinned=True)
    other_kind = api.create(title="Use WAL mode for the SQLite store",
                            rationale="Readers never block the writer.",
                            files_affected=["store.py"], kind="fact")
    elsewhere = api.create(title="Use WAL mode for the SQLite store",
                           rationale="Readers never block the writer.", files_affected=["x.py"])
    api.create(title="Render templates on the server", rationale="No client-side JS.",
               files_affected=["store.py"])
    api.create(title="Use WAL mode for the SQLite store", tags=["sqlite"],  # contradicts a, b
               rationale="Readers never block the writer. wal_autocheckpoint = 0 here.")
    api.create(title="Use WAL mode for the SQLite store", tags=["sqlite"],
               rationale="Readers never block the writer. wal_autocheckpoint = 1000 here.")

    dry = api.job("consolidate", {"dry_run": True})
    assert dry["dry_run"] is True and dry["merged"] == 0
    [cluster] = dry["clusters"]
    assert cluster["kind"] == "decision" and cluster["merged_into"] is None
    assert cluster["ids"] == [b["id"], a["id"]]  # the most important leads
    assert api.get(a["id"])["status"] == "ACTIVE"

    done = api.job("consolidate", {"kinds": ["decision"]})
    [cluster] = done["clusters"]
    assert done["merged"] == 2
    merged = api.get(cluster["merged_into"])
    assert merged["title"] == b["title"] and merged["importance"] == 0.9
    assert merged["rationale"] == ("Readers never block the writer. Hooks write concurrently. "
                                   "The watcher writes too.")
    assert merged["files_affected"] == ["store.py", "watch.py"]
    assert merged["tags"] == ["sqlite", "wal"] and merged["evidence"] == ["bench 1"]
    assert merged["review_by"] == "2998-01-01"  # the lead's was dropped: the soonest is kept
    assert [e["kind"] for e in api.history(merged["id"])][:2] == ["created", "merged"]
    for original in (a, b):
        got = api.get(original["id"])
        assert got["status"] == "MERGED"
        kinds = [e["kind"] for e in api.history(original["id"])]
        assert kinds[0] == "created" and kinds[-2:] == ["linked", "merged"]
        links = api.server.get(api.url(original["id"], "links")).json["items"]
        assert [(x["type"], x["target"]) for x in links] == [("merged_into", merged["id"])]
    for untouched in (pinned, other_kind, elsewhere):
        assert api.get(untouched["id"])["status"] == "ACTIVE"
    r = api.server.post(api.url(a["id"], "restore"), {})
    assert r.status == 200 and r.json["status"] == "ACTIVE"
    for bad in ({"threshold": 0.2}, {"kinds": ["memo"]}, {"dry_run": "perhaps"}):
        assert api.server.post(api.url(tail="consolidate"), bad).status == 422, bad
