"""A PATCH of an ignore rule that changes nothing writes nothing: its ``updated_at`` stays
when the rule last changed, as a memory's does, and no ``index.rule_updated`` event says it
changed; a real change moves it and says so."""

from __future__ import annotations

import time


def test_a_patch_that_changes_nothing_keeps_updated_at(server, project):
    pid, _ = project
    rules = f"/v1/projects/{pid}/ignore-rules"
    made = server.post(rules, {"type": "extension", "value": ".log", "reason": "noise"}).json
    rule = f"{rules}/{made['id']}"
    for patch in ({}, {"reason": None}, {"value": None}, {"reason": "noise"}, {"value": "LOG"},
                  {"enabled": True}, {"value": ".log", "enabled": True, "reason": "noise"}):
        time.sleep(0.002)  # updated_at counts milliseconds: a write would show
        r = server.patch(rule, patch)
        assert r.status == 200, (patch, r.body)
        assert r.json["updated_at"] == made["updated_at"] and r.json["files_removed"] == 0, patch
    assert server.get(rules).json["items"][-1]["updated_at"] == made["updated_at"]
    assert updates(server, made["id"]) == []
    time.sleep(0.002)
    changed = server.patch(rule, {"reason": "build noise"}).json
    assert changed["reason"] == "build noise" and changed["updated_at"] > made["updated_at"]
    assert updates(server, made["id"]) == ["build noise"]


def updates(server, rule_id: str) -> list[str]:
    """The reasons the ``index.rule_updated`` events of ``rule_id`` carry."""
    return [e.data["rule"]["reason"] for e in server.kernel.events.after(0)
            if e.kind == "index.rule_updated" and e.data["rule"]["id"] == rule_id]
