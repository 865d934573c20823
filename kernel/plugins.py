"""The plugin manager: one per kernel, fed by the ``neuralmind`` entry-point group."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import entry_points

import pluggy

from kernel import hookspecs

GROUP = "neuralmind"
hookimpl = pluggy.HookimplMarker("neuralmind")

# Used only when the distribution's metadata is missing (a source tree run without install).
BUNDLED = {name: f"plugins.{name}.plugin"
           for name in ("auth", "memory", "index", "mcp", "tier2_bridge")}


class PluginError(Exception):
    """An enabled plugin that is unknown, fails to import, or implements an unknown hook."""


def available() -> dict[str, str]:
    """Plugin name → module path, for everything installed in the entry-point group."""
    found = dict(BUNDLED)
    found.update({ep.name: ep.value for ep in entry_points(group=GROUP)})
    return found


def _load(name: str, known: dict[str, str]) -> object:
    target = known.get(name)
    if target is None:
        raise PluginError(f"unknown plugin {name!r}: no entry point {name!r} in group {GROUP!r} "
                          f"(installed: {', '.join(sorted(known)) or 'none'})")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr) if attr else module
    except Exception as ex:  # any import-time failure is a start-up error with the plugin's name
        raise PluginError(f"plugin {name!r} ({target}) failed to load: "
                          f"{type(ex).__name__}: {ex}") from ex


def make_plugin_manager(enabled: Iterable[str], extra: Iterable[object] = (),
                        load_entrypoints: bool = True) -> pluggy.PluginManager:
    """A fresh manager with the ``enabled`` plugins (by name) and ``extra`` objects registered.

    ``load_entrypoints=False`` resolves names among the bundled plugins only, so a test
    never picks up whatever third-party plugin happens to be installed.
    """
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    known = available() if load_entrypoints else dict(BUNDLED)
    for name in dict.fromkeys(enabled):
        pm.register(_load(name, known), name=name)
    for plugin in extra:
        pm.register(plugin)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as ex:
        raise PluginError(f"plugin {ex.plugin!r} implements a hook that does not exist: {ex}") from ex
    return pm
