"""The NeuralMind microkernel: routes, errors, guards, config, projects, jobs, events, plugins.

It knows nothing about memories or code; those arrive as plugins through ``kernel.hookspecs``.
"""

__version__ = "5.0.0.dev0"
API_VERSION = "1"  # the /v1 contract; sent as NeuralMind-API-Version
