"""WSGI entry point (gunicorn memoryhub.wsgi)."""

import os
import sys

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
application = get_wsgi_application()

from memoryhub.checks import database_problem  # noqa: E402

if os.environ.get("MEMORYHUB_SKIP_DB_CHECK") != "1" and (problem := database_problem()):
    sys.stderr.write(f"memoryhub: {problem}\n")
    raise SystemExit(3)
