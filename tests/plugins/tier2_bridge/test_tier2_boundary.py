"""The licence boundary (spec P5): the core never imports tier2. Every module under kernel/,
neuralmind/ and the other plugins is parsed and its imports walked; plain imports, ``from``
imports (relative ones resolved), and dotted strings naming the plugin (importlib, __import__,
entry-point-like tables) all count."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

PLUGIN = "plugins.tier2_bridge"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names_plugin(name: str) -> bool:
    return name == PLUGIN or name.startswith(PLUGIN + ".") or name.startswith(PLUGIN + ":")


def tier2_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Where ``source`` (the text of ``module``) reaches for plugins.tier2_bridge."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _names_plugin(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            found += [t for t in targets if _names_plugin(t)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _names_plugin(node.value.strip()):
                found.append(node.value)
    return found


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
