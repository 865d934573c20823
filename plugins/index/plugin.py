"""Hooks of the index plugin: code index, search, L0–L3 query context, watch mode.
Heavy modules (numpy, tree-sitter, watchdog) load on first use, not at import."""

from __future__ import annotations

from neuralmind import EventKind, Permission, hookimpl


class _State:
    """One kernel's index service and its watchers."""

    def __init__(self, kernel):
        from plugins.index.models import IndexSettings
        from plugins.index.service import IndexService
        from plugins.index.watch import Watchers
        self.service = IndexService(kernel, kernel.settings.section("index", IndexSettings))
        self.watchers = Watchers(self.service)


def _state(kernel) -> _State:
    return kernel.state("index", lambda: _State(kernel))


def _service(kernel):
    return _state(kernel).service


@hookimpl
def register_event_kinds(kernel):
    return [EventKind("index.built", "a build finished (data: the job's result)"),
            EventKind("index.rule_added", "an ignore rule was added"),
            EventKind("index.rule_updated", "an ignore rule was changed"),
            EventKind("index.rule_deleted", "an ignore rule was removed"),
            EventKind("index.document_added", "a document was ingested"),
            EventKind("index.document_deleted", "an ingested document was removed")]


@hookimpl
def register_permissions(kernel):
    return [Permission("index.read", "Search, query and inspect a project's code index",
                       ("reader", "builder", "admin")),
            Permission("index.build", "Build the index, ingest documents, change ignore rules, "
                       "run the watcher", ("builder", "admin")),
            Permission("index.learn", "Report activity and feedback that train the links "
                       "between a project's files", ("reader", "builder", "admin")),
            Permission("index.admin", "Repair a project's index and learned state "
                       "(validate with write)", ("admin",))]


@hookimpl
def register_routes(kernel):
    from plugins.index.resources import routes
    state = _state(kernel)
    return routes(kernel, state.service, state.watchers)


@hookimpl
def describe_project(kernel, project):
    return _service(kernel).describe(project)


@hookimpl
def forget_project(kernel, project):
    state = kernel.state("index")
    if state is not None:
        state.watchers.forget(project)
        state.service.forget(project)


@hookimpl
def shutdown(kernel):
    state = kernel.drop_state("index")
    if state is not None:
        state.watchers.shutdown()
        state.service.close()


@hookimpl
def storage_components(settings):
    """Each project's index.db and usage.db: checked by ``storage check`` and before a server
    starts, never copied into a shared database — each machine derives its own index from its
    checkout (docs/operations.md, "Scaling out")."""
    from neuralmind import StorageComponent, StoredFile
    from plugins.index import store, usage

    def files(home) -> list:
        return [StoredFile(p.state_dir / name, migrations, label=p.id) for p in home.projects()
                for name, migrations in (("index.db", store.MIGRATIONS),
                                         ("usage.db", usage.MIGRATIONS))]

    return [StorageComponent("index", None, (), files, lambda home, target: [])]


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.index.commands import register
    register(subparsers)


@hookimpl
def config_sections():
    from plugins.index.models import IndexSettings
    return {"index": IndexSettings}
