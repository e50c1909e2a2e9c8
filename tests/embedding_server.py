"""A real OpenAI-compatible embeddings server on loopback that counts what it is asked.

Shared by the job and worker tests: it answers `POST /v1/embeddings` with deterministic
vectors, counts every input text it was sent (`sent`) and every one it answered
(`answered`), and can be told to fail the next requests (`fail_next`), to hold a request
until released (`hold_request`), or to answer slowly (`delay`). The `provider` fixture
points the settings at one (import it into a test module to use it).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

DIMS = 384


def vector_for(text: str) -> list[float]:
    seed = sum(ord(c) for c in text) or 1
    return [((seed * (i + 7)) % 97) / 10.0 + 0.1 for i in range(DIMS)]


class EmbeddingServer:
    def __init__(self):
        self.sent: collections.Counter = collections.Counter()
        self.answered: collections.Counter = collections.Counter()
        self.requests = 0
        self.fail_next = 0  # answer this many requests with 503
        self.delay = 0.0
        self.hold_request: int | None = None  # the request number (1-based) to hold
        self.holding = threading.Event()  # set once the held request has arrived
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def _handler(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.requests += 1
                    number = outer.requests
                    outer.sent.update(body["input"])
                    failing = outer.fail_next > 0
                    outer.fail_next -= 1 if failing else 0
                if number == outer.hold_request:
                    outer.holding.set()
                    outer.release.wait(30)
                if outer.delay:
                    time.sleep(outer.delay)
                try:
                    if failing:
                        self.send_response(503)
                        self.end_headers()
                        self.wfile.write(b'{"error": {"message": "try later"}}')
                        return
                    data = [{"object": "embedding", "index": i, "embedding": vector_for(t)} for i, t in enumerate(body["input"])]
                    payload = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    with outer._lock:
                        outer.answered.update(body["input"])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client is gone (a killed worker)

        return Handler

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider(settings):
    """Embeddings through a real EmbeddingServer (model `model-a`, two texts per request)."""
    server = EmbeddingServer()
    settings.MEMORYHUB_EMBEDDINGS = "openai"
    settings.MEMORYHUB_EMBEDDINGS_URL = server.url
    settings.MEMORYHUB_EMBEDDINGS_MODEL = "model-a"
    settings.MEMORYHUB_EMBEDDINGS_BATCH = 2
    settings.MEMORYHUB_BACKFILL_GRACE_SECONDS = 0
    yield server
    server.close()
