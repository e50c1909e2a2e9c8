"""The OpenAI-compatible embeddings provider against a real HTTP server on loopback."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from retrieval.embeddings import EmbeddingError, OpenAICompatible

DIMS = 384


class FakeEmbeddings:
    """A tiny server speaking POST /v1/embeddings, scripted per test."""

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list[tuple[int, dict | None]] = []  # (status, headers) to answer before succeeding
        self.hang = False
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @staticmethod
    def vector_for(text: str) -> list[float]:
        # Deterministic and distinct per text; deliberately not unit length.
        seed = sum(ord(c) for c in text) or 1
        return [((seed * (i + 7)) % 97) / 10.0 + 0.1 for i in range(DIMS)]

    def _handler(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                try:
                    self._answer()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout test)

            def _answer(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if outer.hang:
                    import time

                    time.sleep(2)
                if outer.script:
                    status, headers = outer.script.pop(0)
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "scripted"}}')
                    return
                data = [{"object": "embedding", "index": i, "embedding": outer.vector_for(t)} for i, t in enumerate(body["input"])]
                payload = json.dumps({"object": "list", "data": list(reversed(data)), "model": body["model"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeEmbeddings()
    yield server
    server.close()


def provider(fake, **kwargs) -> OpenAICompatible:
    options = {"base_url": fake.url, "model": "fake-embed", "dimensions": DIMS, "api_key": "sk-test", "batch_size": 3, "backoff": 0.01}
    return OpenAICompatible(**(options | kwargs))


def test_batches_dimensions_order_and_normalisation(fake):
    vectors = provider(fake).embed_documents([f"text {i}" for i in range(7)])
    assert [len(r["body"]["input"]) for r in fake.requests] == [3, 3, 1]
    first = fake.requests[0]
    assert first["path"] == "/v1/embeddings" and first["auth"] == "Bearer sk-test"
    assert first["body"]["model"] == "fake-embed" and first["body"]["dimensions"] == DIMS
    assert len(vectors) == 7
    for text, vector in zip([f"text {i}" for i in range(7)], vectors):
        raw = FakeEmbeddings.vector_for(text)
        norm = sum(x * x for x in raw) ** 0.5
        assert vector == pytest.approx([x / norm for x in raw])  # index order kept, unit length


def test_transient_errors_retry_then_succeed(fake):
    fake.script = [(429, {"Retry-After": "0"}), (503, None), (500, None)]
    assert len(provider(fake).embed_query("hello")) == DIMS
    assert len(fake.requests) == 4


def test_persistent_server_errors_give_up_as_transient(fake):
    fake.script = [(502, None)] * 10
    with pytest.raises(EmbeddingError) as caught:
        provider(fake, attempts=3).embed_query("hello")
    assert caught.value.transient and len(fake.requests) == 3


def test_client_errors_are_not_retried(fake):
    fake.script = [(400, None)]
    with pytest.raises(EmbeddingError) as caught:
        provider(fake).embed_query("hello")
    assert not caught.value.transient and len(fake.requests) == 1


def test_wrong_dimensions_are_refused(fake):
    with pytest.raises(EmbeddingError) as caught:
        provider(fake, dimensions=8).embed_query("hello")
    assert "dimensions" in str(caught.value) and not caught.value.transient


def test_timeouts_are_transient(fake):
    fake.hang = True
    with pytest.raises(EmbeddingError) as caught:
        provider(fake, timeout=0.2, attempts=2).embed_query("slow")
    assert caught.value.transient


@pytest.fixture
def openai_settings(settings, fake):
    settings.MEMORYHUB_EMBEDDINGS = "openai"
    settings.MEMORYHUB_EMBEDDINGS_URL = fake.url
    settings.MEMORYHUB_EMBEDDINGS_MODEL = "fake-embed"
    settings.MEMORYHUB_EMBEDDINGS_BATCH = 2
    from django.core.cache import cache

    cache.clear()
    return settings


@pytest.mark.django_db
def test_writes_embed_after_commit_and_queries_are_cached(world, fake, openai_settings, in_scope):
    from facts.models import Fact

    client = world.client()
    written = client.post("/v1/facts/batch", {"facts": [{"type": "acme.note", "content": f"note {i}"} for i in range(5)]}, format="json")
    assert written.status_code == 201
    assert sorted(len(r["body"]["input"]) for r in fake.requests) == [1, 2, 2]  # one task, batched
    assert Fact.objects.filter(embedding_model="fake-embed").count() == 5
    before = len(fake.requests)
    for _ in range(3):
        body = client.post("/v1/retrieve", {"query": "note 3", "intents": [{"scope": "same-project", "mode": "semantic"}]}, format="json").json()
        assert body["facts"][0]["ranks"] == {"semantic": 1}
    assert len(fake.requests) == before + 1  # the query's embedding was computed once


@pytest.mark.django_db
def test_a_failing_provider_never_fails_a_write(world, fake, openai_settings, in_scope):
    from facts.models import Fact

    fake.script = [(500, None)] * 50
    response = world.client().post("/v1/facts", {"type": "acme.note", "content": "still written"}, format="json")
    assert response.status_code == 201
    fact = Fact.objects.get(id=response.json()["id"])
    assert fact.embedding is None and fact.embedding_model is None
    # keyword search finds it at once
    body = world.client().post("/v1/retrieve", {"query": "written", "intents": [{"scope": "same-project", "mode": "keyword"}]}, format="json").json()
    assert [h["fact"]["id"] for h in body["facts"]] == [str(fact.id)]


@pytest.mark.django_db
def test_the_embedding_job_runs_outside_any_request_scope(world, fake, openai_settings, in_scope):
    """A worker (or the in-process runner) has no tenant scope: the job must not need one."""
    from core import scoping
    from facts.models import Fact
    from retrieval.services import facts_embed

    openai_settings.MEMORYHUB_EMBEDDINGS = "none"  # write without embedding
    fact_id = world.client().post("/v1/facts", {"type": "acme.note", "content": "later"}, format="json").json()["id"]
    openai_settings.MEMORYHUB_EMBEDDINGS = "openai"
    token = scoping.activate(None)  # as in a worker thread: no scope at all
    try:
        assert facts_embed(fact_ids=[fact_id]) == 1
    finally:
        scoping.deactivate(token)
    assert Fact.objects.get(id=fact_id).embedding_model == "fake-embed"


@pytest.mark.django_db
def test_a_query_vector_reaches_sql_with_every_bit_of_float4(fake):
    import numpy as np
    from django.core.cache import cache
    from django.db import connection

    from retrieval.embeddings import query_cache_key, query_embedding, query_vector_literal, vector_literal

    values = np.random.default_rng(3).standard_normal(DIMS).astype(np.float32)
    values[:4] = [1e-30, -3.4e38, 0.0, 1.0]  # exponents and the edges of float4
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::vector::real[]", [vector_literal(values.tolist())])
        assert np.array_equal(np.array(cursor.fetchone()[0], dtype=np.float32), values)

    embedder = provider(fake)
    cache.delete(query_cache_key(embedder.model, "hello"))
    literal = query_vector_literal(embedder, "hello")
    assert cache.get(query_cache_key(embedder.model, "hello")) == literal  # kept as SQL takes it
    assert query_vector_literal(embedder, "hello") == literal and len(fake.requests) == 1
    expected = np.array(FakeEmbeddings.vector_for("hello"))
    assert query_embedding(embedder, "hello") == pytest.approx(list(expected / np.linalg.norm(expected)), rel=1e-6)  # unit length
    # A value cached as a list of numbers (before this form) is still used, not fetched again.
    cache.set(query_cache_key(embedder.model, "older"), [0.5] * DIMS)
    assert query_vector_literal(embedder, "older") == vector_literal([0.5] * DIMS) and len(fake.requests) == 1
