"""Writes of retrieval data: embeddings of facts."""

from __future__ import annotations

import logging

from django.db import transaction

from facts.models import Fact
from memoryhub import scoping
from retrieval.embeddings import get_embedder

logger = logging.getLogger(__name__)


def facts_embed(*, fact_ids: list[str]) -> int:
    """Embed the given facts that lack an embedding of the configured model; returns how many.

    Safe to run twice or concurrently: a row is only written if its content did not
    change since it was read, and rows already embedded by this model are skipped.
    """
    embedder = get_embedder()
    if embedder is None or not fact_ids:
        return 0
    with scoping.scopes_disabled():  # a job: ids come from committed writes, not from a caller
        rows = list(
            Fact.objects.filter(id__in=fact_ids)
            .exclude(embedding_model=embedder.model)
            .values_list("id", "content_hash", "text")
        )
        if not rows:
            return 0
        vectors = embedder.embed_documents([text for _, _, text in rows])
        written = 0
        with transaction.atomic():
            for (fact_id, content_hash, _), vector in zip(rows, vectors):
                written += Fact.objects.filter(id=fact_id, content_hash=content_hash).update(
                    embedding=vector, embedding_model=embedder.model
                )
    logger.info("embedded %d of %d facts with %s", written, len(rows), embedder.model)
    return written


def messages_embed(*, message_ids: list[str]) -> int:
    """Embed the given messages (never tool messages) that lack an embedding of the configured model.

    Messages do not change once appended, so a row already embedded by this model is
    skipped and a second run writes nothing.
    """
    from retrieval.models import Message, MessageRole

    embedder = get_embedder()
    if embedder is None or not message_ids:
        return 0
    with scoping.scopes_disabled():  # a job: ids come from committed writes, not from a caller
        rows = list(
            Message.objects.filter(id__in=message_ids)
            .exclude(role=MessageRole.TOOL)
            .exclude(embedding_model=embedder.model)
            .values_list("id", "text")
        )
        if not rows:
            return 0
        vectors = embedder.embed_documents([text for _, text in rows])
        written = 0
        with transaction.atomic():
            for (message_id, _), vector in zip(rows, vectors):
                written += Message.objects.filter(id=message_id).update(embedding=vector, embedding_model=embedder.model)
    logger.info("embedded %d of %d messages with %s", written, len(rows), embedder.model)
    return written
