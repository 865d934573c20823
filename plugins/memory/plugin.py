"""Hooks of the memory plugin: memories (decisions, facts, preferences, procedures, episodes)
with history, search, links, contradictions and decay, per project.

Kept cheap to import (the CLI loads every plugin on each run): the service, pydantic models
and numpy are imported on first use.
"""

from __future__ import annotations

from neuralmind import EventKind, Permission, hookimpl


EVENT_KINDS = {  # memory.<name>: what happened
    "created": "a record was added", "amended": "a record's fields or tags changed",
    "invalidated": "a record was marked no longer true", "restored": "a record is active again",
    "feedback": "a record was rated helpful or unhelpful", "deleted": "a record was deleted",
    "stale": "a record passed its review-by date", "batch": "a batch of writes was applied",
    "imported": "an export was imported", "linked": "a link between records was added",
    "unlinked": "a link between records was removed",
    "superseded": "a record was replaced by a newer one", "merged": "records were consolidated",
    "decayed": "a decay sweep archived records", "decay_policy": "the decay policy changed",
    "contradiction": "two records were found to contradict",
    "contradiction_resolved": "a contradiction was resolved",
    "contradiction_config": "the contradiction check's settings changed",
    "collection_saved": "a collection (a named filter) was saved",
    "collection_deleted": "a collection was removed"}


def _make(kernel):
    from plugins.memory.models import MemorySettings
    from plugins.memory.service import Memories
    return Memories(kernel, kernel.settings.section("memory", MemorySettings))


def memories(kernel):
    """This kernel's :class:`~plugins.memory.service.Memories`."""
    return kernel.state("memory", lambda: _make(kernel))


@hookimpl
def register_event_kinds(kernel):
    return [EventKind(f"memory.{name}", text) for name, text in EVENT_KINDS.items()]


@hookimpl
def register_permissions(kernel):
    return [
        Permission("memories.read", "Read, list, search and export memories",
                   ("reader", "builder", "admin")),
        Permission("memories.write", "Create, amend, link, resolve, sweep, consolidate, import "
                   "memories", 
                   ("builder", "admin")),
        Permission("memories.delete", "Hard-delete memories (their history is kept)", ("admin",)),
    ]


@hookimpl
def register_routes(kernel):
    from plugins.memory.resources import routes
    return routes(memories(kernel))


@hookimpl
def startup(kernel):
    service = memories(kernel)  # a bad [memory] section fails start-up, not the first request
    service.sweeps.start(service.settings.decay_sweep_hours)


@hookimpl
def forget_project(kernel, project):
    service = kernel.state("memory")
    if service is not None:
        service.forget(project)


@hookimpl
def shutdown(kernel):
    service = kernel.drop_state("memory")
    if service is not None:
        service.close()


@hookimpl
def query_context(kernel, project, question, hits, budget):
    return memories(kernel).context(project, hits, budget)


@hookimpl
def describe_files(kernel, project, paths):
    return memories(kernel).on_files(project, paths)


@hookimpl
def storage_components(settings):
    from plugins.memory.pgstore import storage_component
    return [storage_component()]


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.memory.commands import add_commands
    add_commands(subparsers)


@hookimpl
def config_sections():
    from plugins.memory.models import MemorySettings
    return {"memory": MemorySettings}
