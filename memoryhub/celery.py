"""The Celery app: Redis as broker when REDIS_URL is set, else tasks run in-process.

Settings come from Django's (CELERY_* names); the beat schedule lives here, in code.
"""

import os
from datetime import timedelta

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# One place for every scheduled job; each entry says why it runs when it does. The jobs
# are facts.expiry, privacy.retention and retrieval.backfill, their tasks in each app's tasks.py; `celery beat` sends these, and
# without a broker `manage.py serve` runs the same schedule in-process (memoryhub.beat).
# A tick that waited in the queue longer than its interval expires: when workers come
# back after an outage they run the job once, not once per missed tick.
app.conf.beat_schedule = {
    # Reads already ignore facts past expiresAt; this only makes the stored status say so
    # (and frees the key slot), so every 5 minutes is plenty.
    "expire-facts": {
        "task": "memoryhub.expire_facts",
        "schedule": timedelta(minutes=5),
        "options": {"expires": 5 * 60},
    },
    # Retention purge hourly at :17 (off the hour, when other cron jobs crowd in): data
    # leaves within an hour of falling out of its project's policy.
    "retention-purge": {
        "task": "memoryhub.retention_purge",
        "schedule": crontab(minute=17),
        "options": {"expires": 60 * 60},
    },
    # Embedding backfill every 2 minutes: catches writes whose after-commit embedding was
    # lost, and after a model change re-embeds everything, a time-boxed run at a time.
    "embeddings-backfill": {
        "task": "memoryhub.embeddings_backfill",
        "schedule": timedelta(minutes=2),
        "options": {"expires": 2 * 60},
    },
}
