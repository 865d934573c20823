"""The plugin manager: one per kernel, fed by the ``neuralmind`` entry-point group."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from typing import Any

import pluggy

from kernel import hookspecs
from kernel.config import ConfigError

GROUP = "neuralmind"
hookimpl = pluggy.HookimplMarker("neuralmind")

DISTRIBUTION = "neuralmind"


class StartupError(Exception):
    """The server cannot start: a route without ``@operation``, an unknown permission, a
    plugin's ``startup`` that raised, …"""


def plugin_label(pm: pluggy.PluginManager, plugin: object) -> str:
    """A plugin as its author knows it: its registered name, else (an object registered
    without one, which pluggy names by ``id``) its module's or class's name."""
    name = pm.get_name(plugin)
    if name and name != str(id(plugin)):
        return name
    return getattr(plugin, "__name__", None) or type(plugin).__name__


class PluginError(Exception):
    """An enabled plugin that is unknown, fails to import, implements an unknown hook or one
    with arguments it does not have, or whose hook raised while the kernel was assembled."""


def each(pm: pluggy.PluginManager, hook: str, doing: str = "", **kwargs: Any
         ) -> list[tuple[str, Any]]:
    """``(plugin, result)`` of each implementation of ``hook``, in the order pluggy calls them,
    for the hooks whose answers the kernel assembles (routes, permissions, config sections,
    commands): so a wrong answer is named with its plugin, and so is one that raises — a
    PluginError saying what it was doing (``doing``, else the hook) instead of a traceback; a
    kernel error it raised (a config section, another plugin's) goes on as it is. Called one
    by one, these hooks cannot be wrapped."""
    out = []
    for impl in reversed(getattr(pm.hook, hook).get_hookimpls()):
        name = plugin_label(pm, impl.plugin)
        if impl.hookwrapper or impl.wrapper:
            raise PluginError(f"plugin {name!r} wraps {hook}, whose implementations the kernel "
                              "calls one by one: implement it instead")
        try:
            result = impl.function(*[kwargs[arg] for arg in impl.argnames])
        except (ConfigError, PluginError, StartupError):
            raise
        except Exception as ex:
            raise PluginError(f"plugin {name!r} {doing or f'failed in {hook}'}: "
                              f"{type(ex).__name__}: {ex}") from ex
        out.append((name, result))
    return out


@cache
def bundled() -> dict[str, str]:
    """Plugin name → module path for the plugins this distribution ships: its own entry
    points in the group (pyproject.toml), read from the installed metadata."""
    try:
        dist = distribution(DISTRIBUTION)
    except PackageNotFoundError:
        raise PluginError(f"the {DISTRIBUTION} distribution is not installed, so its bundled "
                          "plugins cannot be found: run `pip install -e .` in the source "
                          "tree") from None
    return {ep.name: ep.value for ep in dist.entry_points if ep.group == GROUP}


def available() -> dict[str, str]:
    """Plugin name → module path, for everything installed in the entry-point group."""
    return {**bundled(), **_installed(tuple(sys.path))}


@cache
def _installed(path: tuple[str, ...]) -> dict[str, str]:
    """The group's entry points on ``path`` (``sys.path`` now), read once per path: reading
    opens every installed distribution's metadata (~8 ms here), and one command makes a
    manager per plugin (the CLI's parser) or several in a row (``serve``)."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


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
    known = available() if load_entrypoints else bundled()
    for name, plugin in [*((n, _load(n, known)) for n in dict.fromkeys(enabled)),
                         *((None, p) for p in extra)]:
        try:
            pm.register(plugin, name=name)
        except pluggy.PluginValidationError as ex:  # an argument its hook spec does not have
            label = name or getattr(plugin, "__name__", None) or type(plugin).__name__
            raise PluginError(f"plugin {label!r} does not fit kernel/hookspecs.py: "
                              + "; ".join(str(ex).splitlines()[1:])) from ex
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as ex:  # pluggy's message names the plugin's repr
        what = str(ex).split(" in plugin ")[0]
        raise PluginError(f"plugin {plugin_label(pm, ex.plugin)!r} implements a hook that does "
                          f"not exist ({what}; kernel/hookspecs.py lists them)") from ex
    return pm
