"""Embedding a write's own facts inside its request, within a short budget.

A single write, a small batch and `remember` ask the configured provider for their
documents' embeddings before the write's transaction opens (no lock is held while it
answers), on a small pool of worker threads, and wait at most
MEMORYHUB_EMBEDDINGS_INLINE_BUDGET_MS (200 ms by default; 0 turns this off). In time, the
fact is written with its embedding, its answer shows `embeddingModel`, and the next read
finds it by meaning. Too slow, failing, no provider, or more than
MEMORYHUB_EMBEDDINGS_INLINE_MAX texts (bulk imports): None, and the write embeds after
commit as before (facts.services._embed_after_commit); the write itself never fails or
waits longer than the budget for it. A provider that hangs keeps at most the pool's
threads busy: calls queued behind them time out at the budget and are cancelled unstarted.
After a provider misses the budget (or fails), writes skip asking it inline for
MEMORYHUB_EMBEDDINGS_INLINE_COOLDOWN_SECONDS (30): a provider that is slow for a while
costs one write the budget per cooldown, not every write.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import weakref
from dataclasses import dataclass

from django.conf import settings

from retrieval.embeddings import get_embedder

logger = logging.getLogger(__name__)

POOL_THREADS = 2

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
# embedder -> monotonic time until which writes do not ask it inline
_cooling: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Embedded:
    """Embeddings made within the budget: one vector per text, in order, by `model`."""

    model: str
    vectors: list[list[float]]


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="memoryhub-embed-inline")
        return _pool


def embed_within_budget(texts: list[str]) -> Embedded | None:
    """The texts' document embeddings if the provider answers within the budget, else None."""
    budget = settings.MEMORYHUB_EMBEDDINGS_INLINE_BUDGET_MS / 1000
    if budget <= 0 or not texts or len(texts) > settings.MEMORYHUB_EMBEDDINGS_INLINE_MAX:
        return None
    embedder = get_embedder()
    if embedder is None or _cooling.get(embedder, 0.0) > time.monotonic():
        return None
    future = _executor().submit(embedder.embed_documents, list(texts))
    try:
        vectors = future.result(timeout=budget)
    except concurrent.futures.TimeoutError:
        future.cancel()  # not started yet: never asks; started: its answer is dropped
        _cool(embedder)
        logger.info("embedding %d texts took over %.0f ms: embedding them after commit", len(texts), budget * 1000)
        return None
    except Exception as exc:  # a failing provider never fails the write
        _cool(embedder)
        logger.warning("embedding %d texts inside the write failed (%s): embedding them after commit", len(texts), exc)
        return None
    if len(vectors) != len(texts):
        return None
    return Embedded(model=embedder.model, vectors=vectors)


def _cool(embedder) -> None:
    _cooling[embedder] = time.monotonic() + settings.MEMORYHUB_EMBEDDINGS_INLINE_COOLDOWN_SECONDS
