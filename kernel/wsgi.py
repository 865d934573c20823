"""``application`` for gunicorn: ``gunicorn -c conf/gunicorn.conf.py kernel.wsgi:application``.

The kernel is built on first import in each worker (never in the master), reading
``$NEURALMIND_CONFIG``.
"""

from kernel.app import Kernel

kernel = Kernel()
application = kernel.app
