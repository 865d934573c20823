"""``neuralmind eval memory``, ``eval decisions`` and ``eval contradictions`` given files they
cannot use: one line on stderr naming the file (and the line) and what is wrong, exit 2, no
traceback, and nothing made in ``--work``. The dataset is read before any model or store, so
these run in process. A file that starts with a UTF-8 byte-order mark is read, not refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugins.memory.test_eval_command import write_beir, write_locomo
from tests.support import run_cli

pytestmark = pytest.mark.sqlite_only("the commands fail on their input, before any store (or "
                                     "keep theirs in SQLite files of their own)")


def _refused(*argv: str, says: str, work: Path | None = None) -> None:
    code, out, err = run_cli(*argv, *(("--work", str(work)) if work else ()))
    assert (code, out) == (2, ""), (code, out, err)
    assert err == f"neuralmind: {says}\n", err
    assert work is None or not work.exists()


def test_a_line_that_is_not_json_is_named_with_its_file(tmp_path):
    data = tmp_path / "tiny"
    write_beir(data)
    corpus, queries = data / "corpus.jsonl", data / "queries.jsonl"
    good = corpus.read_text()
    corpus.write_text(good + "{not json\n")
    _refused("eval", "memory", "--dataset", str(data), "--split", "test", work=tmp_path / "w",
             says=f"{corpus} line 4 is not JSON (Expecting property name enclosed in double "
                  "quotes, column 2)")
    corpus.write_text(good + "\n")  # a blank line is no record, and no error
    queries.write_text('{"_id": "q1", "text": "aspirin"}\n[1, 2]\n')
    _refused("eval", "memory", "--dataset", str(data), "--split", "test", work=tmp_path / "w",
             says=f"{queries} line 2 is not a JSON object")
    queries.write_text('{"_id": "q1"}\n')
    _refused("eval", "memory", "--dataset", str(data), "--split", "test", work=tmp_path / "w",
             says=f"{queries} line 1: text is missing")
    queries.write_bytes(b'{"_id": "q1", "text": "caf\xe9"}\n')
    _refused("eval", "memory", "--dataset", str(data), "--split", "test", work=tmp_path / "w",
             says=f"{queries} is not UTF-8 text")


def test_no_query_with_a_gold_answer_is_an_error_not_zero_queries(tmp_path):
    data = tmp_path / "tiny"
    write_beir(data)
    qrels = data / "qrels" / "test.tsv"
    qrels.write_text("this is not\na qrels file at all\n")
    _refused("eval", "memory", "--dataset", str(data), "--split", "test", work=tmp_path / "w",
             says=f"no query has a gold answer: {qrels} gives a relevant document (query-id, "
                  f"corpus-id, score above 0: tab-separated) to none of the 2 queries of "
                  f"{data / 'queries.jsonl'}")
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\tyes\n")
    _refused("eval", "memory", "--dataset", str(data), "--split", "test", work=tmp_path / "w",
             says=f"{qrels} line 2: the score 'yes' is not a number (query-id, corpus-id, "
                  "score: tab-separated)")
    loco = tmp_path / "loco"
    write_locomo(loco)
    conv = json.loads((loco / "dev.json").read_text())
    for qa in conv[0]["qa"]:
        qa["evidence"] = ["D9:9"]  # no turn of the conversation
    (loco / "dev.json").write_text(json.dumps(conv))
    _refused("eval", "memory", "--dataset", str(loco), work=tmp_path / "w",
             says=f"no question has a gold answer: none in {loco}/*.json has evidence naming "
                  "one of its turns (category 5 is left out)")
    (loco / "dev.json").write_text('[{"conversation": ')
    _refused("eval", "memory", "--dataset", str(loco), work=tmp_path / "w",
             says=f"{loco / 'dev.json'} is not JSON (Expecting value, line 1, column 19)")
    (loco / "dev.json").write_text('[{"qa": []}]')
    _refused("eval", "memory", "--dataset", str(loco), work=tmp_path / "w",
             says=f"{loco / 'dev.json'} is not a list of LoCoMo conversations: a conversation "
                  "has no 'conversation'")
    qrels.write_text("q1\td1\t1\n")  # a good set, asked another's broken one
    _refused("eval", "memory", "--dataset", str(data), "--split", "test", "--negatives",
             str(loco), work=tmp_path / "w",
             says=f"{loco / 'dev.json'} is not a list of LoCoMo conversations: a conversation "
                  "has no 'conversation' (--negatives)")


def test_folds_it_cannot_read_are_named_in_words(tmp_path):
    data = tmp_path / "tiny"
    write_beir(data)
    run = ("eval", "memory", "--dataset", str(data), "--split", "test", "--mode", "keyword")
    missing = tmp_path / "nope.json"
    _refused(*run, "--folds", str(missing), work=tmp_path / "w",
             says=f"no such file: {missing} (--folds)")
    _refused(*run, "--folds", str(data), work=tmp_path / "w",
             says=f"{data} is a folder, not a file (--folds)")
    (tmp_path / "folds.json").write_text("{")
    _refused(*run, "--folds", str(tmp_path / "folds.json"), work=tmp_path / "w",
             says=f"{tmp_path / 'folds.json'} is not JSON (Expecting property name enclosed in "
                  "double quotes, line 1, column 2) (--folds)")
    (tmp_path / "folds.json").write_text('{"models": [], "folds": {"q": 0}}')
    code, _, err = run_cli(*run, "--folds", str(tmp_path / "folds.json"))
    assert code == 2 and err.startswith(f"neuralmind: {tmp_path / 'folds.json'} does not hold "
                                        "the ranker's folds") and err.count("\n") == 1, err


def test_eval_decisions_names_the_file_that_is_not_json(tmp_path):
    corpus, queries = tmp_path / "corpus.json", tmp_path / "queries.json"
    corpus.write_text("[]")
    queries.write_text('{"queries": [}')
    run = ("eval", "decisions", "--corpus", str(corpus), "--queries", str(queries))
    _refused(*run, says=f"{queries} is not JSON (Expecting value, line 1, column 14) "
                        "(--queries)")
    queries.write_text('{"queries": []}')
    corpus.write_text("[\n  {\"id\": 1,}\n]")
    _refused(*run, says=f"{corpus} is not JSON (Expecting property name enclosed in double "
                        "quotes, line 2, column 12) (--corpus)")
    corpus.write_bytes(b'["\xff"]')
    _refused(*run, says=f"{corpus} is not UTF-8 text (--corpus)")
    corpus.unlink()
    corpus.mkdir()
    _refused(*run, says=f"{corpus} is a folder, not a file (--corpus)")
    corpus.rmdir()
    _refused(*run, says=f"cannot read {corpus}: no such file (--corpus)")
    corpus.write_text("[]")
    queries.write_text('{"queries": [], "extra_decisions": 5}')
    _refused(*run, says=f"{queries}: extra_decisions must be a JSON list of decisions")
    queries.write_text('{"queries": [{"id": "a", "kind": "sentence", "query": "q", '
                       '"gold": [{"id": 1}]}]}')
    _refused(*run, says=f"{queries}: query a: gold holds something that is not a decision id "
                        "(text)")


@pytest.mark.parametrize("option, says", [
    (("--fusion", "rrf:x"), "argument --fusion: unknown fusion variant 'rrf:x' (rrf:K, blend:W, "
                            "floor:C)"),
    (("--fusion", "blend:5"), "argument --fusion: fusion variant 'blend:5': Input should be less "
                              "than or equal to 1"),
    (("--limit-queries", "-1"), "argument --limit-queries: -1 is less than 1"),
])
def test_a_variant_or_a_count_it_cannot_use_is_refused_before_the_kernel_starts(
        option, says, tmp_path):
    """A wrong --fusion was a SystemExit with exit 1 from inside the run, after the kernel."""
    data = tmp_path / "tiny"
    write_beir(data)
    code, out, err = run_cli("eval", "memory", "--dataset", str(data), *option,
                             "--work", str(tmp_path / "work"))
    assert (code, out) == (2, "") and err.splitlines()[-1].endswith(says)
    assert not (tmp_path / "work").exists()


BOM = b"\xef\xbb\xbf"  # what an editor on Windows starts a UTF-8 file with


def _pair(label: str, a: str, b: str) -> dict:
    return {"label": label, "a": {"title": a, "rationale": a}, "b": {"title": b, "rationale": b}}


def test_eval_contradictions_names_a_file_that_is_not_utf8_and_reads_past_a_bom(tmp_path):
    """Not UTF-8 was a UnicodeDecodeError traceback (exit 1); a BOM made line 1 "not a
    labelled pair"."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_bytes(b"\xff\xfe garbage\n")
    _refused("eval", "contradictions", "--no-cosine", "--pairs", str(pairs),
             says=f"{pairs} is not UTF-8 text")
    lines = [_pair("contradicting", "Use PostgreSQL for the ledger",
                   "Do not use PostgreSQL for the ledger"),
             _pair("unrelated", "Deploy on Tuesdays", "Logos are blue")]
    pairs.write_bytes(BOM + "".join(json.dumps(p) + "\r\n" for p in lines).encode())
    code, out, err = run_cli("eval", "contradictions", "--no-cosine", "--pairs", str(pairs),
                             "--json")
    assert code == 0, err
    assert json.loads(out)["splits"]["all"]["pairs"] == 2


def test_eval_memory_reads_dataset_files_past_a_bom(tmp_path):
    """corpus.jsonl and queries.jsonl with a BOM were "line 1 is not JSON"; a qrels file's
    BOM made its first query id another (that query had no gold answer)."""
    data = tmp_path / "tiny"
    write_beir(data)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (data / name).write_bytes(BOM + (data / name).read_bytes())
    (data / "qrels" / "test.tsv").write_bytes(BOM + b"q1\td1\t1\nq2\td3\t1\n")  # no header
    code, out, err = run_cli("eval", "memory", "--dataset", str(data), "--split", "test",
                             "--mode", "keyword", "--json", "--work", str(tmp_path / "w"),
                             env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert code == 0, err
    result = json.loads(out)
    assert result["queries"] == 2 and result["keyword"]["recall@1"] == 1.0


def test_eval_decisions_reads_its_files_past_a_bom(tmp_path):
    corpus, queries = tmp_path / "corpus.json", tmp_path / "queries.json"
    decision = {"id": "d1", "title": "Use PostgreSQL for the ledger", "rationale": "ACID",
                "decision_type": "architecture", "status": "active", "files_affected": [],
                "confidence": 0.9, "tags": []}
    corpus.write_bytes(BOM + json.dumps([decision]).encode())
    queries.write_bytes(BOM + json.dumps({"queries": [
        {"id": "q1", "kind": "sentence", "query": "which database holds the ledger",
         "gold": ["d1"]}]}).encode())
    code, out, err = run_cli("eval", "decisions", "--corpus", str(corpus), "--queries",
                             str(queries), "--mode", "keyword", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["decisions"] == 1
    assert result["by_kind"]["sentence"]["n"] == 1 and result["by_kind"]["title"]["n"] == 1
