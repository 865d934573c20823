"""``[tier2.self_hosted] bind_address, port``: tier2's self-hosted settings fed to server mode.

The adapter lives here, so no core code reads a tier2 setting: the kernel's
``server_settings`` hook hands these to ``neuralmind serve``, where the config's own
``[server]`` keys and the command line's flags still win.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from neuralmind import ConfigSection

SECTION = ("tier2", "self_hosted")


class SelfHosted(ConfigSection):
    bind_address: str | None = Field(None, min_length=1, max_length=255)
    port: int | None = Field(None, ge=0, le=65535)


def server_keys(config: dict[str, Any]) -> dict[str, Any]:
    """``{"host", "port"}`` from the section; keys it leaves unset are not returned, and none
    from a section that does not validate: the server's check of every section, which runs
    next and before anything starts, names its problems with the others' (``[tier2]``)."""
    data: Any = config
    for part in SECTION:
        data = data.get(part, {}) if isinstance(data, dict) else {}
    try:
        section = SelfHosted.model_validate(data or {})
    except ValidationError:
        return {}
    keys = {"host": section.bind_address, "port": section.port}
    return {k: v for k, v in keys.items() if v is not None}
