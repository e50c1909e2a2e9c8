"""The Celery app: Redis as broker when REDIS_URL is set, else tasks run in-process.

Settings come from Django's (CELERY_* names); the beat schedule lives here, in code.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# One place for every scheduled job; each entry says why it runs when it does.
app.conf.beat_schedule = {}
