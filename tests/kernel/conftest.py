"""Kernel test set-up: the third-party example plugin is installed with pip, as a user would."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "example_plugin"


@pytest.fixture(scope="session", autouse=True)
def example_plugin_installed():
    if importlib.util.find_spec("neuralmind_example") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", str(EXAMPLE)], check=True)
        importlib.invalidate_caches()
    assert importlib.util.find_spec("neuralmind_example") is not None


@pytest.fixture(scope="module")
def kserver(tmp_path_factory, example_plugin_installed):
    """One 2-worker gunicorn with the auth and example plugins, for a whole test module."""
    from tests.support import Server
    home = tmp_path_factory.mktemp("khome")
    server = Server(home / "home", plugins=["auth", "example"], workers=2,
                    env={"HOME": str(home)},
                    config="[kernel]\nsse_heartbeat_s = 0.5\n")
    server.start()
    yield server
    server.stop()
