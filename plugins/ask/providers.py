"""What every answer provider's failures become, whichever plugin provides it: 502
``provider_error`` or 504 ``provider_timeout`` in the envelope, never our exception text."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from neuralmind import APIError

log = logging.getLogger("neuralmind.ask")


class ProviderError(APIError):
    status, code, message = 502, "provider_error", "the answer provider failed"


class ProviderTimeout(APIError):
    status, code, message = 504, "provider_timeout", "the answer provider did not answer in time"


def pieces(provider, question: str, sources: list[dict[str, Any]], stream: bool) -> Iterator[str]:
    """The provider's answer, piece by piece: an ``APIError`` it raises passes as it is, a
    ``TimeoutError`` is a 504, anything else a 502 (logged with its traceback)."""
    try:
        for piece in provider.answer(question, sources, stream):
            if piece:
                yield piece
    except APIError:
        raise
    except TimeoutError:
        raise ProviderTimeout(f"the answer provider {provider.name!r} did not answer in "
                              "time") from None
    except Exception:
        log.exception("answer provider %r failed", getattr(provider, "name", provider))
        raise ProviderError(f"the answer provider {provider.name!r} failed; the server log "
                            "has the details") from None
