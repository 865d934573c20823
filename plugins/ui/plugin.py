"""Hooks of the ui plugin: the dashboard at ``/ui``, a static page built only on the public
/v1 routes, and (loopback mode) the one-time codes ``neuralmind ui`` signs the browser in with.

On by default in loopback mode; a team server serves it when ``[ui] enabled = true``.
Kept cheap to import (the CLI loads every plugin on each run)."""

from __future__ import annotations

from pydantic import Field

from neuralmind import ConfigSection, Permission, hookimpl


class UISettings(ConfigSection):
    enabled: bool | None = Field(None, description="serve /ui; default: on in loopback mode, "
                                 "off in server mode")
    sign_in_code_ttl_s: float = Field(60.0, ge=1, le=600,
                                      description="how long a `neuralmind ui` code is valid")


def _settings(kernel) -> UISettings:
    return kernel.settings.section("ui", UISettings)  # read before kernel state exists


def _serves(kernel) -> bool:
    enabled = _settings(kernel).enabled
    return enabled if enabled is not None else not kernel.settings.server_mode


def _signs_in(kernel) -> bool:
    """One-time codes exist in loopback mode only: the server already holds the one token
    they stand for, and a team server never keeps a raw token (docs/security.md)."""
    return _serves(kernel) and not kernel.settings.server_mode


@hookimpl
def register_permissions(kernel):
    if not _signs_in(kernel):
        return []
    return [Permission("ui.sign_in", "Make a one-time code that signs the dashboard in with "
                       "the caller's own token (loopback mode)", ("admin",),
                       beyond_projects=True)]


@hookimpl
def register_routes(kernel):
    if not _serves(kernel):
        return []
    from plugins.ui.resources import routes
    return routes(kernel, _settings(kernel), _signs_in(kernel))


@hookimpl
def shutdown(kernel):
    codes = kernel.drop_state("ui.codes")
    if codes is not None:
        codes.close()


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.ui.commands import add_commands
    add_commands(subparsers)


@hookimpl
def config_sections():
    return {"ui": UISettings}
