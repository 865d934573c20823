"""The query's L1 and L2 read the resolved graph, not bare names: L2's callers and callees
are the edges ``neighbors`` walks (guesses marked, each node once), L1 ranks modules by the
files whose imports resolve into them."""

from __future__ import annotations

import re

import pytest

from tests.plugins.index.conftest import built

HANDLERS = {
    "app/__init__.py": "",
    "app/errors.py": '''"""Errors of the application."""


class Busy(Exception):
    def __init__(self, what):
        super().__init__(what)


class Gone(Exception):
    def __init__(self, what):
        super().__init__(what)
''',
    "app/settings.py": '''"""Settings."""


class Settings:
    def get(self, key, default=None):
        """Read one setting."""
        return default
''',
    "app/registry.py": '''"""Error handlers by status code."""


class HandlerRegistry:
    """Keeps an application's error handlers by status code."""

    def __init__(self):
        """Start with an empty table of error handlers."""
        self.handlers = {}

    def register_error_handler(self, code, handler):
        """Register handler as the error handler for a status code."""
        self.handlers[code] = handler

    def find_error_handler(self, code):
        """Look up the error handler registered for a status code."""
        handler_map = self.handlers
        return handler_map.get(code)


def setup_handlers(on_missing):
    registry = HandlerRegistry()
    registry.register_error_handler(404, on_missing)
    registry.register_error_handler(410, on_missing)
    return registry


def install_handler(target, code, handler):
    target.register_error_handler(code, handler)
    target.register_error_handler(code + 1, handler)
''',
}


def related(context: str) -> dict[str, dict[str, list[str]]]:
    """L2 as ``{item header: {"called by" | "calls": [entries]}}``."""
    text = context.split("## Related\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for block in filter(None, text.strip().split("\n\n")):
        head, *rest = block.split("\n")
        parts = {}
        for line in rest:
            key, _, value = line.strip().partition(": ")
            if key in ("called by", "calls"):
                parts[key] = re.split(r"(?<=\)), " if key == "called by" else "; ", value)
        out[head] = parts
    return out


def node_id(server, pid, path, label) -> str:
    doc = server.get(f"/v1/projects/{pid}/documents?path={path}").json
    return next(n["id"] for n in doc["nodes"] if n["label"] == label)


@pytest.fixture(scope="module")
def handlers(server, tmp_path_factory):
    return built(server, tmp_path_factory.mktemp("handlers"), HANDLERS)


def query(server, pid, question) -> dict:
    r = server.post(f"/v1/projects/{pid}/query", {"question": question, "trace": True})
    assert r.status == 200, r.body
    return r.json


def test_l2_callers_and_callees_are_the_resolved_graphs_each_once(server, handlers):
    """Issue: bare names made every ``super().__init__`` a caller of any ``__init__`` hit and
    ``handler_map.get`` (a dict's) a call of the project's ``Settings.get``, and a caller
    calling twice was listed twice."""
    out = query(server, handlers, "how are error handlers registered and looked up?")
    top = [h["label"] for h in out["trace"]["hits"][:3]]
    assert {"HandlerRegistry.register_error_handler",
            "HandlerRegistry.find_error_handler"} <= set(top), top
    l2 = related(out["context"])
    register = l2["HandlerRegistry.register_error_handler (app/registry.py:11)"]
    assert register["called by"] == ["setup_handlers (app/registry.py:21)",
                                     "install_handler (app/registry.py:28, guessed)"]
    find = l2["HandlerRegistry.find_error_handler (app/registry.py:15)"]
    assert "calls" not in find  # dict.get is not the project's Settings.get
    assert "Settings.get" not in out["context"].split("## Search results")[0]


def test_l2_says_nothing_of_callers_an_init_does_not_have(server, handlers):
    out = query(server, handlers, "start the registry with an empty table of error handlers")
    assert "HandlerRegistry.__init__" in [h["label"] for h in out["trace"]["hits"][:3]]
    l2 = related(out["context"])
    init = l2["HandlerRegistry.__init__ (app/registry.py:7)"]
    assert "called by" not in init, init  # Busy's and Gone's super().__init__ reach Exception's


def test_l2_agrees_with_neighbors_for_every_hit(server, handlers):
    """What L2 lists is what ``neighbors`` answers for the same node (guesses included)."""
    for question in ("how are error handlers registered and looked up?",
                     "install a handler for a code", "read one setting"):
        out = query(server, handlers, question)
        for head, parts in related(out["context"]).items():
            label, path, line = re.fullmatch(r"(\S+) \((.+):(\d+)\)", head).groups()
            nid = node_id(server, handlers, path, label)
            r = server.get(f"/v1/projects/{handlers}/neighbors/structural?node={nid}")
            graph = r.json
            for key, relation in (("called by", "callers"), ("calls", "callees")):
                names = sorted(re.sub(r"^.* \(|, guessed\)$|\)$", "", e)
                               for e in parts.get(key, []))
                expect = sorted(f"{n['node']['path']}:{n['node']['line']}"
                                for n in graph[relation] if n["node"]["label"] != label)
                assert names == expect, (question, head, key)


LAYOUT = {
    "pkg/__init__.py": '"""The package."""\n',
    "pkg/globals.py": '"""State every module reads."""\n\n\ndef current_app():\n    return None\n',
    "pkg/typing.py": '"""Type aliases."""\nAlias = int\n',
    "tests/apps/pkg.py": "from pkg import globals\n",  # a fixture named like the package
    **{f"pkg/m{i}.py": f'import typing as t\nimport pkg\nfrom pkg.globals import current_app\n\n\n'
                       f'def step_{i}(x: t.Any):\n    return current_app()\n' for i in range(5)},
}


def test_l1_ranks_modules_by_the_imports_that_resolve_into_them(server, tmp_path):
    """Issue: ``import typing`` (the standard library's) credited ``pkg/typing.py`` and
    ``import pkg`` a fixture called ``pkg.py``, ahead of the module every file imports."""
    pid = built(server, tmp_path, LAYOUT)
    out = server.get(f"/v1/projects/{pid}/wakeup").json
    layout = out["context"].split("## Layout\n", 1)[1]
    paths = [line[2:].split(":")[0].split(" [")[0] for line in layout.splitlines()
             if line.startswith("- ")]
    assert paths[:2] == ["pkg/globals.py", "pkg/__init__.py"], paths
    assert paths.index("pkg/typing.py") > paths.index("pkg/m4.py"), paths
    assert paths.index("tests/apps/pkg.py") > paths.index("pkg/m4.py"), paths
