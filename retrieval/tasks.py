"""Retrieval tasks: thin doors onto retrieval.services."""

from __future__ import annotations

import logging
import random

from celery import shared_task

from retrieval.embeddings import EmbeddingError
from retrieval.services import facts_embed, messages_embed

logger = logging.getLogger(__name__)


@shared_task(bind=True, name="retrieval.embed_facts", max_retries=8, acks_late=True)
def embed_facts(self, fact_ids: list[str]) -> int:
    """Embed freshly written facts; provider hiccups retry with backoff and jitter, never failing a write."""
    try:
        return facts_embed(fact_ids=[str(fact_id) for fact_id in fact_ids])
    except EmbeddingError as exc:
        if not exc.transient or self.request.is_eager:
            logger.error("embedding %d facts failed: %s (the backfill job will retry)", len(fact_ids), exc)
            return 0
        # Exponential backoff with full jitter.
        raise self.retry(exc=exc, countdown=random.uniform(0, min(300, 2 ** (self.request.retries + 1))))


@shared_task(bind=True, name="retrieval.embed_messages", max_retries=8, acks_late=True)
def embed_messages(self, message_ids: list) -> int:
    """Embed freshly appended messages, as embed_facts does for facts."""
    try:
        return messages_embed(message_ids=[str(message_id) for message_id in message_ids])
    except EmbeddingError as exc:
        if not exc.transient or self.request.is_eager:
            logger.error("embedding %d messages failed: %s (the backfill job will retry)", len(message_ids), exc)
            return 0
        raise self.retry(exc=exc, countdown=random.uniform(0, min(300, 2 ** (self.request.retries + 1))))
