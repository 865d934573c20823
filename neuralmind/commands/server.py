"""Server-side commands: ``serve`` (the team server), ``daemon start|stop|status`` (the local
daemon) and ``openapi``. These run the kernel; every other command is a client of it."""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import urlsplit

from kernel.config import load_settings
from neuralmind.client import moved, older
from neuralmind.commands.common import CommandError, filled, port, ranged, refuse_misplaced


def _settings(args, **server):
    return load_settings(getattr(args, "config", None), server=server)


def cmd_serve(args) -> int:
    """The team server: gunicorn with the config's workers (server mode when configured)."""
    from kernel.serving import CannotServe, gunicorn_options
    flags = {"port": args.port, "host": args.host, "workers": args.workers,
             "tls_cert": args.tls_cert, "tls_key": args.tls_key,
             "allow_remote": args.allow_remote or None, "insecure_http": args.insecure_http or None,
             "allow_origins": args.allow_origin}
    _export(args, _plugin_server_settings(args.config, flags))
    settings = load_settings()
    if why := _tls_and_proxy(args, settings):
        print(f"neuralmind: {why}", file=sys.stderr)
        return 2
    try:
        options = gunicorn_options(settings)
    except CannotServe as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    return _run_gunicorn(options, settings.home, "server")


def _tls_and_proxy(args, settings) -> str | None:
    """TLS served here and a TLS-terminating proxy in front (``--insecure-http``) are
    alternatives: given together, the server would serve TLS and the acknowledgement would
    stand for nothing, so the pair is refused, each named where it was given (a flag or the
    config)."""
    server = settings.server
    if not ((server.tls_cert or server.tls_key) and server.insecure_http):
        return None
    in_config = f"in {settings.source}" if settings.source else "in the config"
    tls = ("--tls-cert/--tls-key" if args.tls_cert or args.tls_key
           else f"[server] tls_cert/tls_key {in_config}")
    proxy = "--insecure-http" if args.insecure_http else f"[server] insecure_http = true {in_config}"
    return (f"{tls} and {proxy} are alternatives — TLS served here, or a TLS-terminating proxy "
            "in front: give one")


def _run_gunicorn(options, home, what: str) -> int:
    """gunicorn's master until it stops, holding ``home`` as one of its servers (refused, 1,
    while storage migrate copies it); its exit status when workers cannot boot (each says
    why in one line). gunicorn halts again while it reaps a second worker that failed too,
    from inside its own halt: that repeat is its status, not a traceback."""
    from gunicorn.errors import HaltServer
    from kernel.serving import Server, hold_home
    if why := hold_home(home, what):
        print(f"neuralmind: {why}", file=sys.stderr)
        return 1
    try:
        Server(options).run()
    except HaltServer as ex:
        return ex.exit_status
    return 0


def _export(args, server: dict) -> None:
    """Hand the config path and the command line's server keys to the gunicorn workers."""
    if getattr(args, "config", None):
        os.environ["NEURALMIND_CONFIG"] = os.path.abspath(args.config)
    os.environ["NEURALMIND_SERVER_OVERRIDES"] = json.dumps(server)


def _plugin_server_settings(config: str | None, flags: dict) -> dict:
    """Server keys from the ``server_settings`` hook (tier2's self-hosted section), then the
    config's ``[server]``, then the command line: each overrides the one before."""
    from kernel.plugins import make_plugin_manager
    base = load_settings(config)
    merged: dict = {}
    for part in make_plugin_manager(base.kernel.plugins).hook.server_settings(config=base.raw):
        merged.update(part or {})
    merged.update(base.raw.get("server", {}))
    merged.update({k: v for k, v in flags.items() if v is not None})
    return merged


class DaemonDidNotStart(CommandError):
    """The daemon stopped or did not answer: the CLI exits 2 when its config is wrong (the
    daemon's own exit code), else 1."""

    def __init__(self, ex: RuntimeError):
        super().__init__(str(ex), 2 if getattr(ex, "exit_code", None) == 2 else 1)


def start_daemon(config: str | None = None, port: int | None = None) -> tuple[dict, bool]:
    """``(discovery info, started)``: the running daemon, or a new one spawned in the
    background; :class:`DaemonDidNotStart` says why it could not start."""
    from kernel import daemon
    settings = load_settings(config)
    if why := settings.misplaced_state():
        raise CommandError(why)
    running = _running(settings.home)
    if running:
        return running, False
    argv = ["daemon", "start", "--foreground"] + (["--port", str(port)] if port is not None else [])
    if config:
        argv += ["--config", os.path.abspath(config)]
    # a start beside this one (a second `up`, a client's autostart) waits, then finds it;
    # one during storage migrate's copy is refused at once
    wait = 0.0 if daemon.holder(settings.home).startswith(daemon.MIGRATING) else START_WAIT_S
    try:
        with daemon.holding(settings.home, "daemon start", wait):
            running = _running(settings.home)
            return (running, False) if running else (daemon.spawn(settings.home, argv), True)
    except daemon.HomeBusy as ex:
        raise CommandError(f"{ex}: start the daemon when it ends", 1) from None
    except RuntimeError as ex:
        raise DaemonDidNotStart(ex) from None


def _running(home) -> dict | None:
    """The daemon holding ``home`` when it answers; one that serves it under a path it was
    moved from, or a daemon of an older NeuralMind serving it, is no daemon to use, and
    another cannot start beside it (:class:`CommandError`)."""
    from kernel import daemon
    running = daemon.status(home)
    if running and (why := moved(running, home)):
        raise CommandError(why, 1)
    if not running and (old := daemon.older_daemon(home)):
        raise CommandError(older(old, home), 1)
    return running


START_WAIT_S = 90.0  # longer than another start's wait for its daemon (spawn's 60 s)


def check_port(url: str, port: int | None) -> None:
    """A ``--port`` the daemon running at ``url`` does not listen on is refused, exit 1: the
    command line is right (2 is for one that never could be), the daemon already running is
    what stands in the way — and exit 0 would let a script take the port it asked for as the
    one served. ``--port 0`` (one the OS picks) is met by any."""
    if port and port != urlsplit(url).port:
        raise CommandError(f"the daemon already runs at {url}: --port {port} was not used — "
                           "stop it first (`neuralmind daemon stop`) to move it to another "
                           "port", 1)


def _daemon_port(args) -> int:
    """``--port``, else the config's ``[server] port``, else 8765 when free, else a port the
    OS picks (daemon.json says which)."""
    from kernel.daemon import choose_port
    configured = load_settings(args.config).raw.get("server", {}).get("port")
    return choose_port(args.port if args.port is not None else configured)


def cmd_daemon(args) -> int:
    from kernel import daemon
    from kernel.serving import CannotServe, gunicorn_options, is_loopback
    refuse_misplaced(args, "daemon", dict.fromkeys(("host", "port", "foreground"), "start"))
    if args.action == "start":
        if args.host and not is_loopback(args.host):
            print(f"neuralmind: the local daemon binds loopback only; {args.host} is not. "
                  "For a team server use `neuralmind serve --config F` (server mode, "
                  "docs/operations.md).", file=sys.stderr)
            return 2
        if args.foreground:
            settings = _settings(args, host=args.host or "127.0.0.1")
            running = _running(settings.home)
            if running:
                check_port(running["url"], args.port)
                print(f"daemon already running at {running['url']} (pid {running['pid']})"
                      + daemon.other_code(running))
                return 0
            try:
                daemon.claim_home(settings.home)
            except daemon.HomeBusy as ex:
                print(f"neuralmind: {ex}: one daemon serves a home", file=sys.stderr)
                return 1
            _export(args, {"host": args.host or "127.0.0.1", "port": _daemon_port(args),
                           "allow_remote": False})
            try:
                options = gunicorn_options(load_settings(), daemon=True)
            except CannotServe as ex:
                print(f"neuralmind: {ex}", file=sys.stderr)
                return 2
            return _run_gunicorn(options, settings.home, "daemon")
        info, started = start_daemon(args.config, args.port)
        if not started:
            check_port(info["url"], args.port)
        home = _settings(args).home
        if args.json:
            print(json.dumps({"started": started, "url": info["url"], "pid": info["pid"],
                              "discovery": str(daemon.discovery_path(home))}))
        elif not started:
            print(f"daemon already running at {info['url']} (pid {info['pid']})"
                  + daemon.other_code(info))
        else:
            print(f"daemon running at {info['url']} (pid {info['pid']}); "
                  f"discovery file {daemon.discovery_path(home)}")
        return 0
    settings = _settings(args)
    if args.action == "stop":
        stopped = daemon.stop(settings.home)
        print(json.dumps({"stopped": stopped}) if args.json else
              "daemon stopped" if stopped else "no daemon was running")
        return 0
    return _status(settings.home, args.json)


def _status(home, as_json: bool) -> int:
    """``daemon status``: exit 0 when the daemon holding the home answers and serves it
    where it is; a daemon that holds it but does not answer, one that serves it under the
    path it was moved from, or a daemon of an older NeuralMind serving it, is said as such
    (exit 1)."""
    from kernel import daemon
    info = daemon.status(home)
    elsewhere = moved(info, home) if info else ""
    silent = None if info else daemon.serving_pid(home)
    old = None if info or silent else daemon.older_daemon(home)
    if as_json:
        found = info or old
        print(json.dumps({"running": bool(found), **({k: v for k, v in found.items()
                                                       if k != "token"} if found else {}),
                          **({"moved": True} if elsewhere else {}),
                          **({"older": True} if old else {}),
                          **({"held_by": silent} if silent else {})}))
    elif old:
        print(older(old, home))
    elif info:
        print(f"running at {info['url']} (pid {info['pid']}, version {info['version']}, "
              f"since {info['started_at']})" + (f"; but {elsewhere}" if elsewhere else "")
              + daemon.other_code(info))
    elif silent:
        print(f"not answering — the daemon (pid {silent}) holds {home} but did not answer "
              "/v1/health within 2 s (starting, busy or hung): wait, or stop it with "
              "`neuralmind daemon stop`")
    else:
        print("not running — start it with `neuralmind daemon start`")
    return 0 if info and not elsewhere else 1


def cmd_openapi(args) -> int:
    """The document needs no model: none is warmed (a load still running at exit can abort)."""
    from kernel.app import Kernel
    kernel = Kernel(load_settings(args.config, embeddings={"warm": False}))
    try:
        print(json.dumps(kernel.openapi, indent=2))
    finally:
        kernel.shutdown()
    return 0


def add_commands(sub) -> None:
    serve = sub.add_parser("serve", help="run the team server (gunicorn)")
    serve.add_argument("--config", help="TOML config (default $NEURALMIND_CONFIG)")
    serve.add_argument("--host", type=filled, help="address to bind (default [server] host, "
                       "127.0.0.1; another needs server mode)")
    serve.add_argument("--port", type=port, help="port (default [server] port, 8765)")
    serve.add_argument("--workers", type=ranged(1, 64), help="gunicorn workers "
                       "(default [server] workers)")
    serve.add_argument("--allow-remote", action="store_true", help="server mode")
    serve.add_argument("--tls-cert", type=filled, help="TLS certificate file (PEM)")
    serve.add_argument("--tls-key", type=filled, help="TLS private key file (PEM)")
    serve.add_argument("--insecure-http", action="store_true",
                       help="acknowledge a TLS-terminating proxy in front of a non-loopback bind")
    serve.add_argument("--allow-origin", action="append", help="CORS: an exact origin (repeatable)")
    serve.set_defaults(func=cmd_serve)

    dmn = sub.add_parser("daemon", help="the local daemon: start, stop, status")
    dmn.add_argument("action", choices=["start", "stop", "status"])
    dmn.add_argument("--config", help="TOML config (default $NEURALMIND_CONFIG)")
    dmn.add_argument("--host", type=filled, help="loopback only; use `serve` for anything else")
    dmn.add_argument("--port", type=port, default=None,
                     help="start: the port (default [server] port, else 8765 when free, else "
                          "one the OS picks)")
    dmn.add_argument("--foreground", action="store_true",
                     help="start: run in this terminal rather than in the background")
    dmn.add_argument("--json", action="store_true", help="print JSON for scripts")
    dmn.set_defaults(func=cmd_daemon, _parser=dmn)  # refuse_misplaced reads its defaults

    oa = sub.add_parser("openapi", help="print the OpenAPI document")
    oa.add_argument("--config")
    oa.set_defaults(func=cmd_openapi)
