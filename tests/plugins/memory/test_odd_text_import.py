"""Odd text in an import, on both backends: a NUL in an export's history, links or
contradictions is refused naming its line and field, and nothing is written (SQLite stored it,
which no later `storage migrate --to postgres` could copy; PostgreSQL answered 500); those
fields are bounded; an export saved with a byte-order mark imports as it is."""

from __future__ import annotations

import codecs
import json

import pytest

from tests.kernel.test_odd_text import NO_NUL
from tests.plugins.memory.conftest import Api
from tests.plugins.memory.test_contradictions import MD5, SCRAM

JSONL = {"Content-Type": "application/x-ndjson"}


@pytest.fixture
def exported(api) -> tuple[Api, bytes, int]:
    """A project whose newer record's export line holds history (a feedback note), a link and
    a resolved contradiction: the project, its export, and that line's index."""
    older = api.create(**MD5)
    newer = api.create(**SCRAM)
    (found,) = newer["contradictions"]["items"]
    resolve = f"/v1/projects/{api.pid}/contradictions/{found['id']}/resolve"
    assert api.server.post(resolve, {"strategy": "keep_both"}).status == 200
    r = api.server.post(api.url(newer["id"], "links"),
                        {"target": older["id"], "type": "relates_to", "note": "same setting"})
    assert r.status == 201, r.body
    r = api.server.post(api.url(newer["id"], "feedback"), {"signal": "helpful", "note": "ok"})
    assert r.status == 200, r.body
    body = api.server.get(api.url(tail="export")).body
    lines = [json.loads(line) for line in body.decode().splitlines()]
    (at,) = [i for i, line in enumerate(lines) if line["memory"]["id"] == newer["id"]]
    line = lines[at]
    assert line["history"] and line["links"] and line["contradictions"][0]["resolved_by"]
    return api, body, at


def changed(body: bytes, at: int, section: str, field: str, value) -> bytes:
    """The export with ``section[0].field`` of line ``at`` set to ``value``."""
    lines = [json.loads(line) for line in body.decode().splitlines()]
    lines[at][section][0][field] = value
    return "\n".join(json.dumps(line) for line in lines).encode()


def fresh(server, tmp_path) -> Api:
    """Another, empty project on the same server."""
    (tmp_path / "fresh").mkdir()
    return Api(server, tmp_path / "fresh")


def refused(api: Api, body: bytes, before: bytes) -> list[dict]:
    """Import ``body`` over the project: a 422 that wrote nothing; its errors."""
    r = api.server.post(api.url(tail="import") + "?mode=overwrite", body=body, headers=JSONL)
    assert r.status == 422, r.body
    assert r.error["code"] == "validation_error"
    assert r.error["message"] == "the import did not validate; nothing was written"
    assert api.server.get(api.url(tail="export")).body == before
    return r.error["details"]["errors"]


@pytest.mark.parametrize("section, field", [
    ("history", "id"), ("history", "actor"), ("history", "note"),
    ("links", "actor"), ("links", "note"), ("links", "target"),
    ("contradictions", "explanation"), ("contradictions", "resolved_by")])
def test_a_nul_in_history_links_or_contradictions_is_refused_naming_it(exported, section, field):
    api, before, at = exported
    errors = refused(api, changed(before, at, section, field, "a\u0000b"), before)
    line = f"line {at + 1}"
    if field == "target":  # a record's id: its pattern says no NUL
        assert [e["loc"] for e in errors] == [["body", line, section, 0, field]]
        assert errors[0]["type"] == "string_pattern_mismatch"
    else:
        assert errors == [{"loc": ["body", line, section, 0, field], "msg": NO_NUL,
                           "type": "value_error"}]


@pytest.mark.parametrize("section, field, most", [
    ("history", "actor", 200), ("history", "id", 200), ("links", "note", 2_000),
    ("contradictions", "resolved_by", 200), ("contradictions", "explanation", 520_000)])
def test_those_fields_are_bounded(exported, section, field, most):
    api, before, at = exported
    errors = refused(api, changed(before, at, section, field, "x" * (most + 1)), before)
    assert [(e["loc"][1:], e["type"]) for e in errors] == [
        ([f"line {at + 1}", section, 0, field], "string_too_long")]
    assert f"at most {most:,}".replace(",", "") in errors[0]["msg"].replace(",", "")


def test_an_export_comes_back_as_it_was(exported, server, tmp_path):
    """The bounds take everything the server writes, as it wrote it — a stale event's note
    lists up to 500 changed files of 1,024 characters — and nothing is stripped or changed."""
    api, before, at = exported
    files = ", ".join(f"src/{i:03}/" + "p" * 1_015 for i in range(500))
    stale = {"id": "ev_0123456789abcdef", "at": "2030-01-01T00:00:00.000Z", "kind": "stale",
             "actor": " padded actor ", "changes": {"status": ["ACTIVE", "STALE"]},
             "note": f"files changed since 0123456789ab: {files}"}
    lines = [json.loads(line) for line in before.decode().splitlines()]
    lines[at]["history"].append(stale)
    body = "\n".join(json.dumps(line) for line in lines).encode()
    other = fresh(server, tmp_path)
    r = server.post(other.url(tail="import"), body=body, headers=JSONL)
    assert r.status == 200, r.body[:500]
    assert r.json["created"] == 2
    after = [json.loads(line) for line in server.get(other.url(tail="export")).body.splitlines()]
    assert after == lines


def test_an_export_saved_with_a_byte_order_mark_imports(exported, server, tmp_path):
    """An editor that marks UTF-8 writes EF BB BF first (RFC 8259 §8.1 lets a reader skip it):
    it was read as the first line's text, "Invalid JSON"."""
    api, before, _ = exported
    other = fresh(server, tmp_path)
    r = server.post(other.url(tail="import"), body=codecs.BOM_UTF8 + before, headers=JSONL)
    assert r.status == 200, r.body
    assert r.json == {"created": 2, "overwritten": 0, "skipped": 0}
    assert server.get(other.url(tail="export")).body == before
    # one BOM is the encoding's mark; a second is text where JSON has none: line 1, refused
    errors = refused(api, codecs.BOM_UTF8 * 2 + before, before)
    assert [e["loc"][:2] for e in errors] == [["body", "line 1"]]
