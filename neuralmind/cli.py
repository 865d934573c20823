"""The ``neuralmind`` command. Server commands live here; plugins add theirs through
``register_commands``. Exit codes: 0 ok, 1 API or runtime error, 2 usage."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kernel import __version__
from kernel.config import ConfigError, load_settings


def _settings(args, **server):
    return load_settings(getattr(args, "config", None), server=server)



def cmd_serve(args) -> int:
    """The team server: gunicorn with the config's workers (server mode when configured)."""
    from kernel.serving import BindError, Server, gunicorn_options
    flags = {"port": args.port, "host": args.host, "workers": args.workers,
             "tls_cert": args.tls_cert, "tls_key": args.tls_key,
             "allow_remote": args.allow_remote or None, "insecure_http": args.insecure_http or None,
             "allow_origins": args.allow_origin}
    _export(args, _plugin_server_settings(args.config, flags))
    try:
        options = gunicorn_options(load_settings())
    except BindError as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    Server(options).run()
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


def cmd_daemon(args) -> int:
    from kernel import daemon
    from kernel.serving import BindError, Server, gunicorn_options, is_loopback
    if args.action == "start":
        if args.host and not is_loopback(args.host):
            print(f"neuralmind: the local daemon binds loopback only; {args.host} is not. "
                  "For a team server use `neuralmind serve --config F` (server mode, "
                  "docs/operations.md).", file=sys.stderr)
            return 2
        settings = _settings(args, host=args.host or "127.0.0.1", port=args.port)
        running = daemon.status(settings.home)
        if running:
            print(f"daemon already running at {running['url']} (pid {running['pid']})")
            return 0
        if args.foreground:
            _export(args, {"host": args.host or "127.0.0.1", "port": args.port,
                           "allow_remote": False})
            try:
                options = gunicorn_options(load_settings(), daemon=True)
            except BindError as ex:
                print(f"neuralmind: {ex}", file=sys.stderr)
                return 2
            Server(options).run()
            return 0
        argv = ["daemon", "start", "--foreground", "--port", str(settings.server.port)]
        if args.config:
            argv += ["--config", os.path.abspath(args.config)]
        try:
            info = daemon.spawn(settings.home, argv)
        except RuntimeError as ex:
            print(f"neuralmind: {ex}", file=sys.stderr)
            return 1
        print(f"daemon running at {info['url']} (pid {info['pid']}); "
              f"discovery file {daemon.discovery_path(settings.home)}")
        return 0
    settings = _settings(args)
    if args.action == "stop":
        stopped = daemon.stop(settings.home)
        print("daemon stopped" if stopped else "no daemon was running")
        return 0
    info = daemon.status(settings.home)
    if args.json:
        print(json.dumps({"running": bool(info), **({k: v for k, v in info.items() if k != "token"}
                                                     if info else {})}))
    elif info:
        print(f"running at {info['url']} (pid {info['pid']}, version {info['version']}, "
              f"since {info['started_at']})")
    else:
        print("not running — start it with `neuralmind daemon start`")
    return 0 if info else 1


def cmd_openapi(args) -> int:
    from kernel.app import Kernel
    kernel = Kernel(_settings(args))
    print(json.dumps(kernel.openapi, indent=2))
    return 0


def build_parser(kernel=None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neuralmind", description="NeuralMind memory server")
    parser.add_argument("--version", action="version", version=f"neuralmind {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the team server (gunicorn)")
    serve.add_argument("--config", help="TOML config (default $NEURALMIND_CONFIG)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int)
    serve.add_argument("--allow-remote", action="store_true", help="server mode")
    serve.add_argument("--tls-cert")
    serve.add_argument("--tls-key")
    serve.add_argument("--insecure-http", action="store_true",
                       help="acknowledge a TLS-terminating proxy in front of a non-loopback bind")
    serve.add_argument("--allow-origin", action="append", help="CORS: an exact origin (repeatable)")
    serve.set_defaults(func=cmd_serve)

    dmn = sub.add_parser("daemon", help="the local daemon: start, stop, status")
    dmn.add_argument("action", choices=["start", "stop", "status"])
    dmn.add_argument("--config")
    dmn.add_argument("--host", help="loopback only; use `serve` for anything else")
    dmn.add_argument("--port", type=int, default=None)
    dmn.add_argument("--foreground", action="store_true")
    dmn.add_argument("--json", action="store_true")
    dmn.set_defaults(func=cmd_daemon)

    oa = sub.add_parser("openapi", help="print the OpenAPI document")
    oa.add_argument("--config")
    oa.set_defaults(func=cmd_openapi)

    _plugin_commands(sub)
    return parser


def command_group(subparsers, name: str, help: str = "") -> argparse._SubParsersAction:
    """The sub-command group ``name`` (``eval``, ``memory`` …), made on first use, so two
    plugins can add commands under one group: ``command_group(sub, "eval").add_parser("code")``."""
    parser = subparsers.choices.get(name) or subparsers.add_parser(name, help=help)
    group = parser.get_default("_group")
    if group is None:
        group = parser.add_subparsers(dest=f"{name}_command", required=True)
        parser.set_defaults(_group=group)
    return group


def _plugin_commands(sub) -> None:
    """Sub-commands plugins add (``register_commands``); a config error leaves them out."""
    from kernel.plugins import PluginError, make_plugin_manager
    try:
        names = load_settings().kernel.plugins
        pm = make_plugin_manager(names)
    except (ConfigError, PluginError):
        return
    pm.hook.register_commands(kernel=None, subparsers=sub)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except ConfigError as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
