"""The narrow plugin API: bundled plugins import of our code only the public ``neuralmind``
package (its names, and for commands its client and CLI helpers) and their own modules — never
``kernel.…``, never another plugin — as a third-party plugin would; and every name
``neuralmind`` exports resolves."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import neuralmind
from tests.support import ROOT

OURS = ("kernel", "plugins", "neuralmind")


def imports_of(path: Path) -> list[str]:
    """Every module ``path`` imports from our packages (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - (node.level - 1)], *([base] if base else [])])
            found.append(base)
    return [m for m in found if m.split(".")[0] in OURS]


def offences(plugin_dir: Path) -> list[str]:
    own = f"plugins.{plugin_dir.name}"
    bad = []
    for path in sorted(plugin_dir.rglob("*.py")):
        for module in imports_of(path):
            if module.split(".")[0] == "neuralmind" or module == own or module.startswith(own + "."):
                continue
            bad.append(f"{path.relative_to(ROOT)} imports {module}")
    return bad


PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "plugin.py").is_file())


@pytest.mark.parametrize("plugin_dir", PLUGINS, ids=lambda p: p.name)
def test_a_bundled_plugin_imports_only_neuralmind_and_itself(plugin_dir):
    assert offences(plugin_dir) == []


def test_the_check_catches_a_kernel_import_and_another_plugins(tmp_path, monkeypatch):
    fake = tmp_path / "plugins" / "fake"
    fake.mkdir(parents=True)
    (fake / "plugin.py").write_text("from kernel.errors import NotFound\n"
                                    "from plugins.memory import records\n"
                                    "from . import helpers\nfrom neuralmind import hookimpl\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert offences(fake) == ["plugins/fake/plugin.py imports kernel.errors",
                                 "plugins/fake/plugin.py imports plugins.memory"]


def test_every_exported_name_resolves():
    missing = [name for name in neuralmind.__all__ if getattr(neuralmind, name, None) is None]
    assert missing == [] and {"hookimpl", "operation", "InvalidFields", "gitinfo"} <= set(
        neuralmind.__all__)
    assert neuralmind.gitinfo.head(ROOT)  # this checkout is a git repository
