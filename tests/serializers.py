"""schemathesis serializers for the media types our OpenAPI document publishes beyond JSON
(loaded through ``SCHEMATHESIS_HOOKS`` by tests/support.py ``schemathesis``): a JSONL import's
body is a file, which schemathesis generates as a string or bytes and sends as it is."""

from __future__ import annotations

import schemathesis


@schemathesis.serializer("application/x-ndjson", "application/jsonl", "application/x-jsonlines")
def as_sent(ctx, value) -> bytes:
    value = getattr(value, "data", value)  # format: binary comes as a str wrapping its bytes
    return value if isinstance(value, bytes) else str(value).encode()
