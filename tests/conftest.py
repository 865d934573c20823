"""Shared fixtures. Servers bind 127.0.0.1 on ports the tests pick; state lives in tmp dirs.

Most tests talk HTTP to :class:`tests.support.LocalServer` (the kernel's app in this process);
a test about serving itself asks ``make_server(serving=True, …)`` for real gunicorn."""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.support import (EXAMPLE, SESSION, LocalServer, Server, derived_model,
                           plugin_site, pythonpath)


def pytest_configure(config):
    """The session's model folder (tests/support.py), its int8 model derived meanwhile in a
    child process: collecting the tests keeps this process busy for seconds anyway. Under
    pytest-xdist the controller does it, and its workers share the folder (and the file)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        SESSION.models = Path(workerinput["neuralmind_models"])
    else:
        SESSION.models = Path(tempfile.mkdtemp(prefix="neuralmind-test-models-"))
        config._neuralmind_derive = threading.Thread(target=derived_model, name="derive-int8",
                                                     daemon=True)
        config._neuralmind_derive.start()
    SESSION.pg_uri = os.environ.get("NEURALMIND_TEST_DATABASE_URL") or None
    config.addinivalue_line("markers", "sqlite_only(reason): run on the SQLite backend alone "
                            "where the test asks for both (the reason says why)")
    config.addinivalue_line("markers", "postgres_only(reason): run on the PostgreSQL backend "
                            "alone (a test of servers sharing a database it names itself)")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist: each worker is told the controller's model folder."""
    node.workerinput["neuralmind_models"] = str(SESSION.models)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: a worker per core and two more. Half of a worker's time goes waiting on
    what it started (real servers, CLI runs, PostgreSQL, a browser), and the extra workers'
    tests run meanwhile. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    return len(os.sched_getaffinity(0)) + 2


# The modules that take longest here (wall seconds of a quiet ``-n 4`` run, 2026-12-01), longest
# first; only the order of modules depends on this list, never what a test checks
LONGEST = ("kernel/test_contract.py",                   # 57: schemathesis, both backends
           "plugins/mcp/test_transports.py",            # 22
           "plugins/auth/test_schemathesis.py",         # 20
           "plugins/webhooks/test_delivery.py",         # 19
           "plugins/ui/test_browser.py",                # 18
           "plugins/webhooks/test_workers.py",          # 14
           "plugins/memory/test_vectors_workers.py",    # 13
           "plugins/memory/test_spec_conformance.py",   # 11
           "plugins/webhooks/test_safety.py",           # 10
           "client/test_docs.py",                       # 10
           "plugins/webhooks/test_routes.py",           # 9
           "plugins/auth/test_server_mode.py",          # 9
           "embeddings/test_model_location.py",         # 9
           "kernel/test_scale_out.py")                  # 8


def pytest_collection_modifyitems(items):
    """The longest modules run first, longest first, then those holding a ``slow`` test (the
    order is stable otherwise): under pytest-xdist's ``--dist loadfile`` a long module handed
    out last runs alone on one core while the other idles."""
    here = Path(__file__).parent
    rank = {here / rel: i for i, rel in enumerate(LONGEST)}
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: rank.get(item.path, len(LONGEST) + (item.path not in slow)))


def pytest_collection_finish(session):
    """What importing and collecting made (modules, schemas, test items) lives as long as the
    session: frozen, the collector stops walking it in every full collection the tests set off
    (kernel/serving.py does the same for a gunicorn worker)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """Stop this process's PostgreSQL while the session still runs. Left to pgserver's own
    ``atexit``, its stop came after a pytest-xdist worker had reported its end, and the
    controller kills a worker that has not exited 10 s later: a slow shutdown checkpoint
    (a disk busy with other work) then left the server running, its data in /tmp."""
    if SESSION.pg_server is not None:
        SESSION.pg_server.cleanup()


ONLY = {"sqlite_only": ["sqlite"], "postgres_only": ["postgres"]}


def pytest_generate_tests(metafunc):
    """A test that asks for ``backend`` (the kernel, auth, memory and webhooks suites ask for
    it for every test) runs once per storage backend, module by module — or on the one its
    ``sqlite_only``/``postgres_only`` marker names."""
    if "backend" in metafunc.fixturenames:
        backends = ["sqlite", "postgres"]
        for name, only in ONLY.items():
            marker = metafunc.definition.get_closest_marker(name)
            if marker is not None:
                if not (marker.args or marker.kwargs.get("reason")):
                    raise pytest.UsageError(f"{metafunc.definition.nodeid}: {name} needs a "
                                            "reason")
                backends = only
        metafunc.parametrize("backend", backends, indirect=True, scope="module")


@pytest.fixture(scope="session", autouse=True)
def hermetic_environment(tmp_path_factory):
    """No ``NEURALMIND_*`` variable of the shell that runs the tests reaches them (but
    ``NEURALMIND_WRITE_DOCS``, which asks tests/kernel/test_http_api_doc.py to write), and a
    test that names no home gets a throwaway one, never the user's ``~/.neuralmind`` (whose
    running daemon once answered a test's own)."""
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("NEURALMIND_")
                    and k != "NEURALMIND_WRITE_DOCS"]:
            mp.delenv(key)
        mp.setenv("NEURALMIND_HOME", str(tmp_path_factory.mktemp("default-home")))
        yield


@pytest.fixture(scope="module")
def backend(request) -> str:
    """The storage backend of this module's kernels, servers and CLI runs: ``sqlite`` (files in
    each home) or ``postgres`` (a schema of the session's PostgreSQL per home,
    tests/support.py ``home_dsn``). A module-scoped fixture that makes a server asks for it,
    so the server is made again for each backend."""
    SESSION.backend = request.param
    yield request.param
    SESSION.backend = "sqlite"


@pytest.fixture(scope="session")
def example_plugin(tmp_path_factory) -> dict[str, str]:
    """The third-party example plugin (tests/fixtures/example_plugin), found through its
    ``neuralmind`` entry point as a pip install would declare it, without installing it into
    any interpreter: a dist-info in a temp folder on sys.path here, and on PYTHONPATH for a
    real server (pass the returned env)."""
    site = plugin_site(tmp_path_factory.mktemp("example-site"), "neuralmind-example-plugin",
                       {"example": "neuralmind_example.plugin"})
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(EXAMPLE))
        mp.syspath_prepend(str(site))
        yield {"PYTHONPATH": pythonpath(site, EXAMPLE)}
    for name in [m for m in sys.modules if m.split(".")[0] == "neuralmind_example"]:
        del sys.modules[name]


@pytest.fixture
def home(tmp_path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def make_server(tmp_path):
    """``make_server(plugins=[...], config=...)``: the app in this process. A test about
    serving adds ``serving=True`` (and ``workers=N``, ``daemon=True``, ``env=…``) for real
    gunicorn. All are stopped after the test."""
    started: list[LocalServer | Server] = []

    def make(serving: bool = False, **kw) -> LocalServer | Server:
        kw.setdefault("plugins", ["auth"])
        home = kw.pop("home", tmp_path / f"home{len(started)}")
        server = Server(home, **kw) if serving else LocalServer(home, **kw)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def repo(tmp_path) -> Path:
    """An empty project directory (not a git repository)."""
    path = tmp_path / "repo"
    path.mkdir()
    return path
