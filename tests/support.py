"""Test harness. Two servers with one interface (``get``/``post``/…, ``token``, ``home``,
``port``, ``output``): :class:`LocalServer` serves the kernel's app from this process on a
thread, for every test that is not about serving; :class:`Server` runs real gunicorn through
``neuralmind serve`` (or ``daemon start --foreground``) for the tests that are (workers,
SO_REUSEPORT, kill -9, TLS, the daemon). Both bind 127.0.0.1 on a port picked here.

The session derives the packaged model's int8 form once (:func:`derived_model`): in-process
kernels share one embedder on it, and each real server's home gets a link to the file."""

from __future__ import annotations

import http.client
import io
import itertools
import json
import logging
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import warnings
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from kernel import config
from kernel.plugins import hookimpl

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PLUGINS = list(config.DEFAULT_PLUGINS)  # the plugins a fresh install runs
EXAMPLE = ROOT / "tests" / "fixtures" / "example_plugin"  # a third-party plugin's source


_PORTS_BELOW = 32768  # where the kernel's ephemeral range (ip_local_port_range) starts
_PORT_BLOCK = 400  # ports each xdist worker hands out, cycling
_next_port = itertools.count()


def free_port() -> int:
    """A port nothing listens on, for a child process to bind or for a request that must find
    no one. It is taken below the ephemeral range and from a block of this xdist worker's own:
    a port-0 bind (this suite's in-process servers) could otherwise take it between the pick
    and the child's bind, and the child's start-up check would be answered by another test's
    server."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    first = _PORTS_BELOW - _PORT_BLOCK * (worker + 1)
    for _ in range(_PORT_BLOCK):
        port = first + next(_next_port) % _PORT_BLOCK
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # in use, or a closed connection's TIME_WAIT holds it
                continue
            return port
    raise RuntimeError(f"no free port in {first}..{first + _PORT_BLOCK - 1}")


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler for :func:`http_server` that keeps its access log to itself."""

    def log_message(self, *args) -> None:
        pass

    def reply(self, status: int, content_type: str | None, body: bytes,
              headers: dict[str, str] | None = None) -> None:
        """Answer ``status`` with ``body`` (of ``content_type``, when one is given)."""
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def forwarded(self, upstream: str, body: bytes | None = None
                  ) -> tuple[int, str | None, bytes]:
        """This request sent on to ``upstream`` (a proxy's: no proxy of the environment in
        between), and its answer: ``(status, content type, body)``."""
        import urllib.error
        import urllib.request
        req = urllib.request.Request(upstream + self.path, data=body, method=self.command,
                                     headers={k: v for k, v in self.headers.items()
                                              if k.lower() not in ("host", "connection")})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req) as resp:
                return resp.status, resp.headers.get("Content-Type"), resp.read()
        except urllib.error.HTTPError as ex:
            return ex.code, ex.headers.get("Content-Type"), ex.read()


@contextmanager
def http_server(handler: type):
    """A real local HTTP server answering with ``handler`` (a ``BaseHTTPRequestHandler``) on a
    thread: what stands in for something outside us (another web server, a scripted one).
    Yields its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        return self.json["error"]


def request(port: int, method: str, path: str, *, json_body: Any = None, body: bytes | None = None,
            headers: dict[str, str] | None = None, token: str | None = None, timeout: float = 60,
            tls_context=None, host: str = "127.0.0.1") -> Response:
    headers = dict(headers or {})
    headers.setdefault("Host", f"127.0.0.1:{port}")
    if token is not None:
        headers.setdefault("Authorization", f"Bearer {token}")
    if json_body is not None:
        body = json.dumps(json_body).encode()
        headers.setdefault("Content-Type", "application/json")
    if tls_context is not None:
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=tls_context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


class KeepAlive:
    """One keep-alive connection, as an agent's client holds it (the benches use it)."""

    def __init__(self, port: int, token: str, timeout: float = 120):
        self.port, self.token, self.timeout = port, token, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Host": f"127.0.0.1:{self.port}", "Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):  # the server drops a connection left idle (keep-alive timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                if attempt:
                    raise
        raise AssertionError("unreachable")


class SSE:
    """Reads a /v1/events stream on its own connection and collects what arrives."""

    def __init__(self, server, query="", last_event_id=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=15)
        headers = {"Host": "127.0.0.1", "Authorization": f"Bearer {server.token}"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.conn.request("GET", "/v1/events" + query, headers=headers)
        self.sock = self.conn.sock  # http.client lets go of it for a response without a length
        self.resp = self.conn.getresponse()
        self.events, self.comments = [], 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        block = {}
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\n")
                if line.startswith(":"):
                    self.comments += 1
                elif line.startswith("data: "):
                    block["data"] = json.loads(line[6:])
                elif line.startswith("id: "):
                    block["id"] = int(line[4:])
                elif not line and "data" in block:
                    self.events.append(block)
                    block = {}
        except (OSError, ValueError):
            pass

    def wait(self, n, timeout=10):
        deadline = time.monotonic() + timeout
        while len(self.events) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.events

    def close(self):
        # shutdown, not just close: the reader thread's recv holds the socket open otherwise,
        # and the server would keep a thread streaming to it
        self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)
        self.conn.close()


# -- the session's model ---------------------------------------------------------------------

class _Session:
    """Where the session keeps its derived model (set by the root conftest; None outside
    pytest, e.g. in bench/, where every home derives its own as a user's would)."""

    models: Path | None = None
    derived: Path | None = None
    embedder = None
    lock = threading.Lock()
    homes_lock = threading.Lock()
    # PostgreSQL: NEURALMIND_TEST_DATABASE_URL (read when the session starts), else a server
    # from the pgserver wheel started on first use
    pg_uri: str | None = None
    pg_server = None
    # the storage backend the kernels, servers and CLI runs of tests use (the ``backend``
    # fixture sets it per module), and on PostgreSQL the schema of each home
    backend = "sqlite"
    pg_homes: dict[str, str] = {}


SESSION = _Session()


def pg_uri() -> str:
    """The session's PostgreSQL (with pgvector), started once on first use."""
    with SESSION.lock:
        if SESSION.pg_uri is None:
            folder = Path(tempfile.mkdtemp(prefix="neuralmind-test-pg-"))
            with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR as root
                warnings.simplefilter("ignore")
                import pgserver
                SESSION.pg_server = pgserver.get_server(folder, cleanup_mode="delete")
            SESSION.pg_uri = SESSION.pg_server.get_uri()
            _throwaway(SESSION.pg_uri)
    return SESSION.pg_uri


def _throwaway(uri: str) -> None:
    """A test database outlives no crash of its machine: commits need not wait for the disk
    (no fsync, no synchronous commit, no full-page images), which cut a PostgreSQL home's
    set-up time by about a third. What tests check of durability is unchanged: a kill -9 of
    one of our servers loses nothing PostgreSQL acknowledged, which it holds in its memory."""
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {name} = off")
        conn.execute("SELECT pg_reload_conf()")


def fresh_pg_dsn(uri: str | None = None) -> str:
    """A DSN whose tables land in a schema of their own: one test's empty database (in the
    session's PostgreSQL, or in the one ``uri`` names)."""
    import psycopg
    from psycopg.conninfo import make_conninfo
    uri = uri or pg_uri()
    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE SCHEMA {schema}")
    return make_conninfo(uri, options=f"-csearch_path={schema},public")


def home_dsn(home: Path | str, config: str | Path | None = None,
             env: dict[str, str] | None = None) -> str | None:
    """On the PostgreSQL backend, the DSN of ``home``'s own schema (made on first use: a home's
    state is its own, as its kernel.db is on SQLite, and a server started again on it finds
    it); None on SQLite, or when the test names a database itself — a ``[storage]`` section
    in ``config`` (TOML text or a file) or ``NEURALMIND_DATABASE_URL`` in ``env``."""
    if SESSION.backend != "postgres" or (env or os.environ).get("NEURALMIND_DATABASE_URL"):
        return None
    if config is not None:
        text = config.read_text() if isinstance(config, Path) else config
        if "storage" in tomllib.loads(text):
            return None
    key = str(Path(home).resolve())
    with SESSION.homes_lock:
        if key not in SESSION.pg_homes:
            SESSION.pg_homes[key] = fresh_pg_dsn()
        return SESSION.pg_homes[key]


@contextmanager
def kernel_database(home: Path | str):
    """The kernel's database of ``home`` under the module's backend — its kernel.db, or its
    PostgreSQL schema — for a test reading it beside the server (``db.conn.execute``)."""
    with stored_database(home, Path(home) / "kernel.db", "kernel") as db:
        yield db


@contextmanager
def stored_database(home: Path | str, file: Path, component: str, migrations=None,
                    scope: dict[str, str] | None = None):
    """A component's database beside the server at ``home``, under the module's backend: its
    SQLite ``file``, or ``component``'s view of the home's PostgreSQL schema (``scope``: the
    session settings that pick one tenant's rows, :meth:`kernel.pg.PgDatabase.scoped`)."""
    from kernel.pg import PgBackend
    from kernel.storage import Database
    dsn = home_dsn(home)
    if dsn is None:
        db = Database(file, migrations)
        try:
            yield db
        finally:
            db.close()
        return
    backend = PgBackend(dsn, 1)
    try:
        yield backend.database(component, None).scoped(scope or {})
    finally:
        backend.close()


def derived_model() -> Path | None:
    """The packaged model's int8-compute file, derived once per session (kernel/int8model.py
    takes ~2.6 s per home otherwise) — once for all of pytest-xdist's workers too: the folder
    is theirs, and ``derive`` lets one process derive while the others wait for its file."""
    if SESSION.models is None:
        return None
    from kernel import int8model
    from kernel.embeddings import locate_model
    with SESSION.lock:
        if SESSION.derived is None:
            files = locate_model(None)
            SESSION.derived = int8model.derive(files.model, files.digest, SESSION.models)
        return SESSION.derived


def provide_model(cache_dir: Path) -> Path | None:
    """Put the session's derived model in ``cache_dir`` (an embedder's ``cache_dir``), so
    whatever loads from there reads it instead of deriving it again: a hard link, or a copy
    across file systems. The folder, or None outside a session."""
    source = derived_model()
    if source is None:
        return None
    target = Path(cache_dir) / source.name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.link(source, target)
        except OSError:
            target.write_bytes(source.read_bytes())
    return Path(cache_dir)


def seed_models(home: Path) -> None:
    """Give ``home`` the session's derived model where the kernel caches it
    (``$NEURALMIND_HOME/models``), for a real server or a CLI run there."""
    provide_model(Path(home) / "models")


def shared_embedder():
    """One packaged embedder for every in-process kernel of the session: one ONNX session
    loaded once, on the session's derived model."""
    from kernel.embeddings import OnnxEmbedder
    derived_model()  # first, so no embedder derives it beside another (one pid, one temp name)
    with SESSION.lock:
        if SESSION.embedder is None:
            SESSION.embedder = OnnxEmbedder(cache_dir=SESSION.models)
        return SESSION.embedder


class SharedModel:
    """A plugin giving an in-process kernel the session's embedder when its settings ask for
    the packaged model as it is by default; any other setting (a model folder, float compute,
    a thread count) and any plugin's own embedder go their usual way."""

    @hookimpl(trylast=True)
    def embedder(self, kernel):
        section = kernel.settings.embeddings
        if (section.model_dir or os.environ.get("NEURALMIND_MODEL_DIR") or section.threads
                or section.compute != "int8" or SESSION.models is None):
            return None
        return shared_embedder()


# -- plugins a test installs through entry points ---------------------------------------------

def plugin_site(site: Path, dist: str, entry_points: dict[str, str]) -> Path:
    """A folder holding a ``*.dist-info`` that declares ``entry_points`` in the ``neuralmind``
    group, as ``pip install`` would leave it; importlib.metadata finds it on sys.path or
    PYTHONPATH, so no interpreter is changed."""
    info = Path(site) / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[neuralmind]\n" + "".join(f"{name} = {target}\n" for name, target in entry_points.items()))
    return Path(site)


def pythonpath(*folders: Path | str) -> str:
    """PYTHONPATH for a child process: ``folders``, this tree, then what was already there."""
    parts = [*map(str, folders), str(ROOT), os.environ.get("PYTHONPATH")]
    return os.pathsep.join(p for p in parts if p)


# -- schemathesis against a server --------------------------------------------------------------

def schemathesis(url: str, token: str, folder: Path, *options: str, config: str | None = None,
                 hooks: str = "tests.schemathesis_media", timeout: float = 600
                 ) -> tuple[subprocess.CompletedProcess, dict]:
    """``schemathesis run`` over ``url``'s OpenAPI document with ``token`` (coverage and fuzzing
    phases, seed 1, the event stream left out: it never ends), ``options`` added; ``config`` is
    a schemathesis.toml, ``hooks`` a module of custom checks (which imports
    ``tests.schemathesis_media``, as the default does). ``(the run, its JSON report)``;
    what it printed is kept in ``folder/schemathesis.out``."""
    report = folder / "schemathesis.json"
    head = ["schemathesis"]
    if config is not None:
        (folder / "schemathesis.toml").write_text(config)
        head += ["--config-file", str(folder / "schemathesis.toml")]
    cmd = [*head, "run", f"{url}/v1/openapi.json", "-H", f"Authorization: Bearer {token}",
           "--exclude-path", "/v1/events", "--phases", "coverage,fuzzing", "--seed", "1",
           "--generation-database", "none", "--no-color", "--report", "json",
           "--report-json-path", str(report), *options]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "SCHEMATHESIS_HOOKS": hooks})
    (folder / "schemathesis.out").write_text(done.stdout)
    return done, json.loads(report.read_text())


def deny_once(conn, action: int, table: str, column: str | None = None):
    """``conn`` refuses its first ``action`` on ``table`` (and ``column``): a read or write
    that fails once, as on a locked file or a pool that timed out."""
    left = [1]

    def authorize(act, arg1, arg2, *_):
        if left and (act, arg1) == (action, table) and column in (None, arg2):
            left.clear()
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
    conn.set_authorizer(authorize)


# -- the CLI in this process -------------------------------------------------------------------

def run_cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``neuralmind ARGV`` through the CLI's own ``main`` in this process, with ``env`` set
    for the call only (a subprocess costs a second or two of imports on a loaded machine):
    ``(exit code, stdout, stderr)``. What the command sets in the environment for processes
    it would start (``serve``: ``NEURALMIND_CONFIG``) ends with it, as a process's would. A run
    in a home (``NEURALMIND_HOME``) uses the module's storage backend, as the home's server
    does."""
    import pytest

    from neuralmind.cli import main
    env = dict(env or {})
    if "NEURALMIND_HOME" in env:
        config = argv[argv.index("--config") + 1] if "--config" in argv else None
        if dsn := home_dsn(env["NEURALMIND_HOME"], config and Path(config), env):
            env["NEURALMIND_DATABASE_URL"] = dsn
    out, err = io.StringIO(), io.StringIO()
    before = dict(os.environ)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as ex:  # argparse's usage errors
                code = ex.code
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)
    return code, out.getvalue(), err.getvalue()


# -- servers -----------------------------------------------------------------------------------

class _Api:
    """What a test calls on either server: requests with the home's token, and projects."""

    home: Path
    port: int
    _started = False
    backend = "sqlite"  # SESSION.backend when the server was made

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, *, auth: bool = True, **kw) -> Response:
        # a module's server outliving its backend would test one backend twice
        assert self.backend == SESSION.backend, (
            f"a server made on {self.backend} serves a test on {SESSION.backend}: the fixture "
            "that makes it must ask for `backend`")
        if auth and "token" not in kw:
            kw["token"] = self.token
        return request(self.port, method, path, **kw)

    def get(self, path: str, **kw) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, json_body: Any = None, **kw) -> Response:
        return self.request("POST", path, json_body=json_body, **kw)

    def patch(self, path: str, json_body: Any = None, **kw) -> Response:
        return self.request("PATCH", path, json_body=json_body, **kw)

    def delete(self, path: str, **kw) -> Response:
        return self.request("DELETE", path, **kw)

    def register(self, path: Path | str) -> str:
        r = self.post("/v1/projects", {"path": str(path)})
        assert r.status in (200, 201), r.body
        return r.json["id"]

    def __enter__(self):
        return self if self._started else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def make_kernel(home: Path, *, plugins: list[str] | None = None, config: Path | None = None,
                extra_plugins: list[object] = (), **sections):
    """A kernel in this process with ``home``, the ``plugins`` named (else the config's),
    the session's embedder unless the settings ask for another, no warm-up thread, and the
    module's storage backend (:func:`home_dsn`)."""
    from kernel.app import Kernel
    from kernel.config import load_settings
    kernel_section = {"home": str(home), **({"plugins": list(plugins)} if plugins is not None
                                           else {})}
    sections.setdefault("embeddings", {}).setdefault("warm", False)
    if "storage" not in sections and (dsn := home_dsn(home, config)):
        sections["storage"] = {"backend": "postgres", "dsn": dsn}
    settings = load_settings(config, kernel={**sections.pop("kernel", {}), **kernel_section},
                             **sections)
    return Kernel(settings, extra_plugins=[*extra_plugins, SharedModel()])


class _Handler(WSGIRequestHandler):
    """wsgiref's handler without its access log, and without inventing a Content-Type the
    client did not send (gunicorn passes none either)."""

    def get_environ(self):
        env = super().get_environ()
        if self.headers.get("Content-Type") is None:
            env.pop("CONTENT_TYPE", None)
        return env

    def log_message(self, *args) -> None:
        pass


class _ThreadedWSGI(ThreadingMixIn, WSGIServer):
    """One thread per connection, so an event stream never holds up other requests."""

    daemon_threads = True

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.open: set[socket.socket] = set()

    def process_request(self, request, client_address):
        self.open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        """A lingering close: the answer is sent, then what the client still sends (a body
        refused unread, as a 413 leaves it) is read and dropped until it closes, so it reads
        the answer instead of a reset."""
        self.open.discard(request)
        try:
            request.shutdown(socket.SHUT_WR)
            request.settimeout(2)
            while request.recv(65536):
                pass
        except OSError:
            pass
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Output(logging.Handler):
    """The server's log as a test reads it: what the kernel and plugins log at WARNING and
    above while the server runs (gunicorn's workers print the same records)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class LocalServer(_Api):
    """``Kernel(...).app`` served from this process on a thread: the same kernel, plugins,
    SQLite files and model as under gunicorn, without a process to start (most tests)."""

    def __init__(self, home: Path, *, config: str | None = None, plugins: list[str] | None = None,
                 extra_plugins: list[object] = (), **sections):
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.backend = SESSION.backend
        self.config = None
        if config is not None:
            self.config = self.home / "config.toml"
            self.config.write_text(config)
        self.plugins, self.extra_plugins, self.sections = plugins, list(extra_plugins), sections
        self.kernel = None
        self.port = 0
        self._httpd: _ThreadedWSGI | None = None
        self._output = _Output()

    def start(self) -> LocalServer:
        logging.getLogger("neuralmind").addHandler(self._output)
        try:
            self.kernel = make_kernel(self.home, plugins=self.plugins, config=self.config,
                                      extra_plugins=self.extra_plugins, **self.sections)
        except Exception:
            logging.getLogger("neuralmind").removeHandler(self._output)
            raise
        self._httpd = _ThreadedWSGI(("127.0.0.1", 0), _Handler)
        self._httpd.set_app(self.kernel.app)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
                         name=f"local-server-{self.port}", daemon=True).start()
        self._started = True
        return self

    def output(self) -> str:
        return "\n".join(self._output.lines)

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._httpd.shutdown()
        for conn in list(self._httpd.open):  # event streams end when their socket goes
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        self.kernel.shutdown()
        logging.getLogger("neuralmind").removeHandler(self._output)


# a config under which every query pays its embedding, as a new question does: benchmarks
# time searches with queries they repeat, which a process would otherwise remember
EVERY_QUERY_EMBEDDED = "[embeddings]\nremember = 0\n"


class Server(_Api):
    """``neuralmind serve`` (or ``daemon start --foreground``) as a child process."""

    def __init__(self, home: Path, *, config: str | None = None, plugins: list[str] | None = None,
                 workers: int = 1, env: dict[str, str] | None = None, args: list[str] = (),
                 daemon: bool = False, port: int | None = None):
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.backend = SESSION.backend
        if plugins is None or {"memory", "index"} & set(plugins):  # plugins that embed
            seed_models(self.home)
        self.port = port or free_port()
        self.env = {**os.environ, "NEURALMIND_HOME": str(self.home), "PYTHONUNBUFFERED": "1",
                    **(env or {})}
        self.env.pop("NEURALMIND_CONFIG", None)
        self.env.setdefault("NEURALMIND_EMBEDDINGS_WARM", "0")  # tests that need the model ask
        if plugins is not None:
            self.env["NEURALMIND_PLUGINS"] = ",".join(plugins)
        if dsn := home_dsn(self.home, config, self.env):
            self.env["NEURALMIND_DATABASE_URL"] = dsn
        cmd = [sys.executable, "-m", "neuralmind.cli"]
        if daemon:
            cmd += ["daemon", "start", "--foreground", "--port", str(self.port)]
        else:
            cmd += ["serve", "--port", str(self.port), "--workers", str(workers)]
        if config is not None:
            cfg = self.home / "config.toml"
            cfg.write_text(config)
            cmd += ["--config", str(cfg)]
        self.cmd = cmd + list(args)
        self.log = open(self.home / f"server-{self.port}.log", "wb")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Server:
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self._started = True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.output()}")
            try:
                if request(self.port, "GET", "/v1/health", timeout=5).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not answer in {timeout} s:\n{self.output()}")

    def output(self) -> str:
        self.log.flush()
        return (self.home / f"server-{self.port}.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
