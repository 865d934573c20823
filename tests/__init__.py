"""The test suite. It writes the bytecode of what it imports even when
``PYTHONDONTWRITEBYTECODE`` is set (it is on these machines): a session starts some hundred
Python processes on the project's modules (pytest-xdist workers, servers, CLI runs), and each
would otherwise compile them from source again, and rewrite every test module's asserts."""

import sys

sys.dont_write_bytecode = False
