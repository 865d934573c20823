"""``neuralmind eval code`` end to end on a tiny CoSQA-shaped set the test writes."""

from __future__ import annotations

import json
import os

from neuralmind.cli import main
from tests.support import seed_models

FUNCTIONS = [
    "def reverse_string(s):\n    return s[::-1]\n",
    "def read_json_file(path):\n    import json\n    with open(path) as fh:\n        return json.load(fh)\n",
    "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n",
    "def flatten(lists):\n    return [x for sub in lists for x in sub]\n",
    "def celsius_to_fahrenheit(c):\n    return c * 9 / 5 + 32\n",
]
QUERIES = [("python reverse a string", 0), ("load json from a file", 1),
           ("check whether a number is prime", 2), ("convert temperature to fahrenheit", 4)]


def test_eval_code_reports_every_mode(tmp_path, capsys):
    data = tmp_path / "cosqa"
    data.mkdir()
    (data / "code_idx_map.txt").write_text(json.dumps({c: i for i, c in enumerate(FUNCTIONS)}))
    (data / "cosqa-retrieval-dev-500.json").write_text(json.dumps(
        [{"doc": q, "retrieval_idx": i} for q, i in QUERIES]))
    before = dict(os.environ)
    work = tmp_path / "work"
    seed_models(work / "home")  # the throwaway project's home, kept in --workdir
    assert main(["eval", "code", "--dataset", str(data), "--json", "--workdir", str(work),
                 "--keyword-weights", "0,0.1"]) == 0
    assert dict(os.environ) == before  # the eval's home and settings stay its own
    report = json.loads(capsys.readouterr().out)
    assert (report["queries"], report["corpus"], report["chunks_embedded"]) == (4, 5, 5)
    assert set(report["modes"]) == {"keyword", "semantic", "hybrid@0", "hybrid@0.1"}
    assert report["modes"]["semantic"]["mrr@10"] == 1.0
    assert report["modes"]["hybrid@0.1"]["recall@1"] == 1.0
    assert 0 < report["modes"]["keyword"]["recall@10"] <= 1
    assert main(["eval", "code", "--dataset", str(tmp_path / "missing")]) == 2
    assert f"no dataset folder {tmp_path / 'missing'}" in capsys.readouterr().err
    assert main(["eval", "code", "--dataset", str(work)]) == 2
    assert "is not a CoSQA set: it has no code_idx_map.txt or cosqa-retrieval-dev-500.json" \
        in capsys.readouterr().err
    (data / "code_idx_map.txt").write_text("{not json")
    assert main(["eval", "code", "--dataset", str(data)]) == 2
    assert f"cannot read the CoSQA set in {data}: JSONDecodeError" in capsys.readouterr().err


def test_eval_impact_scores_walks_against_the_tests_that_call(tmp_path, capsys):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg/__init__.py").write_text("")
    (repo / "pkg/money.py").write_text("def round_money(x):\n    return round(x, 2)\n\n\n"
                                       "def format_money(x):\n    return str(round_money(x))\n")
    (repo / "pkg/other.py").write_text("class Box:\n    def round_money(self):\n        return 0\n")
    (repo / "tests/test_money.py").write_text(
        "from pkg.money import round_money\n\n\ndef test_round():\n"
        "    assert round_money(1.234) == 1.23\n")
    (repo / "tests/test_format.py").write_text(
        "from pkg import money\n\n\ndef test_format():\n    assert money.format_money(1) == '1'\n")
    before = sorted(p.name for p in repo.rglob("*"))
    assert main(["eval", "impact", str(repo), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["test_files"], report["with_tests"]) == (2, 2)
    resolved = report["walks"]["resolved"]
    assert resolved["depth1"]["precision"] == 1.0 and resolved["depth1"]["recall"] == 1.0
    assert resolved["depth3"]["predicted"] == 3  # test_format, through format_money
    named = report["walks"]["bare name (before)"]["depth1"]
    assert named["precision"] < 1.0  # Box.round_money is matched by name
    assert sorted(p.name for p in repo.rglob("*")) == before  # the repository is only read
    assert main(["eval", "impact", str(tmp_path / "nowhere")]) == 2
    assert main(["eval", "impact", str(repo / "pkg")]) == 2  # no tests there
