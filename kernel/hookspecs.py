"""Every hook a NeuralMind plugin can implement: the one contract plugins code against.

Hooks are unprefixed and verb-first and are called with keyword arguments, the kernel first.
Each has a longer description in ``docs/plugins.md``; ``tests/kernel/test_hook_docs.py`` keeps
the two in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import argparse

    import falcon

    from kernel.app import Kernel
    from kernel.auth import Actor, Permission
    from kernel.config import ConfigSection, Settings
    from kernel.embeddings import Embedder
    from kernel.events import Event, EventKind
    from kernel.projects import Project
    from kernel.stored import StorageComponent

hookspec = pluggy.HookspecMarker("neuralmind")


@hookspec
def startup(kernel: Kernel) -> None:
    """Once per process (each gunicorn worker), after every plugin is registered."""


@hookspec
def shutdown(kernel: Kernel) -> None:
    """Once per process when it stops: stop threads, close stores."""


@hookspec
def forget_project(kernel: Kernel, project: Project) -> None:
    """Let go of what the plugin keeps in this process for ``project`` (open stores, caches,
    buffers): it was removed, or removed and registered again, since this process served it.
    Its files are never touched. Must not raise; the kernel logs and goes on."""


@hookspec
def register_routes(kernel: Kernel) -> list[tuple[str, object]]:
    """Routes as ``(uri_template, resource)``; every responder carries ``@operation``."""


@hookspec
def register_permissions(kernel: Kernel) -> list[Permission]:
    """Permissions the plugin's routes name, each with its default roles."""


@hookspec
def register_event_kinds(kernel: Kernel) -> list[EventKind]:
    """The event kinds the plugin emits, each with what it means: what webhooks and streams
    may subscribe to."""


@hookspec
def register_middleware(kernel: Kernel) -> list[object]:
    """Falcon middleware objects, run after the kernel's own guards (CORS, rate limits).
    Their ``process_response`` runs before the request's events are written; one whose
    ``after_events`` attribute is ``True`` is placed outside the kernel's middleware instead,
    so its ``process_response`` runs once they are written (bookkeeping that may wait on a
    lock must not stand between a committed write and its events) — and its
    ``process_request``, if it has one, before the guards."""


@hookspec(firstresult=True)
def actor_from_request(kernel: Kernel, request: falcon.Request, again: bool) -> Actor | None:
    """Who sent the request; None when this plugin does not know. Raise ``Unauthorized``
    for credentials that are present but wrong. ``again``: the kernel asks once more for a
    request it let in, whose answer is still being sent (an event stream checking that its
    token was not revoked meanwhile): answer as before, but count nothing (rate limits)."""


@hookspec
def permission_allowed(kernel: Kernel, actor: Actor, permission: str,
                       project: Project | None) -> bool | None:
    """Any False denies, else any True allows, else the request is denied."""


@hookspec(firstresult=True)
def refusal(kernel: Kernel, actor: Actor, permission: str,
            project: Project | None) -> tuple[str, dict[str, Any]] | None:
    """Why ``actor`` was refused ``permission``, when the kernel's own words ("X may not P")
    would mislead: ``(message, details)`` for the 403 (``details`` joins ``permission``);
    None leaves the kernel's."""


@hookspec
def track_event(kernel: Kernel, event: Event) -> None:
    """Called after a domain write has committed. Must not raise; the kernel logs and goes on."""


@hookspec
def query_context(kernel: Kernel, project: Project, question: str, hits: list[dict[str, Any]],
                  budget: int) -> list[dict[str, Any]] | None:
    """Context parts a plugin adds to a code query: ``[{"title", "text", "tokens"}]``
    within ``budget`` tokens (the memory plugin adds the decisions on the hit files)."""


@hookspec
def describe_files(kernel: Kernel, project: Project, paths: list[str]
                   ) -> list[dict[str, Any]] | None:
    """Records the plugin keeps on these project files, one per (file, record):
    ``[{"path", "kind", "id", "title", "status", "files"}]``, ``files`` every file the record
    names (the memory plugin: ACTIVE decisions)."""


@hookspec
def describe_project(kernel: Kernel, project: Project) -> dict[str, Any] | None:
    """Facts the plugin keeps about a project, merged into the project's ``status``."""


@hookspec
def register_commands(kernel: Kernel | None, subparsers: argparse._SubParsersAction) -> None:
    """CLI sub-commands the plugin adds to ``neuralmind``; set ``func`` with ``set_defaults``."""


@hookspec(firstresult=True)
def embedder(kernel: Kernel) -> Embedder | None:
    """An ``Embedder`` that replaces the packaged model."""


@hookspec
def server_settings(config: dict[str, Any]) -> dict[str, Any] | None:
    """Server-mode settings (``host``, ``port``) a plugin derives from its own config section;
    the config's ``[server]`` keys win over these."""


@hookspec
def config_sections() -> dict[str, type[ConfigSection]] | None:
    """The plugin's config sections (dotted names reach nested tables) and their models: a
    server checks them all before it forks, where a bad value would stop each worker."""


@hookspec(firstresult=True)
def answer_provider(kernel: Kernel, project: Project) -> Any:
    """What writes the answers of ``POST /v1/projects/{id}/ask`` for ``project``: an object
    with ``name``, ``model`` and ``answer(question, sources, stream) -> Iterable[str]`` (the
    answer in pieces, citing sources as ``[n]``); None leaves it to the next plugin."""


@hookspec
def storage_components(settings: Settings) -> list[StorageComponent] | None:
    """What the plugin stores, for ``neuralmind storage check`` and ``storage migrate``: each
    component's name in the shared database, its PostgreSQL migrations and tables, the files
    it keeps in a SQLite home, and how to copy them into PostgreSQL."""
