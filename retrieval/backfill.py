"""Embedding backfill: facts and messages with no embedding, or one of another model.

It catches up whatever the after-commit embedding missed (broker or provider down,
a task dropped at shutdown) and, after the configured model changes, re-embeds every
row over time: reads compare a query only with vectors of the configured model, so
semantic results fill in as the backfill goes, keyword search never stops, and there
is no downtime.

Only rows a read can return are embedded: active and pending facts not yet expired,
and messages (never tool messages) of registered, non-replay conversations. Rows go in
order of id, a batch (MEMORYHUB_EMBEDDINGS_BATCH rows: one provider request) at a
time, each batch committed on its own through the same functions the after-commit
tasks use (retrieval.services). The state to resume from is the data itself: a run
cut short (time budget, a killed worker) leaves done batches done, and the next run
picks up the rest. Rows written in the last MEMORYHUB_BACKFILL_GRACE_SECONDS are left
to their own after-commit task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.utils import timezone

from core import scoping
from core.locks import DEFAULT_BUDGET, SKIPPED, Budget, job_lock
from retrieval import sources
from retrieval.embeddings import EmbeddingError, get_embedder
from retrieval.services import rows_embed

logger = logging.getLogger(__name__)


def embeddings_backfill(
    *, batch_size: int | None = None, budget_seconds: float | None = DEFAULT_BUDGET, on_batch: Callable[[dict], None] | None = None,
) -> dict:
    """Embed what lacks an embedding of the configured model; returns the counts.

    `done` says whether nothing was left when the run ended (False: the time budget ran
    out and the next run goes on). A provider's transient error is raised, so the task
    retries later; a batch it refuses for good is counted in `failed` and skipped.
    `on_batch(counts)` is called after each batch (a command's progress line).
    """
    embedder = get_embedder()
    if embedder is None:
        logger.info("backfill: skipped, no embeddings provider is configured")
        return {"skipped": "no-embeddings-provider"}
    batch_size = batch_size or max(1, settings.MEMORYHUB_EMBEDDINGS_BATCH)
    budget = Budget(budget_seconds)
    counts = {"model": embedder.model, **{source.name: 0 for source in sources.registered()}, "failed": 0, "batches": 0, "done": True}
    with job_lock("backfill") as locked, scoping.scopes_disabled():
        if not locked:
            logger.info("backfill: skipped, another run is going on")
            return dict(SKIPPED)
        for source in sources.registered():
            name = source.name
            after = None
            while True:
                if budget.spent:
                    counts["done"] = False
                    break
                queryset = source.pending(timezone.now()).exclude(embedding_model=embedder.model).order_by("id")
                if after is not None:
                    queryset = queryset.filter(id__gt=after)
                ids = list(queryset.values_list("id", flat=True)[:batch_size])
                if not ids:
                    break
                try:
                    counts[name] += rows_embed(source, [str(i) for i in ids])
                except EmbeddingError as exc:
                    if exc.transient:
                        logger.warning("backfill: provider unavailable (%s) after %s; a retry goes on", exc, counts)
                        raise
                    logger.error("backfill: the provider refused %d %s (%s); skipping them", len(ids), name, exc)
                    counts["failed"] += len(ids)
                counts["batches"] += 1
                after = ids[-1]
                if on_batch is not None:
                    on_batch(counts)
    logger.info("backfill: %s", " ".join(f"{name}={value}" for name, value in counts.items()))
    return counts
