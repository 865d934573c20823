"""NeuralMind: a self-hosted, local-first memory server for AI coding agents.

What users import: ``neuralmind.client.NeuralMindClient``.
What plugin authors import — all of it, the bundled plugins included — is listed in
``_EXPORTS`` below and documented in docs/plugins.md: the hook marker, ``@operation`` and the
models, the error classes, jobs, and the helpers plugins share (clock, git, text, vectors,
per-project stores, the CLI's command groups).

The names are resolved on first use (PEP 562), so ``import neuralmind.client`` — stdlib
only — does not pull in the server's packages (pydantic, falcon, pluggy, numpy).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "__version__": "kernel",
    # hooks, routes, models
    "hookimpl": "kernel.plugins",
    **dict.fromkeys(("operation", "read_body", "answer_job"), "kernel.api"),
    **dict.fromkeys(("Model", "Page", "PageQuery", "ISODate", "encode_cursor", "decode_cursor",
                     "text_pair", "row_number", "no_nul", "not_blank", "text", "matching"),
                    "kernel.models"),
    **dict.fromkeys(("Actor", "Permission", "ROLES", "KERNEL_PERMISSIONS"), "kernel.auth"),
    **dict.fromkeys((
        "APIError", "BadRequest", "Conflict", "Forbidden", "InvalidFields", "NotFound",
        "PreconditionFailed", "RateLimited", "Unauthorized", "Unavailable",
        "UnsupportedMediaType", "ValidationFailed", "log_failure"), "kernel.errors"),
    **dict.fromkeys(("Job", "JobAccepted", "JobContext"), "kernel.jobs"),
    **dict.fromkeys(("Answer", "Caller"), "kernel.inner"),
    # helpers the plugins share
    **dict.fromkeys(("now_iso", "iso_time", "today"), "kernel.clock"),
    "gitinfo": "kernel.gitinfo",
    **dict.fromkeys(("EventKind", "kind_filter"), "kernel.events"),
    **dict.fromkeys(("STOPWORDS", "TOKEN_COUNTER", "combining_marks", "estimate_tokens",
                     "keyword_text", "one_line", "unspaced"), "kernel.text"),
    **dict.fromkeys(("VersionedCache", "top_k"), "kernel.vectors"),
    **dict.fromkeys(("ProjectStores", "database_errors", "migrate", "statements"),
                   "kernel.storage"),
    **dict.fromkeys(("PgDatabase", "missing_vector", "open_shared", "unreachable"), "kernel.pg"),
    **dict.fromkeys(("StorageComponent", "StoredFile", "Check", "copy_table", "file_size"),
                   "kernel.stored"),
    **dict.fromkeys(("ConfigError", "ConfigSection", "load_settings", "file_in_the_way"),
                   "kernel.config"),
    **dict.fromkeys(("pid_alive", "read_discovery", "update_discovery", "write_discovery",
                     "write_private"), "kernel.daemon"),
    # commands and tools that run outside a server
    "command_group": "kernel.commands",
    "record_event": "kernel.events",
    "Kernel": "kernel.app",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neuralmind' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module.rsplit(".", 1)[-1] == name else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
