"""gunicorn settings for the team server, read from ``$NEURALMIND_CONFIG`` ([server] section).

    NEURALMIND_CONFIG=/config/server.toml gunicorn -c conf/gunicorn.conf.py kernel.wsgi:application
"""

from kernel.config import load_settings
from kernel.serving import gunicorn_options

for _name, _value in gunicorn_options(load_settings()).items():
    globals()[_name] = _value
