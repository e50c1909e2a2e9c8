"""Idempotency-Key on POSTs: replay, reuse with another body, parallel duplicates."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from core import scoping

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


# --- a claim whose request died with its server -----------------------------------------------------


def _principal(raw: str):
    from accounts.services import apikey_authenticate

    return apikey_authenticate(raw=raw)


def test_a_live_claim_is_kept_and_one_whose_session_ended_is_taken_over_at_once(tx_world):
    """The owner's transaction holds the claim's lock; closing its connection (what a killed
    server's does) frees it, and the next duplicate takes the claim over without waiting."""
    from django.db import connection, transaction

    from core import idempotency

    principal = _principal(tx_world.key())
    claimed, release = threading.Event(), threading.Event()

    def owner():  # another thread: its own database connection, as another server process has
        try:
            with scoping.scopes_disabled():
                record = idempotency.claim(principal=principal, key="k-dies", fingerprint="f")
                with transaction.atomic():
                    idempotency.hold(record=record)
                    claimed.set()
                    release.wait(30)
                    connection.close()  # the session ends mid-request, its transaction never commits
        except Exception:  # closing the connection inside atomic() makes its exit complain: the point of it
            pass
        finally:
            claimed.set()

    thread = threading.Thread(target=owner)
    thread.start()
    assert claimed.wait(30)
    with scoping.scopes_disabled():
        with pytest.raises(idempotency.RequestInFlight):  # alive: a duplicate waits its turn
            idempotency.claim(principal=principal, key="k-dies", fingerprint="f")
        release.set()
        thread.join(30)
        started = time.monotonic()
        taken = idempotency.claim(principal=principal, key="k-dies", fingerprint="f")  # well inside the 120 s stale limit
        assert time.monotonic() - started < 5
        assert taken.state == "in-flight"
        from core.models import IdempotencyRecord

        assert list(IdempotencyRecord.objects.filter(key="k-dies").values_list("pk", flat=True)) == [taken.pk]


def test_a_claim_taken_over_before_its_owner_held_it_is_not_served_twice(tx_world):
    from django.db import transaction

    from core import idempotency

    principal = _principal(tx_world.key())
    with scoping.scopes_disabled():
        first = idempotency.claim(principal=principal, key="k-race", fingerprint="f")
        # A duplicate arrives between the owner's committed claim and its lock: nobody holds the
        # lock, so it takes the claim over ...
        second = idempotency.claim(principal=principal, key="k-race", fingerprint="f")
        assert second.pk != first.pk
        # ... and the first owner, once it holds the lock, finds its claim gone and does not run.
        with transaction.atomic(), pytest.raises(idempotency.RequestInFlight):
            idempotency.hold(record=first)
        with transaction.atomic():
            idempotency.hold(record=second)  # the second one serves the key


@pytest.mark.slow
def test_a_retry_after_the_server_was_killed_mid_request_is_served_at_once(tx_world, tmp_path):
    """A real server (gunicorn) killed with SIGKILL while its request waits on a row lock; the
    client's retry with the same Idempotency-Key is served at once, and the message is written once."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import psycopg
    from django.db import connection

    from agent.models import Message
    from core.models import IdempotencyRecord
    from tests.database_url import database_url
    from tests.test_worker import free_port, wait_for

    raw = tx_world.key()
    client = tx_world.client(raw)
    assert client.post("/v1/agents", {"slug": "kill.desk"}, format="json").status_code == 201
    conversation = client.post("/v1/conversations", {"agent": "kill.desk"}, format="json").json()["id"]
    port = free_port()
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYHUB_", "DATABASE_", "REDIS_"))} | {
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings", "DATABASE_URL": database_url(), "SECRET_KEY": "kill-test",
        "MEMORYHUB_EMBEDDINGS": "none",
    }
    web = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "memoryhub.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", "1", "--timeout", "60"],
        cwd=root, env=env, stdout=(tmp_path / "web.log").open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    body = {"messages": [{"role": "user", "text": "said once"}]}
    headers = {"Authorization": f"Bearer {raw}", "Idempotency-Key": "k-killed"}
    try:
        wait_for(lambda: _ready(url), 60, "gunicorn to serve", interval=0.2)
        db = connection.settings_dict
        blocker = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"], password=db.get("PASSWORD") or None)
        # The conversation's row is locked: the server's append waits on it, its claim in flight.
        blocker.execute("SELECT 1 FROM retrieval_conversation WHERE id = %s FOR UPDATE", [conversation])
        sent = threading.Thread(target=lambda: _post_ignoring_errors(url + f"/v1/conversations/{conversation}/messages", body, headers))
        sent.start()
        with scoping.scopes_disabled():
            wait_for(IdempotencyRecord.objects.filter(key="k-killed", state="in-flight").exists, 30, "the request to claim its key")
        os.killpg(web.pid, signal.SIGKILL)  # the whole server, mid-request
        web.wait(10)
        blocker.rollback()  # the killed server's database session goes on, finds its client gone, ends
        blocker.close()
        sent.join(30)
        started = time.monotonic()
        while True:
            retry = client.post(f"/v1/conversations/{conversation}/messages", body, format="json", HTTP_IDEMPOTENCY_KEY="k-killed")
            if retry.status_code != 409 or time.monotonic() - started > 20:
                break
            time.sleep(0.1)
        waited = time.monotonic() - started
        print(f"\nretry served {waited:.2f} s after the kill (stale limit: 120 s)")
        assert retry.status_code == 201, (retry.status_code, retry.content[:300])
        assert waited < 20
        with scoping.scopes_disabled():
            assert list(Message.objects.filter(conversation_id=conversation).values_list("text", flat=True)) == ["said once"]
        replay = client.post(f"/v1/conversations/{conversation}/messages", body, format="json", HTTP_IDEMPOTENCY_KEY="k-killed")
        assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    finally:
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGKILL)


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _post_ignoring_errors(url: str, body: dict, headers: dict) -> None:
    try:
        httpx.post(url, json=body, headers=headers, timeout=60)
    except httpx.TransportError:
        pass  # the server was killed: no answer is the point
