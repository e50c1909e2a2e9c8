"""Retention: the per-project policy and the purge that applies it.

What is purged, per project (a `RetentionPolicy`, else the MEMORYHUB_RETENTION_* settings):

- facts deleted (or rejected) more than N days ago, with their revisions, approvals and
  remember-call records;
- facts whose `expiresAt` is more than N days past, likewise;
- conversations unregistered more than N days ago, with their messages;
- stored idempotency responses older than 24 hours (MEMORYHUB_IDEMPOTENCY_TTL_HOURS),
  for every tenant alike.

"N days" is exact to the second: eligible once N × 24 h have passed. A fact under legal
hold is never purged. Rows are taken in batches with `FOR UPDATE SKIP LOCKED` and
deleted in the same short transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import RetentionPolicy
from agent.models import Conversation
from core import scoping
from core.locks import DEFAULT_BUDGET, SKIPPED, Budget, job_lock
from core.models import IdempotencyRecord
from facts.models import Fact, Status
from privacy.deletion import conversations_hard_delete, facts_hard_delete

logger = logging.getLogger(__name__)

# --- the purge -------------------------------------------------------------------------------


def _eligible_facts_sql(kind: str) -> str:
    """Ids of facts past retention, a batch at a time, locked (skipping rows a request holds)."""
    fact, policy = Fact._meta.db_table, RetentionPolicy._meta.db_table
    if kind == "deleted":
        days, since, condition = "deleted_facts_days", "f.updated_at", "f.status IN (%(deleted)s, %(rejected)s)"
    else:
        days, since, condition = "expired_facts_days", "f.expires_at", "f.expires_at IS NOT NULL AND f.status IN (%(active)s, %(pending)s, %(expired)s)"
    # No policy row: the default; a policy with an empty field: NULL days, so never eligible.
    return f"""
        SELECT f.id FROM {fact} f LEFT JOIN {policy} p ON p.project_id = f.project_id
        WHERE {condition} AND NOT f.legal_hold
          AND {since} <= %(now)s - make_interval(days => CASE WHEN p.id IS NULL THEN %(default)s::int ELSE p.{days} END)
        ORDER BY {since} LIMIT %(limit)s FOR UPDATE OF f SKIP LOCKED"""


def _eligible_conversations_sql() -> str:
    conversation, policy = Conversation._meta.db_table, RetentionPolicy._meta.db_table
    return f"""
        SELECT c.id FROM {conversation} c LEFT JOIN {policy} p ON p.project_id = c.project_id
        WHERE c.unregistered_at IS NOT NULL
          AND c.unregistered_at <= %(now)s - make_interval(
                days => CASE WHEN p.id IS NULL THEN %(default)s::int ELSE p.unregistered_conversations_days END)
        ORDER BY c.unregistered_at LIMIT %(limit)s FOR UPDATE OF c SKIP LOCKED"""


def _ids(sql: str, params: dict) -> list:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _add(counts: dict, more: dict) -> None:
    for name, value in more.items():
        counts[name] = counts.get(name, 0) + value


def retention_purge(
    *, now: datetime | None = None, batch_size: int | None = None, budget_seconds: float | None = DEFAULT_BUDGET,
    on_batch: Callable[[dict], None] | None = None,
) -> dict:
    """Delete what is past its project's retention, in batches; returns the counts.
    `on_batch(counts)` is called after each batch (a command's progress line)."""
    batch_size = batch_size or settings.MEMORYHUB_JOB_BATCH
    budget = Budget(budget_seconds)
    counts = {
        "deletedFacts": 0, "expiredFacts": 0, "revisions": 0, "approvals": 0, "rememberCalls": 0,
        "conversations": 0, "messages": 0, "idempotencyResponses": 0, "batches": 0,
    }
    with job_lock("purge") as locked, scoping.scopes_disabled():
        if not locked:
            logger.info("purge: skipped, another run is going on")
            return dict(SKIPPED)
        statuses = {"deleted": Status.DELETED, "rejected": Status.REJECTED, "active": Status.ACTIVE,
                    "pending": Status.PENDING, "expired": Status.EXPIRED}
        steps = [
            ("deletedFacts", _eligible_facts_sql("deleted"), settings.MEMORYHUB_RETENTION_DELETED_DAYS, batch_size),
            ("expiredFacts", _eligible_facts_sql("expired"), settings.MEMORYHUB_RETENTION_EXPIRED_DAYS, batch_size),
            # A conversation may hold many messages: fewer of them per batch.
            ("conversations", _eligible_conversations_sql(), settings.MEMORYHUB_RETENTION_UNREGISTERED_DAYS, max(1, batch_size // 10)),
        ]
        for name, sql, default_days, limit in steps:
            while not budget.spent:
                params = statuses | {"now": now or timezone.now(), "default": default_days, "limit": limit}
                with transaction.atomic():
                    ids = _ids(sql, params)
                    if not ids:
                        break
                    if name == "conversations":
                        _add(counts, conversations_hard_delete(ids))
                    else:
                        deleted = facts_hard_delete(ids)
                        counts[name] += deleted.pop("facts")
                        _add(counts, deleted)
                counts["batches"] += 1
                if on_batch is not None:
                    on_batch(counts)
                if len(ids) < limit:
                    break
        ttl = timedelta(hours=settings.MEMORYHUB_IDEMPOTENCY_TTL_HOURS)
        table = IdempotencyRecord._meta.db_table
        while not budget.spent:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"""DELETE FROM {table} WHERE id IN (
                        SELECT id FROM {table} WHERE created_at <= %s ORDER BY created_at LIMIT %s FOR UPDATE SKIP LOCKED)""",
                    [(now or timezone.now()) - ttl, batch_size],
                )
                deleted = cursor.rowcount
            counts["idempotencyResponses"] += deleted
            if deleted:
                counts["batches"] += 1
            if deleted < batch_size:
                break
    logger.info("purge: %s", " ".join(f"{name}={value}" for name, value in counts.items()))
    return counts
