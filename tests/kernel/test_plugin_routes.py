"""What the kernel does with a third-party plugin's routes at request time: a body that
comes only as a file (``raw_types`` without ``body``), a domain error placed where its field
was sent, and an answer without a response model that JSON cannot hold."""

from __future__ import annotations

import datetime
import uuid
from pathlib import PurePosixPath

import pytest
from openapi_spec_validator import validate

from kernel import openapi
from neuralmind import InvalidFields, Model, hookimpl, operation
from tests.support import LocalServer


class Upload(Model):
    size: int
    text: str


class UploadResource:
    @operation(permission="projects.read", raw_types=("text/plain",), response=Upload)
    def on_post(self, req, resp):
        return Upload(size=len(req.context.raw), text=req.context.raw.decode())


class Named(Model):
    name: str = ""


class Limited(Model):
    limit: int = 10


class FieldsResource:
    """A domain rule broken on ``tag`` (a field of neither model) and ``limit`` (the query's)."""

    @staticmethod
    def refuse():
        raise InvalidFields([{"loc": "tag", "msg": "no such tag", "type": "value_error"},
                             {"loc": "limit", "msg": "too many", "type": "value_error"}])

    @operation(permission="projects.read", query=Limited)
    def on_get(self, req, resp):
        self.refuse()

    @operation(permission="projects.read", query=Limited, body=Named)
    def on_post(self, req, resp):
        self.refuse()


class Kind(Model):
    kind: str


class AnswerResource:
    """Answers without a response model: text stands for a time, an id, a path; a set has
    no JSON form."""

    @operation(permission="projects.read", query=Kind)
    def on_get(self, req, resp):
        if req.context.query.kind == "set":
            return {"tags": {"a", "b"}}
        return {"at": datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc),
                "day": datetime.date(2024, 5, 1), "id": uuid.UUID(int=7),
                "path": PurePosixPath("src/a.py")}


class Routes:
    @hookimpl
    def register_routes(self, kernel):
        return [("/v1/pr/upload", UploadResource()), ("/v1/pr/fields", FieldsResource()),
                ("/v1/pr/answer", AnswerResource())]


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    with LocalServer(tmp_path_factory.mktemp("routes") / "home", plugins=["auth"],
                     extra_plugins=[Routes()]) as started:
        yield started


def test_raw_types_alone_take_the_body_as_a_file_and_nothing_else(server):
    r = server.post("/v1/pr/upload", body=b"hello", headers={"Content-Type": "text/plain"})
    assert (r.status, r.json) == (200, {"size": 5, "text": "hello"})
    for headers, body, came in (({"Content-Type": "application/json"}, b"{}", "application/json"),
                                ({"Content-Type": "image/png"}, b"x", "image/png"),
                                ({}, None, "no Content-Type")):
        r = server.post("/v1/pr/upload", body=body, headers=headers)
        assert (r.status, r.error["code"], r.error["message"]) == (
            415, "unsupported_media_type", f"the body came as {came}; this route takes text/plain")
    doc = server.get("/v1/openapi.json", auth=False).json
    validate(doc)
    op = doc["paths"]["/v1/pr/upload"]["post"]
    assert op["requestBody"] == {"required": True, "content": {
        "text/plain": {"schema": {"type": "string", "format": "binary"}}}}
    assert "415" in op["responses"]
    assert "Body: a file as `text/plain`." in openapi.markdown(doc)


def test_a_domain_error_is_placed_where_its_field_was_sent(server):
    got = server.get("/v1/pr/fields")
    assert got.status == 422  # no body on this operation: every field came in the query
    assert [e["loc"] for e in got.error["details"]["errors"]] == [["query", "tag"],
                                                                  ["query", "limit"]]
    posted = server.post("/v1/pr/fields", {"name": "x"})
    assert [e["loc"] for e in posted.error["details"]["errors"]] == [["body", "tag"],
                                                                     ["query", "limit"]]


def test_an_answer_json_cannot_hold_is_a_logged_500_not_a_string(server):
    r = server.get("/v1/pr/answer?kind=time")
    assert (r.status, r.json) == (200, {"at": "2024-05-01 12:30:00+00:00", "day": "2024-05-01",
                                        "id": "00000000-0000-0000-0000-000000000007",
                                        "path": "src/a.py"})
    r = server.get("/v1/pr/answer?kind=set")
    assert (r.status, r.error["code"], r.error["message"]) == (500, "internal_error",
                                                               "internal error")
    assert "the handler answered a set, which has no JSON form" in server.output()
