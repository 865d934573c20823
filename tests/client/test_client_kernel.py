"""The client against the kernel's own routes (served from this process): projects, jobs,
events, paging, and the error classes the kernel's statuses map to."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from neuralmind.client import (Event, Forbidden, NeuralMindAPIError, NotFound, Page, Project,
                               Unauthorized, ValidationFailed)
from tests.client.conftest import client_of


def test_health_and_openapi(nm, served):
    assert nm.url == served.url
    assert nm.health()["status"] == "ok"
    assert "/v1/projects" in nm.openapi()["paths"]
    assert "loaded" in nm.embeddings_status()


def test_project_registers_idempotently_and_is_found_by_id(nm, tmp_path):
    (tmp_path / "one").mkdir()
    first = nm.project(tmp_path / "one")
    again = nm.project(str(tmp_path / "one"))
    assert first.id == again.id and first.id.startswith("p_")
    assert isinstance(first.info, Project) and first.info.path == str(tmp_path / "one")
    by_id = nm.project(first.id)
    assert by_id.info.name == "one"
    assert by_id.info.raw["id"] == first.id
    with pytest.raises(dataclasses.FrozenInstanceError):
        by_id.info.name = "x"
    # a path that is no directory here cannot be an id either: said before any request
    for path, what in ((tmp_path / "missing", "no such directory"), (__file__, "not a directory")):
        with pytest.raises(ValueError, match=f"^{path}: {what}, nor a project id$"):
            nm.project(path)
    with pytest.raises(NotFound) as unknown:  # an id's shape is the server's to look up
        nm.project("p_000000000000")
    assert unknown.value.code == "project_not_found"


def test_projects_list_pages_lazily(nm, tmp_path):
    ids = set()
    for i in range(5):
        (tmp_path / f"p{i}").mkdir()
        ids.add(nm.projects.add(tmp_path / f"p{i}").id)
    page = nm.projects.page(limit=2)
    assert isinstance(page, Page) and len(page.items) == 2 and page.next_cursor
    second = nm.projects.page(limit=2, cursor=page.next_cursor)
    assert {p.id for p in page.items}.isdisjoint(p.id for p in second.items)
    assert ids <= {p.id for p in nm.projects.list()}


def test_remove_then_not_found(nm, tmp_path):
    (tmp_path / "gone").mkdir()
    handle = nm.project(tmp_path / "gone")
    handle.remove()
    with pytest.raises(NotFound) as info:
        nm.projects.get(handle.id)
    err = info.value
    assert (err.status, err.code) == (404, "project_not_found")
    assert err.request_id and handle.id in err.message


def test_error_classes_from_real_statuses(nm, served, tmp_path):
    with pytest.raises(ValidationFailed) as bad:
        nm.projects.add(tmp_path / "missing")
    assert bad.value.status == 422 and bad.value.details["errors"][0]["loc"] == ["body", "path"]
    for nothing in ("", "  ", None, 5):  # no directory named: nothing registered
        with pytest.raises(ValueError, match="projects.add needs a directory"):
            nm.projects.add(nothing)
    with pytest.raises(Forbidden) as forbidden:
        nm.projects.add("/etc")
    assert forbidden.value.code == "path_not_allowed"
    with pytest.raises(Unauthorized):
        client_of(served, token="nm_wrong").projects.page()
    with pytest.raises(ValidationFailed) as cursor:
        nm.projects.page(cursor="not-a-cursor!")
    assert cursor.value.code == "validation_error"
    with pytest.raises(ValidationFailed) as empty:  # what is wrong is in the message itself
        nm.project(tmp_path).memories.add("", "why", confidence=2)
    assert str(empty.value).startswith("the request did not validate: title: String should "
                                       "have at least 1 character; confidence: Input should be "
                                       "less than or equal to 1 (422 validation_error, request ")
    with pytest.raises(NotFound) as job:
        nm.jobs.get("feedfacefeedface")
    assert job.value.code == "job_not_found"
    assert all(isinstance(e.value, NeuralMindAPIError) for e in (bad, forbidden, job))


def test_jobs_list_is_iterable(nm):
    jobs = list(nm.jobs.list())
    assert all(job.id and job.status for job in jobs)


def test_events_follow_and_resume(nm, tmp_path):
    (tmp_path / "ev").mkdir()
    stream = nm.events(kinds=["project.*"], timeout=10)
    handle = nm.project(tmp_path / "ev")
    event = next(stream)
    stream.close()
    assert isinstance(event, Event)
    assert (event.kind, event.project_id) == ("project.registered", handle.id)
    assert event.raw["actor"] == "local" and event.id
    handle.remove()
    with nm.events(kinds=["project.*"], last_event_id=event.id, timeout=10) as again:
        resumed = next(again)
    assert (resumed.kind, resumed.project_id) == ("project.removed", handle.id)
    assert resumed.id > event.id


def test_events_filter_by_project(nm, tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a = nm.project(tmp_path / "a")
    got: list[Event] = []
    stream = nm.events(project=a.id, timeout=10)
    reader = threading.Thread(target=lambda: got.append(next(stream)))
    reader.start()
    nm.project(tmp_path / "b").remove()  # another project's event is not ours
    a.remove()
    reader.join(10)
    stream.close()
    assert [e.project_id for e in got] == [a.id]


def test_the_stdio_servers_project_that_is_neither_a_directory_nor_an_id_is_one_line(nm, capsys):
    import argparse

    from plugins.mcp.commands import _project_id
    for given in ("NoSuch", "p_000000000000"):  # not an id's shape; an id nobody has
        with pytest.raises(SystemExit) as stop:
            _project_id(nm, argparse.Namespace(project=given), "tool calls must name one")
        assert stop.value.code == 2  # the command used wrongly
        assert capsys.readouterr().err == (f"neuralmind: --project {given}: not a directory "
                                           "here, and no project has that id (`neuralmind "
                                           "project list`)\n")
