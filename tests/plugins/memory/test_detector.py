"""The contradiction detector on its own: each rule on an example, what it must leave alone,
its figures on the shipped labelled pairs, and ``neuralmind eval contradictions``."""

from __future__ import annotations

import json

import pytest

from plugins.memory import detector
from plugins.memory.contradiction_eval import DATA, evaluate, load
from tests.support import run_cli


def rec(title: str, rationale: str = "", **kw) -> dict:
    return {"title": title, "rationale": rationale, **kw}


@pytest.mark.parametrize("a, b, kind, phrase", [
    (rec("Use password_encryption = md5", "Role passwords are stored as MD5 hashes."),
     rec("Use password_encryption = scram-sha-256",
         "PostgreSQL 14 made scram-sha-256 the default password_encryption."),
     "setting_value", "'md5' vs B 'scram-sha-256'"),
    (rec("Cache TTL is 300 seconds", "Entries expire after 300 seconds."),
     rec("Cache TTL is ten minutes", "Entries expire after ten minutes."),
     "setting_value", "cache"),
    (rec("Run CI on self-hosted Jenkins", "Jenkins builds every pipeline.", tags=["ci"]),
     rec("Replace Jenkins with GitHub Actions", "Workflows live next to the code.", tags=["ci"]),
     "replaces", "replace Jenkins"),
    (rec("Make the artifacts bucket public", "Anyone can download builds."),
     rec("Make the artifacts bucket private", "Builds are for the team only."),
     "polarity", "'public' (+) vs B 'private' (-)"),
])
def test_each_rule_names_the_conflicting_phrases(a, b, kind, phrase):
    verdict = detector.detect(a, b)
    assert verdict.is_contradiction and verdict.kind == kind, verdict
    assert phrase.lower() in verdict.explanation.lower(), verdict
    assert verdict == detector.detect(a, b)  # pure: the same answer twice


@pytest.mark.parametrize("a, b", [
    (rec("Cache TTL is 300 seconds", "Entries expire after 300 seconds."),
     rec("Cache TTL is five minutes", "Entries expire after five minutes.")),  # 300 s = 5 min
    (rec("Read-only role sessions last 12 hours"), rec("Read-write role sessions last 1 hour")),
    (rec("Stop descriptor leaks in the watcher", "Close every file we open."),
     rec("Descriptor leaks crash the watcher", "Leaks pile up over a day.")),
    (rec("Use Redis for the session cache"), rec("Pin numpy below 3")),
])
def test_compatible_pairs_are_left_alone(a, b):
    assert not detector.detect(a, b).is_contradiction


# a reviewer's false positives: neighbouring settings, or one setting of different subjects,
# were flagged as one setting with two values (0.9, "same setting (client, http)")
APART = [
    (rec("HTTP client read_timeout = 30 seconds", "Slow reports need long reads."),
     rec("HTTP client connect_timeout = 5 seconds", "Fail fast when the host is down.")),
    (rec("Postgres pool max_connections = 100", "Sized for the API."),
     rec("Redis pool max_connections = 20", "Sized for the cache.")),
    (rec("Retry uploads 3 times", "Flaky S3."), rec("Retry webhooks 5 times", "Receivers restart.")),
    # different key, in plain words, before or after the value
    (rec("Set the HTTP client read timeout to 30 seconds"),
     rec("Set the HTTP client connect timeout to 5 seconds")),
    (rec("Use a 30 second read timeout"), rec("Use a 5 second connect timeout")),
    (rec("Worker pool size is 8"), rec("Connection pool size is 20")),
    # different subject: before the verb, or after the value
    (rec("Uploads are retried 3 times"), rec("Webhooks are retried 5 times")),
    (rec("Set max_connections = 100 for the Postgres pool"),
     rec("Set max_connections = 20 for the Redis pool")),
    (rec("Cache TTL for sessions is 30 minutes"), rec("Cache TTL for avatars is 1 day")),
]


@pytest.mark.parametrize("a, b", APART)
def test_different_settings_or_subjects_are_not_one_setting(a, b):
    on_a_file = {"files_affected": ["net/http.py"]}  # a shared file only raises confidence
    for x, y in ((a, b), ({**a, **on_a_file}, {**b, **on_a_file})):
        verdict = detector.detect(x, y)
        assert not verdict.is_contradiction, verdict
        assert not [f for f in detector.findings(x, y)[0] if f[1] == "setting_value"]


@pytest.mark.parametrize("a, b, values", [
    (rec("Postgres pool max_connections = 100", "Sized for the API."),
     rec("Postgres pool max_connections = 20", "Smaller box."), "'100' vs B '20'"),
    (rec("HTTP client read_timeout = 30 seconds", "Slow reports need long reads."),
     rec("Lower the HTTP client read_timeout to 10 seconds", "Slow reads hide outages."),
     "'30 seconds' vs B '10 seconds'"),
    (rec("Retry uploads 3 times", "Flaky S3."), rec("Retry uploads 5 times", "S3 got flakier."),
     "'3 times' vs B '5 times'"),
    (rec("Uploads are retried 3 times"), rec("Retry uploads 5 times"), "'3 times' vs B '5 times'"),
    (rec("Set max_connections = 100 for the Postgres pool"),
     rec("Set max_connections = 20 for the Postgres pool"), "'100' vs B '20'"),
    (rec("Use a 30 second read timeout"), rec("Use a 10 second read timeout"),
     "'30 second' vs B '10 second'"),
    (rec("Connection pool size is 8"), rec("Raise the connection pool size to 20"),
     "'8' vs B '20'"),
])
def test_the_same_setting_of_the_same_subject_with_other_values_still_conflicts(a, b, values):
    verdict = detector.detect(a, b)
    assert verdict.is_contradiction and verdict.kind == "setting_value", verdict
    assert verdict.confidence >= 0.7 and values in verdict.explanation, verdict


def test_a_shared_subject_raises_confidence():
    a = rec("Use password_encryption = md5")
    b = rec("Use password_encryption = scram-sha-256")
    alone = detector.detect(a, b, cosine=0.3).confidence
    shared = detector.detect({**a, "files_affected": ["pg.conf"], "tags": ["db"]},
                             {**b, "files_affected": ["pg.conf"], "tags": ["db"]},
                             cosine=0.3).confidence
    assert shared > alone


def test_figures_on_the_shipped_pairs_hold():
    """The detector's figures as measured when it was frozen (bench/data/contradictions):
    no false positive anywhere; recall dev .791, check .714, fresh (blind) .312."""
    pairs = load([DATA / "pairs.jsonl", DATA / "pairs_fresh.jsonl"])
    assert len(pairs) == 272
    assert sum(p["label"] == "contradicting" for p in pairs if p["split"] != "fresh") >= 75
    got = evaluate(pairs, None, detector.THRESHOLD)["splits"]
    assert {s: (f["tp"], f["fp"], f["fn"]) for s, f in got.items()} == {
        "dev": (34, 0, 9), "check": (30, 0, 12), "fresh": (5, 0, 11),
        "labelled (not fresh)": (64, 0, 21), "all": (69, 0, 32)}
    assert got["labelled (not fresh)"]["precision"] >= 0.85
    assert got["labelled (not fresh)"]["recall"] >= 0.6


def test_eval_contradictions_command(tmp_path):
    code, out, err = run_cli("eval", "contradictions", "--no-cosine", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["splits"]["fresh"]["recall"] == 0.312 and not result["cosine"]
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "x", "label": "contradicting", "split": "mine",
                                "a": rec("Enable the cache"), "b": rec("Disable the cache")})
                    + "\n")
    code, out, _ = run_cli("eval", "contradictions", "--no-cosine", "--pairs", str(mine))
    assert code == 0 and "mine" in out and "1.000" in out
    code, _, err = run_cli("eval", "contradictions", "--pairs", str(tmp_path / "none.jsonl"))
    assert code == 2 and "no pairs file" in err and "none.jsonl" in err
    mine.write_text('{"a": {"title": "t"}}\n')
    code, _, err = run_cli("eval", "contradictions", "--no-cosine", "--pairs", str(mine))
    assert code == 2 and "line 1 is not a labelled pair" in err
    code, _, err = run_cli("eval", "contradictions", "--threshold", "2")
    assert code == 2 and "--threshold" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("[memory]\nkeyword_weigth = 1\n[kernel\n")
    code, _, err = run_cli("eval", "contradictions", "--no-cosine", "--config", str(bad))
    assert code == 2 and "not valid TOML" in err  # the model left out, the config still read
