"""Every memory verb of the client against the memory plugin (served from this process), its
error paths, export → import, and paging through 500 memories."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuralmind.client import (Conflict, Memory, NeuralMindClient, NotFound, Page,
                               ValidationFailed)
from tests.client.conftest import client_of, git_repo, needs


@pytest.fixture(scope="module")
def repo(served, tmp_path_factory):
    nm = client_of(served)
    needs(nm, "/v1/projects/{project_id}/memories")
    root = git_repo(tmp_path_factory.mktemp("mem") / "repo",
                    {"store.py": "def save():\n    pass\n", "README.md": "# demo\n"})
    return nm.project(root)


def test_add_get_and_duplicates(repo):
    first = repo.memories.add("Use SQLite WAL for the store", "Readers never block the writer.",
                              files_affected=["store.py"], tags=["storage"], decision_type="config")
    assert isinstance(first, Memory) and first.id
    assert (first.status, first.decision_type, first.files_affected) == ("ACTIVE", "CONFIG", ["store.py"])
    assert len(first.commit_sha) == 40  # HEAD of the repository
    again = repo.memories.add("Use SQLite WAL mode", "Same idea, said twice.", files_affected=["store.py"])
    assert first.id in [d["id"] for d in again.possible_duplicates]
    got = repo.memories.get(first.id)
    assert got.title == first.title and got.raw["effective_status"] == "ACTIVE"


def test_errors(repo):
    made = repo.memories.add("Pin falcon below 5", "Its API changes.", id="pin-falcon")
    with pytest.raises(Conflict) as dup:
        repo.memories.add("again", "same id", id="pin-falcon")
    assert dup.value.status == 409
    with pytest.raises(ValidationFailed) as bad:
        repo.memories.add("t", "r", decision_type="NOPE")
    assert bad.value.status == 422 and bad.value.details["errors"]
    with pytest.raises(TypeError, match="if_match is the record's updated_at text, not int"):
        repo.memories.update(made.id, if_match=5, rationale="late")
    with pytest.raises(Conflict) as stale:
        repo.memories.update(made.id, if_match="2000-01-01T00:00:00.000Z", rationale="late")
    assert stale.value.status == 412
    for wrong, said in ((["id"], r"an id is non-empty text, not \['id'\]"),
                        ("lone \ud800", "holds a lone surrogate, which no URL carries"),
                        (f"{made.id}/history", "holds a /, which no id does")):
        with pytest.raises(ValueError, match=said):  # named here, before any request
            repo.memories.get(wrong)
    assert repo.memories.add("Tags as a set", "r", tags={"b", "a"}).tags == ["a", "b"]
    with pytest.raises(NotFound) as missing:
        repo.memories.get("no-such-memory")
    assert missing.value.code == "memory_not_found"
    for route in ("stats", "export", "decay-policy"):  # another route's answer is no record
        for verb in (repo.memories.get, repo.memories.delete, repo.memories.history):
            with pytest.raises(NotFound) as named:
                verb(route)
            assert (named.value.status, named.value.code) == (404, "memory_not_found")
            assert f"'{route}' names a route, never a record" in named.value.message


def test_lifecycle_history_and_feedback(repo):
    m = repo.memories.add("Cache vectors per process", "Workers share nothing in memory.")
    edited = repo.memories.update(m.id, if_match=m.updated_at, rationale="Workers share SQLite only.",
                                  tags=["perf"], evidence_append=["bench/memory.py"])
    assert edited.rationale == "Workers share SQLite only." and edited.evidence == ["bench/memory.py"]
    assert repo.memories.invalidate(m.id, "superseded").status == "INVALIDATED"
    assert repo.memories.restore(m.id).status == "ACTIVE"
    down = repo.memories.feedback(m.id, helpful=False, note="misleading")
    assert down.confidence < 1.0
    for loose in ("no", None, 1):  # not read as true or false by whatever it happens to be
        with pytest.raises(TypeError, match="helpful must be True or False"):
            repo.memories.feedback(m.id, helpful=loose)
    assert repo.memories.get(m.id).confidence == down.confidence
    kinds = [e["kind"] for e in repo.memories.history(m.id)]
    assert kinds == ["created", "amended", "invalidated", "restored", "feedback"]
    amended = list(repo.memories.history(m.id))[1]
    assert amended["changes"]["rationale"] == ["Workers share nothing in memory.",
                                               "Workers share SQLite only."]
    repo.memories.delete(m.id)
    with pytest.raises(NotFound):
        repo.memories.get(m.id)
    with pytest.raises(NotFound):
        repo.memories.delete(m.id)


def test_search_and_filters(repo):
    repo.memories.add("Retry only idempotent requests", "A write must never land twice.",
                      tags=["client"], decision_type="BUGFIX")
    hits = repo.memories.search("idempotent retry", mode="keyword")
    assert hits and hits[0].title == "Retry only idempotent requests" and hits[0].score is not None
    assert [m.title for m in repo.memories.list(tag="client")] == ["Retry only idempotent requests"]
    assert all(m.decision_type == "BUGFIX" for m in repo.memories.list(type="BUGFIX"))
    assert repo.memories.search("zzzqqq nothing like it", mode="keyword") == []
    # what the search said besides its hits: the mode it ran, a notice (that nothing fits)
    said = "nothing relevant found: no record is close enough to the query in meaning or words"
    nothing = repo.memories.search("zzzqqq nothing like it")
    assert nothing == [] and nothing.mode == "hybrid" and nothing.notice == said
    assert nothing.raw == {"project_id": repo.id, "query": "zzzqqq nothing like it",
                           "mode": "hybrid", "results": [], "notice": said}
    assert hits.mode == "keyword" and hits.raw["results"][0]["title"] == hits[0].title
    # kind, as list() and the docs name it (search() raised TypeError), or kinds
    for kinds in ({"kind": "decision"}, {"kind": ["decision"]}, {"kinds": ["decision"]}):
        assert [m.title for m in repo.memories.search("idempotent retry", mode="keyword",
                                                      **kinds)] == [hits[0].title], kinds
    assert repo.memories.search("idempotent retry", mode="keyword", kind=["fact"]) == []


def test_export_import_round_trip(repo, nm, tmp_path):
    repo.memories.add("Export as JSONL", "One record per line streams.", tags=["io"])
    exported = list(repo.memories.export())
    assert exported and {"memory", "history"} <= set(exported[0])
    other = nm.project(git_repo(tmp_path / "copy", {"a.py": "x = 1\n"}))
    result = other.memories.import_(exported)
    assert result["created"] == len(exported)
    assert [line["memory"] for line in other.memories.export()] == [l["memory"] for l in exported]
    assert other.memories.import_(exported)["skipped"] == len(exported)


def test_batch_and_paging_through_500(nm, tmp_path):
    needs(nm, "/v1/projects/{project_id}/memories/batch")
    p = nm.project(git_repo(tmp_path / "many", {"m.py": "pass\n"}))
    result = p.memories.batch([{"op": "create", "title": f"decision {i}", "rationale": f"why {i}"}
                               for i in range(500)])
    assert len(result["items"]) == 500
    first = p.memories.page(limit=50)
    assert isinstance(first, Page) and len(first.items) == 50 and first.next_cursor
    ids = [m.id for m in p.memories.list()]
    assert len(ids) == 500 == len(set(ids))
    assert set(ids) == {item["id"] for item in result["items"]}
    with pytest.raises(ValidationFailed) as bad:  # all or nothing
        p.memories.batch([{"op": "create", "title": "ok", "rationale": "ok"},
                          {"op": "create", "title": ""}])
    assert "1" in str(bad.value.details)
    assert sum(1 for _ in p.memories.list()) == 500


# printable text: Python and the server's validator agree on what whitespace is stripped
TEXT = st.characters(blacklist_categories=("Cs", "Cc"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=st.text(TEXT, min_size=1, max_size=80).filter(lambda t: t.strip()),
       rationale=st.text(TEXT, min_size=1, max_size=300).filter(lambda t: t.strip()),
       mid=st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}\Z"))
def test_any_text_and_id_round_trip(repo, title, rationale, mid):
    """Unicode bodies and every id the server allows survive JSON and URL quoting."""
    try:
        made = repo.memories.add(title, rationale, id=f"h-{mid}")
    except Conflict:  # hypothesis may draw the same id twice
        made = repo.memories.get(f"h-{mid}")
    else:
        assert (made.title, made.rationale) == (title.strip(), rationale.strip())
    assert repo.memories.get(made.id).id == made.id == f"h-{mid}"
    assert [e["kind"] for e in repo.memories.history(made.id)][0] == "created"


def test_model_v2_verbs(repo):
    """Kinds, links and graph, contradictions and their resolution, tags and collections,
    decay and consolidation jobs, stats and timeline — each through its client verb."""
    old = repo.memories.add("Use password_encryption = md5", "Role passwords are MD5 hashes.",
                            files_affected=["store.py"], kind="fact")
    new = repo.memories.add("Use password_encryption = scram-sha-256", "The PostgreSQL 14 default.",
                            files_affected=["store.py"], kind="fact")
    assert (new.kind, new.importance, new.pinned) == ("fact", 0.6, False) and new.strength > 0.5
    assert new.contradictions["count"] == 1
    [found] = list(repo.memories.contradictions(memory_id=new.id))
    assert repo.memories.check_contradictions(new.id)["items"] == [found]
    resolved = repo.memories.resolve(found["id"], "keep_newest")
    assert resolved["superseded"] == [old.id] and repo.memories.get(old.id).status == "SUPERSEDED"
    assert [l["type"] for l in repo.memories.links(new.id)] == ["supersedes"]
    dep = repo.memories.add("Rotate role passwords yearly", "Audit asks for it.")
    link = repo.memories.link(dep.id, new.id, "depends_on", note="needs scram")
    assert link["type"] == "depends_on"
    graph = repo.memories.graph(dep.id, depth=2)
    assert {n["id"] for n in graph["nodes"]} == {dep.id, new.id, old.id}
    repo.memories.unlink(dep.id, new.id)
    assert repo.memories.links(dep.id) == []
    assert repo.memories.tag(dep.id, "security", "audit").tags == ["security", "audit"]
    assert repo.memories.untag(dep.id, "audit").tags == ["security"]
    assert {"tag": "security", "count": 1} in repo.memories.tags()
    saved = repo.memories.save_collection("security", tag=["security"], description="sec")
    assert saved["filters"]["tag"] == ["security"]
    assert [m.id for m in repo.memories.list(collection="security")] == [dep.id]
    assert [c["name"] for c in repo.memories.collections()] == ["security"]
    repo.memories.delete_collection("security")
    assert repo.memories.contradiction_config(threshold=0.7)["threshold"] == 0.7
    assert repo.memories.decay_policy(archive_threshold=0.02)["archive_threshold"] == 0.02
    assert repo.memories.decay_policy()["enabled"] is True
    job = repo.memories.decay(dry_run=True)
    assert job.status == "done" and job.result["dry_run"] is True
    job = repo.memories.consolidate(dry_run=True, kinds=["fact"])
    assert job.status == "done" and job.result["clusters"] == []
    stats = repo.memories.stats()
    assert stats["by_kind"]["fact"] == 2 and stats["by_status"]["SUPERSEDED"] == 1
    assert [e["kind"] for e in repo.memories.timeline(old.id)][-1] == "contradiction_resolved"
    assert repo.memories.export_markdown().startswith("# Memories\n")
    result = repo.memories.batch([{"op": "invalidate", "id": dep.id, "reason": "done"},
                                  {"op": "patch", "id": "missing", "rationale": "x"}],
                                 atomic=False)
    assert [i["status"] for i in result["items"]] == ["ok", "error"]
    with pytest.raises(ValidationFailed):
        repo.memories.resolve(found["id"], "keep_everything")
    with pytest.raises(NotFound) as missing:
        repo.memories.graph("no-such-memory")
    assert missing.value.code == "memory_not_found"


def test_a_misspelled_filter_or_change_is_refused_before_it_is_sent(repo):
    """The server ignores a field it does not know: `list(tags="qa")` listed every record (a
    delete loop over it would have deleted them all), `update(title=…)` changed nothing and
    answered 200. The client names the field, from the server's own OpenAPI document."""
    made = repo.memories.add("Tag the release", "r", tags=["qa"])
    calls = [
        (lambda: repo.memories.list(tags="qa"), r"^list\(\) got 'tags', which GET "
         r"/v1/projects/\{project_id\}/memories does not take: it takes agent, author, "),
        (lambda: repo.memories.page(limt=2), r"^page\(\) got 'limt'"),
        (lambda: repo.memories.search("release", tags="qa"), r"^search\(\) got 'tags'"),
        (lambda: repo.memories.add("t", "r", titel="x"), r"^add\(\) got 'titel'"),
        (lambda: repo.memories.update(made.id, title="new"), r"^update\(\) got 'title', which "
         r"PATCH /v1/projects/\{project_id\}/memories/\{memory_id\} does not take"),
        (lambda: repo.memories.save_collection("qa", tags=["qa"]), r"^save_collection\(\) got "),
        (lambda: repo.memories.decay_policy(halflife_days=3), r"^decay_policy\(\) got "),
        (lambda: repo.memories.contradiction_config(treshold=0.5), r"^contradiction_config\(\)"),
        (lambda: repo.memories.list(limit=5), r"^list\(\) reads every page itself: give limit "
                                              r"to page\(\) instead"),
    ]
    for call, said in calls:
        with pytest.raises(TypeError, match=said):
            call()
    with pytest.raises(ValueError, match="if_match is empty"):  # it wrote unconditionally
        repo.memories.update(made.id, if_match="", rationale="late")
    assert repo.memories.get(made.id).title == "Tag the release"
    assert [m.id for m in repo.memories.list(tag="qa")] == [made.id]  # the right names work
    assert repo.memories.search("release", tag="qa")[0].id == made.id


def test_a_sweep_with_a_timeout_that_is_no_time_never_starts(repo):
    """`decay(timeout=0)` ran a real sweep (records may be archived), then raised."""
    before = [j.id for j in repo._nm.jobs.list(project=repo.id)]
    for call in (lambda: repo.memories.decay(timeout=0),
                 lambda: repo.memories.consolidate(timeout=-5)):
        with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
            call()
    assert [j.id for j in repo._nm.jobs.list(project=repo.id)] == before


def test_every_write_to_one_record_takes_if_match(repo):
    m = repo.memories.add("Guard the writes", "r")
    edited = repo.memories.update(m.id, rationale="r2")
    for call in (lambda: repo.memories.invalidate(m.id, "old", if_match=m.updated_at),
                 lambda: repo.memories.delete(m.id, if_match=m.updated_at)):
        with pytest.raises(Conflict) as refused:
            call()
        assert (refused.value.status, refused.value.code) == (412, "precondition_failed")
    gone = repo.memories.invalidate(m.id, "old", if_match=edited.updated_at)
    back = repo.memories.restore(m.id, if_match=gone.updated_at)
    with pytest.raises(ValueError, match="if_match is empty"):
        repo.memories.delete(m.id, if_match=" ")
    repo.memories.delete(m.id, if_match=back.updated_at)
    with pytest.raises(NotFound):
        repo.memories.get(m.id)


def test_none_clears_what_may_be_empty_and_leaves_the_rest(repo):
    """What docs/client.md says of ``update``: None clears tags, files and the review date;
    a field that cannot be empty stays as it is."""
    m = repo.memories.add("Pin numpy", "ABI breaks.", tags=["deps"], files_affected=["a.py"],
                          review_by="2999-01-01", confidence=0.7)
    after = repo.memories.update(m.id, tags=None, files_affected=None, review_by=None,
                                 rationale=None, confidence=None)
    assert (after.tags, after.files_affected, after.review_by) == ([], [], None)
    assert (after.rationale, after.confidence) == ("ABI breaks.", 0.7)


def test_a_flag_the_client_acts_on_is_true_or_false_never_any_truthy_value(repo):
    """`decay(wait="no")` waited, and `build(wait="no")` followed the build: a non-empty text
    is true to Python, so the client did the opposite of what was written."""
    before = [j.id for j in repo._nm.jobs.list(project=repo.id)]
    for call, name in ((lambda: repo.memories.decay(wait="no"), "wait"),
                       (lambda: repo.memories.consolidate(wait=0), "wait"),
                       (lambda: repo.build(wait="false"), "wait"),
                       (lambda: repo.ask("why?", stream="no"), "stream"),
                       (lambda: repo.next_files(["a.py"], full=1), "full")):
        with pytest.raises(TypeError, match=f"^{name} must be True or False, not "):
            call()
    assert [j.id for j in repo._nm.jobs.list(project=repo.id)] == before
    with pytest.raises(TypeError, match="^autostart must be True or False, not 'yes'"):
        NeuralMindClient(repo._nm.url, repo._nm.token, autostart="yes")


def test_a_lone_surrogate_in_a_query_parameter_is_named(repo):
    """It was a UnicodeEncodeError from urllib naming no argument."""
    with pytest.raises(ValueError, match=r"^tag 'a\\ud800' holds a lone surrogate"):
        list(repo.memories.list(tag="a\ud800"))


def test_a_header_no_request_carries_is_named_before_anything_is_sent(repo):
    """``mcp(session_id=…)`` with text beyond Latin-1 was a UnicodeEncodeError from
    http.client naming no argument; a line break, a ValueError about "header value"."""
    nm, ping = repo._nm, {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for session, shown in (("s\ud800", r"'s\\ud800'"), ("sé€", "'sé€'"), ("a\r\nX: y", "'a")):
        with pytest.raises(ValueError, match=f"^Mcp-Session-Id {shown}.* cannot be sent in an "
                                             "HTTP header"):
            nm.mcp(ping, session_id=session)
    with pytest.raises(ValueError, match=r"^project 'p\\ud800' holds a lone surrogate"):
        nm.mcp(ping, project="p\ud800")
    answer = nm.mcp(ping, project=repo.id)  # the project goes as a parameter, as before
    assert [m["result"] for m in answer.messages] == [{}]


def test_tags_are_each_their_own_argument_and_a_date_is_sent_as_iso(repo):
    """`untag(id, ["a"])` sent "['a']" and removed nothing; `add(review_by=date)` was a
    TypeError while `list(created_after=date)` worked."""
    import datetime as dt
    made = repo.memories.add("Review the cache", "r", tags=["a", "b"],
                             review_by=dt.date(2031, 1, 2))
    assert made.raw["review_by"].startswith("2031-01-02")
    for call in (repo.memories.untag, repo.memories.tag):
        with pytest.raises(TypeError, match=r"each tag is its own text argument"):
            call(made.id, ["a"])
    assert repo.memories.untag(made.id, "a").tags == ["b"]
