"""Writes of retrieval data: embeddings of facts and messages."""

from __future__ import annotations

import logging

from django.db import transaction

from core import scoping
from retrieval import sources
from retrieval.embeddings import get_embedder

logger = logging.getLogger(__name__)


def facts_embed(*, fact_ids: list[str]) -> int:
    """Embed the given facts that lack an embedding of the configured model; returns how many.

    Safe to run twice or concurrently: a row is only written if its content did not
    change since it was read, and rows already embedded by this model are skipped.
    """
    return rows_embed(sources.get("facts"), fact_ids)


def rows_embed(source: sources.Source, ids: list[str]) -> int:
    """Embed the given rows of a source that lack an embedding of the configured model."""
    if not ids:
        return 0
    return _embed_rows(source.model, lambda: source.embeddable().filter(id__in=ids), guard=source.guard)


def _embed_rows(model, rows_to_embed, *, guard: str | None = None) -> int:
    """Embed the rows `rows_to_embed()` selects that the configured model has not embedded, in one batch.

    `guard` names a column that must still hold the value read (so a row changed
    meanwhile keeps no stale embedding). Runs as a job: the queryset is built with
    scoping off (ids come from committed writes, not from a caller).
    """
    embedder = get_embedder()
    if embedder is None:
        return 0
    columns = ["id", "text"] + ([guard] if guard else [])
    with scoping.scopes_disabled():
        rows = list(rows_to_embed().exclude(embedding_model=embedder.model).values_list(*columns))
        if not rows:
            return 0
        vectors = embedder.embed_documents([row[1] for row in rows])
        written = 0
        with transaction.atomic():
            for row, vector in zip(rows, vectors):
                match = {"id": row[0]} | ({guard: row[2]} if guard else {})
                written += model.objects.filter(**match).update(embedding=vector, embedding_model=embedder.model)
    logger.info("embedded %d of %d %s rows with %s", written, len(rows), model.__name__, embedder.model)
    return written


def messages_embed(*, message_ids: list[str]) -> int:
    """Embed the given messages (never tool messages) that lack an embedding of the configured model.

    Messages do not change once appended, so a row already embedded by this model is
    skipped and a second run writes nothing.
    """
    return rows_embed(sources.get("messages"), message_ids)
