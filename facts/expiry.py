"""Expiry: facts past their `expiresAt` get status `expired`.

Reads already ignore them (expiry is checked at read time); this job tidies up so the
stored state says so too: the fact's status becomes `expired` and its current revision
is closed with `invalidationReason: expired`, by the service `memoryhub.jobs`. Only
active facts expire here; a pending one waits for its reviewer (and for the retention
purge). Facts are changed in bulk, a batch per transaction, since every fact an agent
remembers expires unless a person verifies it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from core import scoping
from core.locks import DEFAULT_BUDGET, SKIPPED, Budget, job_lock
from facts.models import Fact, FactRevision, InvalidationReason, Status

logger = logging.getLogger(__name__)

JOB_SERVICE = {"id": "memoryhub.jobs", "kind": "service"}  # who ends a fact in a job
_TICK = timedelta(microseconds=1)


def _after(at: datetime, field: str) -> Greatest:
    """`at`, but strictly after the row's `field`, so a revision's interval never inverts."""
    return Greatest(Value(at, output_field=DateTimeField()), F(field) + _TICK)


def facts_expire(*, now: datetime | None = None, batch_size: int | None = None, budget_seconds: float | None = DEFAULT_BUDGET) -> dict:
    """Mark active facts past `expiresAt` as expired; returns `{"facts", "batches"}`."""
    batch_size = batch_size or settings.MEMORYHUB_JOB_BATCH
    budget = Budget(budget_seconds)
    counts = {"facts": 0, "batches": 0}
    with job_lock("expire") as locked, scoping.scopes_disabled():
        if not locked:
            logger.info("expire: skipped, another run is going on")
            return dict(SKIPPED)
        while not budget.spent:
            at = now or timezone.now()
            with transaction.atomic():
                ids = list(
                    Fact.objects.select_for_update(skip_locked=True)
                    .filter(status=Status.ACTIVE, expires_at__lte=at)
                    .order_by("expires_at")
                    .values_list("id", flat=True)[:batch_size]
                )
                if not ids:
                    break
                # The same instant closes the revision and stamps the fact, as facts.services._end does.
                FactRevision.objects.filter(fact_id__in=ids, superseded_at__isnull=True).update(
                    superseded_at=_after(at, "recorded_at"), invalidation_reason=InvalidationReason.EXPIRED,
                    invalidated_by=JOB_SERVICE,
                )
                Fact.objects.filter(id__in=ids).update(status=Status.EXPIRED, updated_at=_after(at, "updated_at"))
            counts["facts"] += len(ids)
            counts["batches"] += 1
            if len(ids) < batch_size:
                break
    logger.info("expire: %d facts expired in %d batches", counts["facts"], counts["batches"])
    return counts
