"""The retention purge as a Celery task (schedule: memoryhub/celery.py)."""

from __future__ import annotations

from celery import shared_task

from core.tasks import run_job
from privacy.retention import retention_purge as purge


@shared_task(bind=True, name="memoryhub.retention_purge", max_retries=5, acks_late=True)
def retention_purge(self) -> dict:
    """Delete what is past its project's retention (privacy.retention.retention_purge)."""
    return run_job(self, purge)
