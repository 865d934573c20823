"""Running the app under gunicorn: the team server and the local daemon share this.

The daemon is the same app with one worker (threads) on loopback; the team server takes its
workers, bind and TLS from the config's ``[server]`` section.
"""

from __future__ import annotations

import gc
import importlib
import ipaddress
import logging
import os
import pkgutil
import signal
import socket
import ssl
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gunicorn import util
from gunicorn.app.base import BaseApplication

from kernel import __version__, errors
from kernel.config import Settings, masked
from kernel.daemon import code_stamp, forget_discovery, write_discovery
from kernel.plugins import bundled, make_plugin_manager
from kernel.projects import config_projects


class CannotServe(Exception):
    """The server cannot start as configured; the message is the one line to say."""


class BindError(CannotServe):
    """A bind the server refuses: non-loopback without server mode, or without TLS."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_tls(settings: Settings) -> None:
    """A certificate and key that go together and load, checked before gunicorn forks, so a
    typo is one clear line instead of every worker failing its TLS handshake."""
    server = settings.server
    if not (server.tls_cert or server.tls_key):
        return
    if not (server.tls_cert and server.tls_key):
        raise BindError("--tls-cert and --tls-key (tls_cert/tls_key) go together; give both")
    if server.insecure_http:  # `serve` names where each came from; plain gunicorn meets this
        raise BindError("[server] tls_cert/tls_key and insecure_http are alternatives — TLS "
                        "served here, or a TLS-terminating proxy in front: give one")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            server.tls_cert, server.tls_key, password=_no_passphrase)
    except _Encrypted:
        raise BindError(f"the TLS key {server.tls_key} is encrypted: the server reads its key "
                        "unencrypted, with no one at a terminal to type a passphrase (`openssl "
                        f"pkey -in {server.tls_key} -out KEY` writes it so)") from None
    except (OSError, ssl.SSLError) as ex:
        raise BindError(f"cannot load the TLS certificate {server.tls_cert} with key "
                        f"{server.tls_key}: {_tls_fault(server.tls_cert, server.tls_key, ex)}"
                        ) from None


class _Encrypted(Exception):
    """OpenSSL asked for the key's passphrase (it would otherwise ask the terminal)."""


def _no_passphrase() -> str:
    raise _Encrypted


def _tls_fault(cert: str, key: str, ex: Exception) -> str:
    """Which file is wrong and how, in words: OpenSSL says "PEM lib" for most of it."""
    for path, what, marker in ((cert, "certificate", "CERTIFICATE-----"),
                               (key, "private key", "PRIVATE KEY-----")):
        try:
            text = Path(path).read_text(errors="replace")
        except OSError as err:
            return f"{path}: {err.strerror}"
        if marker not in text:
            return f"{path} is not a PEM {what}"
    if getattr(ex, "reason", None) == "KEY_VALUES_MISMATCH":
        return f"{key} is not the private key of {cert}"
    return f"OpenSSL refused them ({getattr(ex, 'reason', None) or ex})"


def check_state(settings: Settings, pm) -> None:
    """The state home and root are directories, or can be made, and no component's stored
    state (the SQLite home's files; the database's, once it is reached) is of a newer
    NeuralMind: else every worker would fail on its own, or serve what it cannot read."""
    if why := settings.misplaced_state():
        raise CannotServe(why)
    if settings.storage.backend == "sqlite":
        _check_versions(settings, pm)


def _check_versions(settings: Settings, pm) -> None:
    from kernel.stored import components, newer_state
    if why := newer_state(settings, components(settings, pm)):
        raise CannotServe(why)


def check_bind(settings: Settings) -> None:
    """What must hold before gunicorn forks, each failure one clear line: the plugins'
    config sections, the bind, TLS, the config's projects and the shared database, reached
    and able to hold the enabled components (pgvector, for the memory plugin; each worker
    would fail on its own, the database after 30 s of pool retries)."""
    server = settings.server
    pm = make_plugin_manager(settings.kernel.plugins)
    settings.check_sections(pm)
    check_state(settings, pm)
    check_tls(settings)
    config_projects(settings)
    if settings.storage.backend == "postgres":
        from kernel.stored import components, unusable
        if why := unusable(settings.storage.dsn, components(settings, pm)):
            raise CannotServe(why)
        _check_versions(settings, pm)
    if is_loopback(server.host):
        return
    if not settings.server_mode:
        raise BindError(f"refusing to bind {server.host}: a non-loopback address needs server "
                        "mode — `neuralmind serve --config F` with [server] allow_remote = true "
                        "(or --allow-remote); see docs/operations.md")
    if not (server.tls_cert and server.tls_key) and not server.insecure_http:
        raise BindError(f"refusing to bind {server.host} without TLS: pass --tls-cert/--tls-key, "
                        "or --insecure-http to acknowledge a TLS-terminating proxy")


def gunicorn_options(settings: Settings, *, daemon: bool = False) -> dict[str, Any]:
    """gunicorn settings for ``settings``: what ``conf/gunicorn.conf.py`` and the daemon use."""
    server = settings.server
    check_bind(settings)
    workers = 1 if daemon else server.workers
    threads = max(server.threads, 8) if daemon else server.threads
    opts: dict[str, Any] = {
        "bind": f"{server.host}:{server.port}" if ":" not in server.host else f"[{server.host}]:{server.port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        # the longest request line gunicorn reads (its default is 4094): a long query string
        # reaches the kernel, and only what is longer gets gunicorn's 414, as an envelope
        "limit_request_line": 8190,
        # gunicorn's default control socket is one per user (~/.gunicorn/gunicorn.ctl): two
        # servers on a machine would share it and delete each other's. Nothing of ours uses it.
        "control_socket_disable": True,
        "timeout": 120,
        "graceful_timeout": 10,
        "keepalive": 5,
        # the workers' heartbeat file is touched on every loop turn: keep it in memory
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        "reuse_port": spread_connections(server.host, server.port, workers),
        "accesslog": None,
        "on_starting": _on_starting(settings.kernel.plugins),
        "worker_exit": _worker_exit,
        "post_fork": _post_fork,
        "post_worker_init": _post_worker_init,
        "raw_env": [f"NEURALMIND_WORKERS={workers}", f"NEURALMIND_THREADS={threads}",
                    *_blas_env(),
                    f"NEURALMIND_SERVING={'daemon' if daemon else 'server'}",
                    f"NEURALMIND_STARTED={time.monotonic()!r}"],  # the server's, for uptime_s
    }
    if server.tls_cert and server.tls_key:
        opts.update(certfile=server.tls_cert, keyfile=server.tls_key)
    opts["when_ready"] = _announce(settings, daemon)
    if daemon:
        opts["on_exit"] = lambda server: forget_discovery(settings.home, server.pid)
    return opts


def _blas_env() -> list[str]:
    """One OpenBLAS thread per worker unless the operator says otherwise: OpenBLAS's extra
    threads spin after a search's memory-bound product and starve the keyword leg and
    onnxruntime beside it (docs/performance-memory.md)."""
    return [] if "OPENBLAS_NUM_THREADS" in os.environ else ["OPENBLAS_NUM_THREADS=1"]


def spread_connections(host: str, port: int, workers: int) -> bool:
    """Whether each worker listens on its own ``SO_REUSEPORT`` socket, so the kernel spreads
    connections over the workers: on one shared socket, one gthread worker can take every
    keep-alive connection of a burst and leave the others idle. The port must be free now,
    whatever the workers — a second server would otherwise share it silently, and gunicorn
    alone retries a taken port for 5 s before a traceback — so it is bound once without the
    flag first (once per process: a gunicorn reload re-reads its config while our own workers
    hold the port)."""
    if port == 0:
        return False
    if (host, port) not in _checked:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host.strip("[]"), port))
            except OSError as ex:
                raise BindError(f"cannot listen on {host}:{port}: {ex.strerror}") from None
        _checked.add((host, port))
    return workers >= 2 and hasattr(socket, "SO_REUSEPORT")


_checked: set[tuple[str, int]] = set()


def _on_starting(plugins: list[str]):
    """gunicorn's ``on_starting``, in the master before it binds: :func:`_preload`, and
    gunicorn's "Listening at:  (PID)" left unsaid when it names no address — with
    ``reuse_port`` the master holds no listener (each worker binds its own), and
    :func:`_announce` says where the server listens."""
    preload = _preload(plugins)

    def on_starting(server) -> None:
        logging.getLogger("gunicorn.error").addFilter(_no_empty_listening)
        logging.getLogger("gunicorn.error").addFilter(_invalid_request_said)
        ours = logging.getLogger("neuralmind")
        ours.addHandler(_ThroughGunicorn())
        ours.setLevel(logging.getLogger("gunicorn.error").getEffectiveLevel())
        preload(server)
    return on_starting


class _ThroughGunicorn(logging.Handler):
    """NeuralMind's own lines (the ``neuralmind.*`` loggers) written as gunicorn writes its
    own, where it does (stderr, daemon.log): with the time, the pid and the level, which tell
    which run and which worker said an error, and its INFO lines too — without a handler,
    Python's last resort prints WARNING and above as bare messages."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger("gunicorn.error").handle(record)


def _no_empty_listening(record: logging.LogRecord) -> bool:
    """A logging filter: False for gunicorn's "Listening at" line with no address in it."""
    return not (record.msg == "Listening at: %s (%s)" and record.args
                and record.args[0] == "")


# the request id of the "Invalid request" line a worker thread logged, for the envelope
# gunicorn has that thread write next (:func:`write_envelope`)
_refused = threading.local()


def _invalid_request_said(record: logging.LogRecord) -> bool:
    """A logging filter: gunicorn's "Invalid request" line quotes the raw request line, so a
    ``?token=`` (any of ``kernel.guards.TOKEN_PARAMS``) in it is masked — the kernel's guard,
    which would refuse it, never ran — and the line gets the request id the answer's envelope
    then carries, so an operator handed that id finds the line."""
    if isinstance(record.msg, str) and record.msg.startswith("Invalid request from "):
        _refused.rid = os.urandom(16).hex()
        record.msg = f"{masked(record.getMessage())} (request {_refused.rid})"
        record.args = ()
    return True


def _preload(plugins: list[str]):
    """gunicorn's ``on_starting``: import, in the master, the kernel's modules and every module
    of the enabled bundled plugins, so each worker forks with them loaded and builds only its
    own Kernel (~0.04 s of CPU here, against ~0.4 s of imports first): a worker killed or
    recycled serves again sooner, and the workers share those pages. Imports only, which start
    no thread and open no file: a Kernel (threads, open databases) is never built in the master,
    as neither survives a fork, and onnxruntime and tokenizers, which start threads when
    imported, load with the model in each worker."""
    def on_starting(server) -> None:
        known = bundled()
        packages = ["kernel", *(known[name].rpartition(".")[0] for name in plugins
                                if name in known)]
        for package in packages:
            path = importlib.import_module(package).__path__
            for module in pkgutil.walk_packages(path, package + "."):
                if module.name != "kernel.wsgi":  # builds the Kernel when imported
                    importlib.import_module(module.name)
        gc.freeze()  # the workers' collections then leave the shared pages unwritten
    return on_starting


def hold_home(home, what: str) -> str | None:
    """Hold ``home`` as one of its servers for this process's life (the gunicorn master's:
    :func:`kernel.daemon.serve_home`); None, or the one line saying why the ``what`` cannot
    start now (storage migrate copies the home)."""
    from kernel import daemon
    try:
        daemon.serve_home(home)
    except daemon.HomeBusy as ex:
        return f"{ex}: start the {what} when it ends"
    return None


def _post_fork(server, worker) -> None:
    os.environ["NEURALMIND_DAEMON_PID"] = str(server.pid)
    util.write_error = write_envelope


def _post_worker_init(worker) -> None:
    """The app is loaded: what start-up made (modules, schemas, routes) lives as long as the
    worker, so the garbage collector stops walking it. Otherwise every full collection — one
    every few 1,000-item batches, whose objects live until the answer — walks all of it
    (docs/performance-memory.md, "Batch creates, profiled and cut")."""
    gc.collect()
    gc.freeze()
    stop = worker.handle_exit  # SIGTERM: accept no more, let the requests in flight finish

    def handle_exit(sig, frame) -> None:
        if (wsgi := sys.modules.get("kernel.wsgi")) is not None:
            wsgi.kernel.events.end_streams()  # an event stream never finishes on its own
        stop(sig, frame)
    signal.signal(signal.SIGTERM, handle_exit)


_GUNICORN_CODES = {400: "bad_request", 403: "forbidden", 414: "uri_too_long",
                   417: "expectation_failed", 431: "headers_too_large", 500: "internal_error",
                   501: "not_implemented"}
# ours, in words; gunicorn's own (e.g. "limit request headers fields") goes in details.reason
_GUNICORN_MESSAGES = {
    400: "the request is not HTTP/1.x the server can read",
    414: "the request line is longer than 8,190 bytes",
    417: "the Expect header asks for what the server does not do",
    431: "the request has more than 100 headers, or one longer than 8,190 bytes",
    500: "the server could not read the request",
    501: "the server does not implement this method or transfer encoding"}


def write_envelope(sock, status: int, reason: str, message: str) -> None:
    """What gunicorn refuses before the app sees a request (a request line or headers over
    its limits, a line that is not HTTP) answered with the kernel's error envelope: gunicorn
    writes every such answer through ``util.write_error``, an HTML page otherwise. The id is
    the one the thread's "Invalid request" line just logged, if it logged one."""
    rid = _refused.__dict__.pop("rid", None) or os.urandom(16).hex()
    body = errors.envelope(_GUNICORN_CODES.get(status, "http_error"),
                           _GUNICORN_MESSAGES.get(status, reason), status, rid,
                           {"reason": message} if message else None)
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            f"X-Request-Id: {rid}\r\nNeuralMind-API-Version: 1\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin-1") + body)


def _worker_exit(server, worker) -> None:
    wsgi = sys.modules.get("kernel.wsgi")
    if wsgi is not None:
        wsgi.kernel.shutdown()


def _announce(settings: Settings, daemon: bool):
    """Say where the server listens (with ``reuse_port`` the workers bind, and gunicorn's own
    line, which names no address then, is left unsaid); the daemon also writes its discovery
    file."""
    def when_ready(server) -> None:
        if server.LISTENERS:
            host, port = server.LISTENERS[0].sock.getsockname()[:2]
        else:
            host, port = settings.server.host, settings.server.port
        scheme = "https" if settings.server.tls_cert else "http"
        server.log.info("neuralmind %s listening at %s://%s:%s", __version__, scheme, host, port)
        if daemon:
            write_discovery(settings.home, {
                "host": "127.0.0.1" if host in ("0.0.0.0", "127.0.0.1") else host,
                "port": port, "pid": server.pid, "version": __version__, "code": code_stamp(),
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "url": f"http://127.0.0.1:{port}", "plugins": list(settings.kernel.plugins)})
    return when_ready


class Server(BaseApplication):
    """gunicorn running ``kernel.wsgi:application`` with options from :func:`gunicorn_options`."""

    def __init__(self, options: dict[str, Any]):
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            if value is not None or key == "accesslog":
                self.cfg.set(key, value)

    def load(self):
        from kernel.wsgi import application
        return application
