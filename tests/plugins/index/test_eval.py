"""``neuralmind eval code`` end to end on a tiny CoSQA-shaped set the test writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import ROOT, seed_models

FUNCTIONS = [
    "def reverse_string(s):\n    return s[::-1]\n",
    "def read_json_file(path):\n    import json\n    with open(path) as fh:\n        return json.load(fh)\n",
    "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n",
    "def flatten(lists):\n    return [x for sub in lists for x in sub]\n",
    "def celsius_to_fahrenheit(c):\n    return c * 9 / 5 + 32\n",
]
QUERIES = [("python reverse a string", 0), ("load json from a file", 1),
           ("check whether a number is prime", 2), ("convert temperature to fahrenheit", 4)]


def test_eval_code_reports_every_mode(tmp_path):
    data = tmp_path / "cosqa"
    data.mkdir()
    (data / "code_idx_map.txt").write_text(json.dumps({c: i for i, c in enumerate(FUNCTIONS)}))
    (data / "cosqa-retrieval-dev-500.json").write_text(json.dumps(
        [{"doc": q, "retrieval_idx": i} for q, i in QUERIES]))
    env = {**os.environ, "NEURALMIND_HOME": str(tmp_path / "home")}
    work = tmp_path / "work"
    seed_models(work / "home")  # the throwaway project's home, kept in --workdir
    proc = subprocess.run([sys.executable, "-m", "neuralmind.cli", "eval", "code", "--dataset",
                           str(data), "--json", "--keyword-weights", "0,0.1", "--workdir",
                           str(work)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["queries"], report["corpus"], report["chunks_embedded"]) == (4, 5, 5)
    assert set(report["modes"]) == {"keyword", "semantic", "hybrid@0", "hybrid@0.1"}
    assert report["modes"]["semantic"]["mrr@10"] == 1.0
    assert report["modes"]["hybrid@0.1"]["recall@1"] == 1.0
    assert 0 < report["modes"]["keyword"]["recall@10"] <= 1
    bad = subprocess.run([sys.executable, "-m", "neuralmind.cli", "eval", "code", "--dataset",
                          str(tmp_path / "missing")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "cannot read the CoSQA set" in bad.stderr
