"""A plugin module loaded by name through an entry point (as ``neuralmind`` loads plugins for
the CLI and ``serve``): what tests/kernel/test_hooks.py needs of the hooks called outside a
kernel, ``register_commands``, ``config_sections``, ``server_settings`` and
``storage_components`` (a probe.db in
the home, copied into PostgreSQL's probe_notes)."""

from neuralmind import ConfigSection, hookimpl


def _hello(args) -> int:
    print(f"probe says {args.word}")
    return 0


@hookimpl
def register_commands(kernel, subparsers):
    probe = subparsers.add_parser("probe", help="the hook test's command")
    probe.add_argument("word")
    probe.set_defaults(func=_hello)


class ProbeSection(ConfigSection):
    port: int | None = None


@hookimpl
def config_sections():
    return {"probe": ProbeSection}


@hookimpl
def server_settings(config):
    section = config.get("probe", {})
    return {"port": section["port"], "workers": 3} if "port" in section else None


MIGRATIONS = ["CREATE TABLE probe_notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)"]


def _files(home):
    from neuralmind import StoredFile
    return [StoredFile(home.path / "probe.db", MIGRATIONS)]


def _copy(home, target):
    from neuralmind import copy_table
    source = home.open(_files(home)[0])
    try:
        return [copy_table(source, target, "probe_notes", ("id",))]
    finally:
        source.close()


@hookimpl
def storage_components(settings):
    from neuralmind import StorageComponent
    return [StorageComponent("probe", MIGRATIONS, ("probe_notes",), _files, _copy)]
