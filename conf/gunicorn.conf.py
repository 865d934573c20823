"""gunicorn settings for the team server, read from ``$NEURALMIND_CONFIG`` ([server] section).

    NEURALMIND_CONFIG=/config/server.toml gunicorn -c conf/gunicorn.conf.py kernel.wsgi:application
"""

import sys

from kernel import daemon
from kernel.config import ConfigError, load_settings
from kernel.serving import CannotServe, gunicorn_options

try:
    _settings = load_settings()
    _options = gunicorn_options(_settings)
except (ConfigError, CannotServe) as _ex:  # one line, as `neuralmind serve` says it
    print(f"neuralmind: {_ex}", file=sys.stderr)
    sys.exit(2)
try:  # the master holds the home as one of its servers: storage migrate waits for its end
    daemon.serve_home(_settings.home)
except daemon.HomeBusy as _ex:
    print(f"neuralmind: {_ex}: start the server when it ends", file=sys.stderr)
    sys.exit(1)
for _name, _value in _options.items():
    globals()[_name] = _value
