"""The auth tests run on both storage backends (tests/conftest.py ``backend``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def both_backends(backend) -> str:
    return backend
