"""``neuralmind eval memory`` on a tiny BEIR folder and a tiny LoCoMo file, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT, provide_model, seed_models

pytestmark = [pytest.mark.slow, pytest.mark.sqlite_only(
    "the command keeps its collection in its --work folder's SQLite files")]


def run(*args: str, home) -> subprocess.CompletedProcess:
    seed_models(home)
    if "--work" in args:  # its kernel caches the model there (plugins/memory/eval.py)
        provide_model(Path(args[args.index("--work") + 1]) / "home" / "models")
    env = {**os.environ, "NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth,memory"}
    return subprocess.run([sys.executable, "-m", "neuralmind.cli", "eval", "memory", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def write_beir(data):
    (data / "qrels").mkdir(parents=True)
    docs = {"d1": ("Aspirin and heart attacks", "Daily aspirin lowers the risk of infarction."),
            "d2": ("Vitamin D and bones", "Vitamin D supplements strengthen bone density."),
            "d3": ("Coffee and sleep", "Caffeine late in the day delays sleep onset.")}
    (data / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n"
                                               for k, (t, x) in docs.items()))
    queries = {"q1": "aspirin reduces heart attack risk", "q2": "caffeine hurts sleeping"}
    (data / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n"
                                                for k, v in queries.items()))
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n")


def write_locomo(data):
    conv = {"sample_id": "c1", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "I started learning violin."}]},
        "qa": [{"question": "What is the name of Ann's dog?", "evidence": ["D1:1"], "category": 1},
               {"question": "Which instrument does Bo play?", "evidence": ["D1:2"], "category": 4},
               {"question": "What did Bo say about Mars?", "evidence": [], "category": 5}]}
    data.mkdir()
    (data / "dev.json").write_text(json.dumps([conv]))


def test_beir_layout_scores_every_mode(tmp_path):
    data = tmp_path / "tiny"
    write_beir(data)
    done = run("--dataset", str(data), "--split", "test", "--work", str(tmp_path / "w"),
               "--fusion", "rrf:60", "--json", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["queries"] == 2
    for mode in ("keyword", "semantic", "hybrid", "hybrid[rrf:60]"):
        assert result[mode]["recall@1"] == 1.0 and result[mode]["ndcg@10"] == 1.0, mode
    again = run("--dataset", str(data), "--split", "test", "--work", str(tmp_path / "w"),
                "--mode", "keyword", home=tmp_path / "home")
    assert again.returncode == 0 and "recall@10" in again.stdout
    bad = run("--dataset", str(data), "--mode", "fuzzy", home=tmp_path / "home")
    assert bad.returncode == 2
    bad = run("--dataset", str(data), "--split", "nosuch", home=tmp_path / "home")
    assert bad.returncode == 2 and bad.stderr == (
        f"neuralmind: cannot read the dataset: {data / 'qrels' / 'nosuch.tsv'}: no such file or "
        "directory (--split nosuch)\n")
    for dsn, says in (("notadsn", "the database DSN is not one psycopg reads"),
                      ("postgresql://x@127.0.0.1:1/db", "the database at user=x dbname=db "
                                                        "host=127.0.0.1 port=1 cannot be reached")):
        bad = run("--dataset", str(data), "--split", "test", "--backend", "postgres",
                  "--dsn", dsn, home=tmp_path / "home")
        assert bad.returncode == 2 and bad.stderr.startswith(f"neuralmind: {says}"), bad.stderr
        assert len(bad.stderr.splitlines()) == 1


def test_locomo_layout_uses_categories_and_skips_category_5(tmp_path):
    data = tmp_path / "loco"
    write_locomo(data)
    done = run("--dataset", str(data), "--mode", "keyword,hybrid", "--json",
               "--work", str(tmp_path / "w"), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["queries"] == 2
    assert set(result["by_kind"]["hybrid"]) == {"category 1", "category 4"}
    assert result["hybrid"]["recall@10"] == 1.0


def test_negatives_are_another_sets_queries_answered_with_nothing(tmp_path):
    """The tiny BEIR set's medical questions asked of the tiny conversation, and back: the
    floor answers each with nothing, in every mode, and says what it cost its own queries."""
    beir, loco = tmp_path / "beir", tmp_path / "loco"
    write_beir(beir)
    write_locomo(loco)
    done = run("--dataset", str(loco), "--negatives", str(beir), "--split", "test",
               "--work", str(tmp_path / "w"), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("negatives"))
    assert line.endswith("answered with nothing: keyword 1.000, semantic 1.000, hybrid 1.000")
    assert "beir→loco (2): keyword 1.000, semantic 1.000, hybrid 1.000" in done.stdout
    assert "floor      own recall@10 lost: keyword 0.0000" in done.stdout
    back = run("--dataset", str(beir), "--split", "test", "--negatives", str(loco), "--json",
               "--work", str(tmp_path / "w2"), home=tmp_path / "home")
    assert back.returncode == 0, back.stderr
    negatives = json.loads(back.stdout)["negatives"]
    assert negatives["queries"] == {"loco": 2}
    assert negatives["empty"] == {"keyword": 1.0, "semantic": 1.0, "hybrid": 1.0}
    missing = run("--dataset", str(beir), "--split", "test", "--negatives",
                  str(tmp_path / "nowhere"), home=tmp_path / "home")
    assert missing.returncode == 2 and "no dataset folder" in missing.stderr
