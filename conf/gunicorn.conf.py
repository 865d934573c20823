"""gunicorn settings for the team server, read from ``$NEURALMIND_CONFIG`` ([server] section).

    NEURALMIND_CONFIG=/config/server.toml gunicorn -c conf/gunicorn.conf.py kernel.wsgi:application
"""

import sys

from kernel.config import ConfigError, load_settings
from kernel.serving import CannotServe, gunicorn_options

try:
    _options = gunicorn_options(load_settings())
except (ConfigError, CannotServe) as _ex:  # one line, as `neuralmind serve` says it
    print(f"neuralmind: {_ex}", file=sys.stderr)
    sys.exit(2)
for _name, _value in _options.items():
    globals()[_name] = _value
