"""Hooks of the mcp plugin: the Model Context Protocol at ``/v1/mcp``, every tool running
through a /v1 route, and the ``neuralmind mcp`` and ``neuralmind agent`` commands.

Kept cheap to import (the CLI loads every plugin on each run): the SDK's types, the tool
table and the sessions store load on first use."""

from __future__ import annotations

import threading

from neuralmind import Permission, hookimpl


class State:
    """One kernel's sessions, and its tools once the route table they read is complete."""

    def __init__(self, kernel):
        from plugins.mcp.sessions import MIGRATIONS, PG_MIGRATIONS, PG_TABLE, Sessions
        # the database every server shares ([storage] backend = "postgres"): a session opened
        # on one server is found on the others; else mcp.db in the home
        shared = kernel.shared_database("mcp", PG_MIGRATIONS)
        self.sessions = (Sessions(shared, PG_TABLE) if shared is not None else
                         Sessions(kernel.open_database(kernel.home / "mcp.db", MIGRATIONS)))
        self._bound = None
        self._lock = threading.Lock()

    def tools(self, kernel):
        """(Toolbox, Documents), made at the first MCP request: by then every plugin's routes
        are mounted."""
        if self._bound is None:
            with self._lock:
                if self._bound is None:
                    from plugins.mcp.documents import Documents
                    from plugins.mcp.tools import Toolbox
                    mounted = {(uri, method) for uri, method, _, _ in kernel.routes}
                    roles = {name: p.roles for name, p in kernel.permissions.items()}
                    self._bound = (Toolbox(kernel.routes, kernel.settings.server_mode, roles),
                                   Documents(mounted.__contains__))
        return self._bound

    def close(self) -> None:
        self.sessions.db.close()


def _state(kernel) -> State:
    return kernel.state("mcp", lambda: State(kernel))


@hookimpl
def register_permissions(kernel):
    return [Permission("mcp.read", "Speak MCP at /v1/mcp (each tool call still needs the "
                       "permission of the route it runs through)", ("reader", "builder", "admin"))]


@hookimpl
def register_routes(kernel):
    from plugins.mcp.endpoint import routes
    return routes(kernel, _state(kernel))


@hookimpl
def startup(kernel):
    _state(kernel).sessions.prune()


@hookimpl
def shutdown(kernel):
    state = kernel.drop_state("mcp")
    if state is not None:
        state.close()


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.mcp.commands import add_commands
    add_commands(subparsers)


@hookimpl
def storage_components(settings):
    from plugins.mcp.sessions import storage_component
    return [storage_component()]
