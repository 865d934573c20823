"""Hooks of the webhooks plugin: routes under ``/v1/webhooks``, the ``webhooks.manage``
permission, and a sender per worker that ``track_event`` wakes (delivery is never on the
request path). Kept cheap to import: the service is built on first use."""

from __future__ import annotations

from neuralmind import EventKind, Permission, hookimpl


def _make(kernel):
    from plugins.webhooks.models import WebhooksSettings
    from plugins.webhooks.service import Webhooks
    return Webhooks(kernel, kernel.settings.section("webhooks", WebhooksSettings))


def webhooks(kernel):
    """This kernel's :class:`~plugins.webhooks.service.Webhooks`."""
    return kernel.state("webhooks", lambda: _make(kernel))


@hookimpl
def register_event_kinds(kernel):
    return [EventKind("webhook.created", "a webhook was created"),
            EventKind("webhook.updated", "a webhook was changed"),
            EventKind("webhook.deleted", "a webhook was deleted"),
            EventKind("webhook.secret_rotated", "a webhook's secret was replaced"),
            EventKind("webhook.disabled", "a webhook was disabled after failing too long")]


@hookimpl
def register_permissions(kernel):
    from plugins.webhooks.models import WebhooksSettings
    settings = kernel.settings.section("webhooks", WebhooksSettings)
    roles = ("builder", "admin") if settings.builders_manage else ("admin",)
    return [Permission("webhooks.manage", "Create, change, test and delete webhooks (builders: "
                       "those of their projects, when [webhooks] builders_manage allows it)",
                       roles)]


@hookimpl
def register_routes(kernel):
    from plugins.webhooks.resources import routes
    return routes(webhooks(kernel))


@hookimpl
def startup(kernel):
    webhooks(kernel).sender.start()


@hookimpl
def shutdown(kernel):
    service = kernel.drop_state("webhooks")
    if service is not None:
        service.close()


@hookimpl
def track_event(kernel, event):
    service = kernel.state("webhooks")
    if service is not None:
        service.sender.notify()


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.webhooks.commands import add_commands
    add_commands(subparsers)


@hookimpl
def storage_components(settings):
    from plugins.webhooks.store import storage_component
    return [storage_component()]


@hookimpl
def config_sections():
    from plugins.webhooks.models import WebhooksSettings
    return {"webhooks": WebhooksSettings}
