"""Idempotency-Key on POSTs: replay, reuse with another body, parallel duplicates."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from memoryhub import scoping

NOTE = {"type": "acme.note", "content": {"text": "one"}}


def _facts_count() -> int:
    from facts.models import Fact

    with scoping.scopes_disabled():
        return Fact.objects.count()


@pytest.mark.django_db
def test_same_key_and_body_replays_the_first_response(world):
    client = world.client()
    first = client.post("/v1/facts", NOTE, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post("/v1/facts", NOTE, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert _facts_count() == 1


@pytest.mark.django_db
def test_same_key_with_another_body_is_409(world):
    client = world.client()
    client.post("/v1/facts", NOTE, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    other = client.post("/v1/facts", dict(NOTE, content="two"), format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert other.status_code == 409
    assert other["Content-Type"] == "application/problem+json"
    assert other.json()["code"] == "idempotency-key-reused"
    assert _facts_count() == 1


@pytest.mark.django_db
def test_keys_are_per_key_owner(world):
    one, two = world.client(), world.client()
    one.post("/v1/facts", NOTE, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    two.post("/v1/facts", NOTE, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    assert _facts_count() == 2


@pytest.mark.django_db
def test_a_failed_request_is_stored_and_a_new_key_can_succeed(world):
    client = world.client()
    bad = client.post("/v1/facts", {"type": "bad type", "content": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    replay = client.post("/v1/facts", {"type": "bad type", "content": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    assert bad.status_code == replay.status_code == 400
    assert replay.json() == bad.json()
    assert _facts_count() == 0


@pytest.mark.django_db
def test_overlong_key_is_refused(world):
    response = world.client().post("/v1/facts", NOTE, format="json", HTTP_IDEMPOTENCY_KEY="x" * 256)
    assert response.status_code == 400
    assert _facts_count() == 0


def test_fifty_parallel_posts_with_one_key_write_one_row(tx_world, live_server):
    raw = tx_world.key()
    barrier = threading.Barrier(50)
    results: list[tuple[int, dict, dict]] = []
    lock = threading.Lock()

    def post():
        with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {raw}"}, timeout=30) as http:
            barrier.wait()
            # The test server's listen backlog is small: a refused connection is retried,
            # with the same key, as a real client would.
            for attempt in range(20):
                try:
                    response = http.post("/v1/facts", json=NOTE, headers={"Idempotency-Key": "parallel-1"})
                    break
                except httpx.TransportError:
                    time.sleep(0.05 * (attempt + 1))
            with lock:
                results.append((response.status_code, response.json(), dict(response.headers)))

    threads = [threading.Thread(target=post) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(status for status, _, _ in results)
    assert len(results) == 50
    assert set(statuses) <= {201, 409}, statuses
    created = {body["id"] for status, body, _ in results if status == 201}
    assert len(created) == 1
    for status, body, headers in results:
        if status == 409:
            assert body["code"] == "request-in-flight" and headers["retry-after"] == "1"
    assert _facts_count() == 1
