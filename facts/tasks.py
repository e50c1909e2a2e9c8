"""Facts' scheduled job as a Celery task (schedule: memoryhub/celery.py)."""

from __future__ import annotations

from celery import shared_task

from core.tasks import run_job
from facts.expiry import facts_expire


@shared_task(bind=True, name="memoryhub.expire_facts", max_retries=5, acks_late=True)
def expire_facts(self) -> dict:
    """Facts past expiresAt become `expired` (facts.expiry.facts_expire)."""
    return run_job(self, facts_expire)
