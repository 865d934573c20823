"""The extractive answer's choice of sentences, over sources as `ask` hands them (falcon's
code, a team's decisions), with the session's model: a code location that shares no topic
word with the question, or only a word of asking ("use", "ok"), never leads the answer."""

from __future__ import annotations

import pytest

from plugins.ask.extractive import NOTHING, Extractive, stem
from tests.support import shared_embedder


def memory(n: int, title: str, text: str) -> dict:
    return {"n": n, "kind": "memory", "cite": f"memory:{n:016x}", "title": title, "text": text}


def code(n: int, cite: str, title: str, text: str) -> dict:
    return {"n": n, "kind": "code", "cite": cite, "title": title, "text": text,
            "file_type": "code"}


LOGGING = [
    memory(1, "Logging uses structlog", "All services log with structlog JSON renderer; "
           "falcon's own logger is silenced below WARNING."),
    memory(2, "Date format for logs is ISO 8601", "Log timestamps as 2026-12-02T13:00:00Z; "
           "falcon.http_date_to_dt parses RFC 1123 dates from headers."),
    code(3, "falcon/testing/helpers.py:1435", "redirected",
         "@falcon.util.deprecated(\n    'This context manager is deprecated and will be removed "
         "in Falcon 5.0. '\n    'Please use contextlib.redirect_stdout and "
         "contextlib.redirect_stderr instead.'\n)\n@contextlib.contextmanager\ndef redirected(\n"
         "    stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr\n) -> Iterator[None]:\n"
         '    """Redirect stdout or stderr temporarily.\n\n    For instance, this helper can be '
         "used to capture output from Falcon\n    resources under tests::\n"),
    code(4, "falcon/app.py:920", "App.add_error_handler",
         "def add_error_handler(self, exception, handler=None) -> None:\n"
         '        """Register a handler for one or more exception types.\n\n        Error '
         "handlers may be registered for any exception type, including\n        "
         ":class:`~.HTTPError` or :class:`~.HTTPStatus`. This feature\n        provides a central "
         "location for logging and otherwise handling\n        exceptions raised by responders, "
         "hooks, and middleware components.\n"),
]
STATE = [
    memory(1, "Use self.x attributes sparingly in resources", "Resources are shared between "
           "requests; storing per-request state on self.x causes races across threads."),
    memory(2, "The __init__ of resources must be cheap", "Resource __init__ runs at import; do "
           "not open DB connections there, open them lazily."),
    memory(3, "Prefer snake_case for resource methods", "Responders are on_get, on_post, "
           "on_put_item; CamelCase responders like onGet are never called."),
    code(4, "falcon/testing/resource.py:217", "SimpleTestResource.called",
         '@property\n    def called(self) -> bool:\n        """Whether or not a req/resp was '
         'captured."""\n        return self.captured_req is not None'),
    code(5, "falcon/errors.py:2097", "HTTPInsufficientStorage",
         'class HTTPInsufficientStorage(HTTPError):\n    """507 Insufficient Storage.\n\n    The '
         "507 (Insufficient Storage) status code means the method could not\n    be performed on "
         "the resource because the server is unable to store\n    the representation needed to "
         "successfully complete the request.\n"),
    code(6, "falcon/errors.py:1443", "HTTPPreconditionRequired",
         'class HTTPPreconditionRequired(HTTPError):\n    """428 Precondition Required.\n\n    '
         "Its typical use is to avoid the \"lost update\" problem, where a client\n    GETs a "
         "resource's state, modifies it, and PUTs it back to the server,\n    when meanwhile a "
         "third party has modified the state on the server.\n"),
]


@pytest.fixture(scope="module")
def extractive():
    return Extractive(lambda texts: shared_embedder().embed(texts))


@pytest.mark.parametrize("question, sources, lead", [
    # "use" outweighed "logging": rarer among the candidates, and "uses" never met it
    ("which logging library do we use?", LOGGING, "Logging uses structlog: All services log"),
    # "resources"/"resource" and "storing"/"store" did not meet; the best code hit's prior won
    ("is it ok to store state on the resource?", STATE,
     "Use self.x attributes sparingly in resources: Resources are shared"),
])
def test_the_decision_that_answers_leads_not_a_code_location(extractive, question, sources,
                                                             lead):
    answer = "".join(extractive.answer(question, sources))
    assert answer.startswith(lead), answer
    assert extractive.pick(question, sources)[0][0]["n"] == 1


@pytest.mark.parametrize("question", ["which one do we use?", "is it ok?"])
def test_a_question_of_asking_words_alone_is_answered_by_no_code_location(extractive, question):
    """No topic word to share: a symbol's place is never picked on the meaning of its code."""
    code_only = [s for s in LOGGING + STATE if s["kind"] == "code"]
    assert "".join(extractive.answer(question, code_only)) == NOTHING


def test_without_a_model_the_shared_words_decide():
    keywords = Extractive()
    assert keywords.pick("which logging library do we use?", LOGGING)[0][0]["n"] == 1
    assert keywords.pick("is it ok to store state on the resource?", STATE)[0][0]["n"] == 1


def test_inflections_meet():
    for forms in (("use", "uses", "used", "using"), ("store", "stores", "stored", "storing"),
                  ("resource", "resources"), ("library", "libraries"),
                  ("log", "logs", "logging", "logged"), ("class", "classes"),
                  ("need", "needs", "needed"), ("token", "tokens")):
        assert len({stem(w) for w in forms}) == 1, forms
    assert stem("status") == "status" and stem("analysis") == "analysis"
    assert stem("string") == "string" and stem("thing") == "thing"  # no vowel before -ing
