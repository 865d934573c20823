"""The public plugin API: every name the ``neuralmind`` package exports resolves (the
bundled plugins import nothing else of ours: tests/plugins/tier2_bridge/test_tier2_boundary.py
walks their imports)."""

from __future__ import annotations

import neuralmind
from tests.support import ROOT


def test_every_exported_name_resolves():
    missing = [name for name in neuralmind.__all__ if getattr(neuralmind, name, None) is None]
    assert missing == [] and {"hookimpl", "operation", "InvalidFields", "gitinfo"} <= set(
        neuralmind.__all__)
    assert neuralmind.gitinfo.head(ROOT)  # this checkout is a git repository
