"""Hooks of the index plugin: code index, search, L0–L3 query context, watch mode.
Heavy modules (numpy, tree-sitter, watchdog) load on first use, not at import."""

from __future__ import annotations

from kernel.auth import Permission
from kernel.plugins import hookimpl


class _State:
    service = None
    watchers = None


def _service(kernel):
    if _State.service is None:
        from plugins.index.models import IndexSettings
        from plugins.index.service import IndexService
        from plugins.index.watch import Watchers
        _State.service = IndexService(kernel, kernel.settings.section("index", IndexSettings))
        _State.watchers = Watchers(_State.service)
    return _State.service


@hookimpl
def register_permissions(kernel):
    return [Permission("index.read", "Search, query and inspect a project's code index",
                       ("reader", "builder", "admin")),
            Permission("index.build", "Build the index, change ignore rules, run the watcher",
                       ("builder", "admin"))]


@hookimpl
def register_routes(kernel):
    from plugins.index.resources import routes
    service = _service(kernel)
    return routes(kernel, service, _State.watchers)


@hookimpl
def describe_project(kernel, project):
    return _service(kernel).describe(project)


@hookimpl
def shutdown(kernel):
    if _State.watchers is not None:
        _State.watchers.shutdown()


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.index.commands import register
    register(subparsers)
