"""A plugin module loaded by name through an entry point (as ``neuralmind`` loads plugins for
the CLI and ``serve``): what tests/kernel/test_hooks.py needs of the two hooks called outside
a kernel, ``register_commands`` and ``server_settings``."""

from neuralmind import hookimpl


def _hello(args) -> int:
    print(f"probe says {args.word}")
    return 0


@hookimpl
def register_commands(kernel, subparsers):
    probe = subparsers.add_parser("probe", help="the hook test's command")
    probe.add_argument("word")
    probe.set_defaults(func=_hello)


@hookimpl
def server_settings(config):
    section = config.get("probe", {})
    return {"port": section["port"], "workers": 3} if "port" in section else None
