"""schemathesis hooks every run of tests/support.py's ``schemathesis`` loads: the body of a
route that takes a file of JSON lines (the memory import) sent as the bytes generated for it,
as for any file — schemathesis serializes no JSON Lines media type of its own."""

from __future__ import annotations

import schemathesis

from plugins.memory.resources import JSONL_TYPES


@schemathesis.serializer(*JSONL_TYPES)
def as_file(ctx, value) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()
