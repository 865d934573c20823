"""NeuralMind: a self-hosted, local-first memory server for AI coding agents.

What plugin authors import: ``hookimpl``, ``operation`` and the error classes.
What users import: ``neuralmind.client.NeuralMindClient``.

The names below are resolved on first use (PEP 562), so ``import neuralmind.client`` —
stdlib only — does not pull in the server's packages (pydantic, falcon, pluggy).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "__version__": "kernel", "hookimpl": "kernel.plugins", "operation": "kernel.api",
    "Model": "kernel.api", "Page": "kernel.api", "PageQuery": "kernel.api",
    "Actor": "kernel.auth", "Permission": "kernel.auth",
    **{name: "kernel.errors" for name in (
        "APIError", "BadRequest", "Conflict", "Forbidden", "NotFound", "PreconditionFailed",
        "RateLimited", "Unauthorized", "Unavailable", "ValidationFailed")},
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neuralmind' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
