"""Retrieval tasks: thin doors onto retrieval.services and retrieval.backfill."""

from __future__ import annotations

import logging
import random

from celery import shared_task

from core.tasks import run_job
from retrieval.backfill import embeddings_backfill as backfill
from retrieval.embeddings import EmbeddingError
from retrieval.services import facts_embed, messages_embed

logger = logging.getLogger(__name__)


def _embed(task, service, ids: list, what: str) -> int:
    """Run an embedding service; provider hiccups retry with backoff and full jitter,
    anything else is logged and left to the backfill job: an embedding never fails a write."""
    try:
        return service([str(item) for item in ids])
    except EmbeddingError as exc:
        if not exc.transient or task.request.is_eager:
            logger.error("embedding %d %s failed: %s (the backfill job will retry)", len(ids), what, exc)
            return 0
        raise task.retry(exc=exc, countdown=random.uniform(0, min(300, 2 ** (task.request.retries + 1))))


@shared_task(bind=True, name="retrieval.embed_facts", max_retries=8, acks_late=True)
def embed_facts(self, fact_ids: list[str]) -> int:
    """Embed freshly written facts."""
    return _embed(self, lambda ids: facts_embed(fact_ids=ids), fact_ids, "facts")


@shared_task(bind=True, name="retrieval.embed_messages", max_retries=8, acks_late=True)
def embed_messages(self, message_ids: list) -> int:
    """Embed freshly appended messages."""
    return _embed(self, lambda ids: messages_embed(message_ids=ids), message_ids, "messages")


@shared_task(bind=True, name="memoryhub.embeddings_backfill", max_retries=8, acks_late=True)
def embeddings_backfill(self) -> dict:
    """Embed what lacks an embedding of the configured model (retrieval.backfill, schedule: memoryhub/celery.py)."""
    return run_job(self, backfill)
