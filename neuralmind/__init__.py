"""NeuralMind: a self-hosted, local-first memory server for AI coding agents.

What plugin authors import: ``hookimpl``, ``operation`` and the error classes.
What users import: ``neuralmind.client.NeuralMindClient``.
"""

from kernel import __version__
from kernel.api import Model, Page, PageQuery, operation
from kernel.auth import Actor, Permission
from kernel.errors import (APIError, BadRequest, Conflict, Forbidden, NotFound, PreconditionFailed,
                           RateLimited, Unauthorized, Unavailable, ValidationFailed)
from kernel.plugins import hookimpl

__all__ = ["__version__", "hookimpl", "operation", "Model", "Page", "PageQuery", "Actor",
           "Permission", "APIError", "BadRequest", "Conflict", "Forbidden", "NotFound",
           "PreconditionFailed", "RateLimited", "Unauthorized", "Unavailable", "ValidationFailed"]
