"""The plugin manager: one per kernel, fed by the ``neuralmind`` entry-point group."""

from __future__ import annotations

import importlib
import re
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
        except (ConfigError, PluginError, StartupError, KeyboardInterrupt):
            raise
        except BaseException as ex:  # sys.exit in a plugin too: its name, not a silent exit
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
    """Plugin name → module path, for everything installed in the entry-point group. A
    bundled plugin's name always means the bundled plugin: the names are reserved
    (docs/security.md; :func:`contested` stops the plugin of a name another claims)."""
    others = _installed(tuple(sys.path))
    return {**{name: claims[0][1] for name, claims in others.items()}, **bundled()}


def contested(name: str) -> str | None:
    """Why plugin ``name`` cannot be taken from the entry points, or None: another
    distribution claims a bundled plugin's name, or two distributions claim one name. Which
    one won would depend on the order of ``sys.path``, so an installed package could quietly
    stand in for a plugin — authentication included."""
    claims = _installed(tuple(sys.path)).get(name, [])
    said = " and ".join(f"{dist} ({target})" for dist, target in claims)
    if name in bundled() and claims:
        return (f"plugin name {name!r} is reserved for NeuralMind's bundled plugin "
                f"({bundled()[name]}), but the installed "
                + (f"distribution {said} claims" if len(claims) == 1 else f"distributions {said} claim")
                + " it too: uninstall it, or rename its entry point")
    if len(claims) > 1:
        return f"plugin name {name!r} is claimed by {len(claims)} installed distributions, {said}"
    return None


@cache
def _installed(path: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    """Plugin name → ``(distribution, module path)`` of each distribution on ``path``
    (``sys.path`` now) but this one declaring it in the group, read once per path: reading
    opens every installed distribution's metadata (~8 ms here), and one command makes a
    manager per plugin (the CLI's parser) or several in a row (``serve``)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for ep in entry_points(group=GROUP):
        dist = ep.dist
        if dist is None or re.sub(r"[-_.]+", "-", dist.name).lower() != DISTRIBUTION:  # PEP 503
            who = f"{dist.name} {dist.version}" if dist is not None else "a nameless distribution"
            found.setdefault(ep.name, []).append((who, ep.value))
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
    except KeyboardInterrupt:
        raise
    except BaseException as ex:  # any import-time failure, sys.exit too: one naming the plugin
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
    names = list(dict.fromkeys(enabled))
    for name in names if load_entrypoints else ():
        if why := contested(name):
            raise PluginError(why)
    for name, plugin in [*((n, _load(n, known)) for n in names),
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
