"""gunicorn settings for the team server, read from ``$NEURALMIND_CONFIG`` ([server] section).

    NEURALMIND_CONFIG=/config/server.toml gunicorn -c conf/gunicorn.conf.py kernel.wsgi:application
"""

import sys

from kernel.config import ConfigError, load_settings
from kernel.serving import CannotServe, gunicorn_options, hold_home

try:
    _settings = load_settings()
    _options = gunicorn_options(_settings)
except (ConfigError, CannotServe) as _ex:  # one line, as `neuralmind serve` says it
    print(f"neuralmind: {_ex}", file=sys.stderr)
    sys.exit(2)
if _why := hold_home(_settings.home, "server"):  # storage migrate waits for the master's end
    print(f"neuralmind: {_why}", file=sys.stderr)
    sys.exit(1)
for _name, _value in _options.items():
    globals()[_name] = _value
