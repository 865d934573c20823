"""The licence boundary (spec P5): the core never imports tier2. Every module under kernel/,
neuralmind/ and the other plugins is parsed and its imports walked; plain imports, ``from``
imports (relative ones resolved), and dotted strings naming the plugin (importlib, __import__,
entry-point-like tables) all count.

The same walk keeps every plugin to itself: a plugin reaches another only through hooks and
the kernel, never by importing its modules (tier2_bridge included, either way); and it reaches
the kernel only through the public ``neuralmind`` package, never ``kernel.…``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

PLUGIN = "plugins.tier2_bridge"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names(name: str, plugin: str) -> bool:
    return name == plugin or name.startswith(plugin + ".") or name.startswith(plugin + ":")


def reaches(source: str, module: str, is_package: bool = False) -> list[str]:
    """Every module name ``source`` (the text of ``module``) imports or spells out as a
    string: ``import a.b``, ``from a import b`` (``a`` and ``a.b``), relative imports resolved."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found += [base, *(f"{base}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value.strip())
    return found


def tier2_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Where ``source`` (the text of ``module``) reaches for plugins.tier2_bridge."""
    return [name for name in reaches(source, module, is_package) if _names(name, PLUGIN)]


def bundled_plugins() -> list[str]:
    return sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "plugin.py").is_file())


def other_plugins_reached(source: str, module: str, is_package: bool = False) -> list[str]:
    """The modules of other plugins that ``source``, plugin module ``module``, reaches for."""
    own = module.split(".")[1]
    others = [f"plugins.{name}" for name in bundled_plugins() if name != own]
    return [n for n in reaches(source, module, is_package)
            if any(_names(n, other) for other in others)]


def core_modules() -> list[Path]:
    roots = [ROOT / "kernel", ROOT / "neuralmind", ROOT / "plugins"]
    files = [p for r in roots for p in r.rglob("*.py")]
    return sorted(p for p in files if (ROOT / "plugins" / "tier2_bridge") not in p.parents)


def test_nothing_outside_the_plugin_imports_it():
    modules = core_modules()
    assert {p.relative_to(ROOT).parts[0] for p in modules} == {"kernel", "neuralmind", "plugins"}
    assert any("auth" in p.parts for p in modules)
    offenders = {}
    for path in modules:
        hits = tier2_imports(path.read_text(), _module_name(path), path.name == "__init__.py")
        if hits:
            offenders[str(path.relative_to(ROOT))] = hits
    assert offenders == {}


def kernel_reached(source: str, module: str, is_package: bool = False) -> list[str]:
    """The kernel modules ``source`` imports, where it should import ``neuralmind``."""
    return [n for n in reaches(source, module, is_package) if _names(n, "kernel")]


def test_plugins_reach_the_kernel_only_through_neuralmind():
    offenders = {}
    for name in bundled_plugins():
        for path in sorted((ROOT / "plugins" / name).rglob("*.py")):
            hits = kernel_reached(path.read_text(), _module_name(path), path.name == "__init__.py")
            if hits:
                offenders[str(path.relative_to(ROOT))] = hits
    assert offenders == {}


@pytest.mark.parametrize("source, found", [
    ("from kernel.errors import NotFound", ["kernel.errors", "kernel.errors.NotFound"]),
    ("from kernel import gitinfo", ["kernel", "kernel.gitinfo"]),
    ("import kernel.app", ["kernel.app"]),
    ("from neuralmind import gitinfo, hookimpl", []),
    ('LOG = "kernel-side threads"', []),
])
def test_the_walker_catches_a_plugin_reaching_into_the_kernel(source, found):
    assert kernel_reached(source, "plugins.index.service") == found


def test_no_plugin_imports_another_plugins_modules():
    plugins = bundled_plugins()
    assert {"auth", "memory", "index", "tier2_bridge"} <= set(plugins)
    offenders = {}
    for name in plugins:
        for path in sorted((ROOT / "plugins" / name).rglob("*.py")):
            hits = other_plugins_reached(path.read_text(), _module_name(path),
                                         path.name == "__init__.py")
            if hits:
                offenders[str(path.relative_to(ROOT))] = hits
    assert offenders == {}


@pytest.mark.parametrize("source, module", [
    ("from plugins.memory.records import now_iso", "plugins.index.service"),
    ("from ..memory import records", "plugins.index.service"),
    ("import plugins.auth.tokens as tokens", "plugins.tier2_bridge.seats"),
    ("importlib.import_module('plugins.index.search')", "plugins.memory.search"),
])
def test_the_walker_catches_a_plugin_reaching_into_another(source, module):
    assert other_plugins_reached(source, module)


@pytest.mark.parametrize("source, module", [
    ("from plugins.index.store import IndexStore", "plugins.index.service"),
    ("from . import records", "plugins.memory.service"),
    ("from kernel.projects import Project", "plugins.tier2_bridge.audit"),
    ('"""Unlike plugins.memory, the index keeps no history."""', "plugins.index.store"),
])
def test_the_walker_lets_a_plugin_use_itself_and_the_kernel(source, module):
    assert other_plugins_reached(source, module) == []


@pytest.mark.parametrize("source, module", [
    ("import plugins.tier2_bridge.audit", "kernel.app"),
    ("import plugins.tier2_bridge as t", "kernel.app"),
    ("from plugins.tier2_bridge import audit", "kernel.app"),
    ("from plugins import tier2_bridge", "neuralmind.cli"),
    ("from plugins.tier2_bridge.seats import License", "plugins.auth.plugin"),
    ("from ..tier2_bridge import seats", "plugins.auth.plugin"),
    ("from .. import tier2_bridge", "plugins.auth.plugin"),
    ("import importlib\nimportlib.import_module('plugins.tier2_bridge.audit')", "kernel.app"),
    ("__import__('plugins.tier2_bridge')", "kernel.app"),
    ("TARGET = 'plugins.tier2_bridge.plugin:hook'", "kernel.plugins"),
    ("def f():\n    from plugins.tier2_bridge import plugin", "kernel.app"),
])
def test_the_walker_catches_every_way_in(source, module):
    assert tier2_imports(source, module)


@pytest.mark.parametrize("source, module", [
    ("from plugins.auth import tokens", "kernel.app"),
    ("BUNDLED = {n: f'plugins.{n}.plugin' for n in ('auth', 'tier2_bridge')}", "kernel.plugins"),
    ('"""tier2 bridge: described, never imported"""', "kernel.cli"),
    ("from . import tier2_bridge_notes", "plugins.auth.plugin"),
])
def test_the_walker_lets_names_alone(source, module):
    assert tier2_imports(source, module) == []
