"""``application`` for gunicorn: ``gunicorn -c conf/gunicorn.conf.py kernel.wsgi:application``.

The kernel is built on first import in each worker (never in the master), reading
``$NEURALMIND_CONFIG``. What only a built kernel can find wrong (a role naming a permission no
plugin registers) is one line per worker and gunicorn's boot-error exit, which stops the
master, rather than each worker's traceback.
"""

import sys

from kernel.app import Kernel
from kernel.config import ConfigError
from kernel.plugins import PluginError, StartupError

try:
    kernel = Kernel()
except (ConfigError, PluginError, StartupError) as ex:
    print(f"neuralmind: {ex}", file=sys.stderr, flush=True)
    raise SystemExit(3) from None  # gunicorn's WORKER_BOOT_ERROR
application = kernel.app
