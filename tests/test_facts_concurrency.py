"""Facts under concurrent writers, through real HTTP against the threaded live server.

20 writers × 50 supersedes on one fact, each retrying on `409 version-conflict`, must
land exactly 1,000 new revisions: versions 1..1001 once each, one current revision, and
revision intervals that chain without gaps or overlaps, and every writer's contents
landed once (no lost update). The same race runs once more at the service level (threads
calling facts.services.fact_supersede directly). Writers racing to create the same key
slot must end with one fact, not several.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter

import httpx
import pytest

WRITERS = 20
SUPERSEDES_EACH = 50


@pytest.fixture
def fast_live_server(live_server):
    """The live server, tuned closer to how production serves (and quiet about 409s).

    - TCP_NODELAY on accepted sockets: wsgiref writes the headers and the body in separate
      sends, and Nagle + the client's delayed ACK otherwise adds ~40 ms to every request.
    - CONN_MAX_AGE: each HTTP keep-alive connection has its own server thread, which then
      keeps one database connection for all its requests (closed when the HTTP connection
      closes) instead of opening one per request.
    - Expected 409s are not logged (5xx still are).
    """
    from django.db import connections

    db_settings = connections.settings["default"]
    saved_age = db_settings.get("CONN_MAX_AGE", 0)
    loggers = {name: logging.getLogger(name) for name in ["httpx", "httpcore", "django.request", "django.server"]}
    saved_levels = {name: logger.level for name, logger in loggers.items()}
    db_settings["CONN_MAX_AGE"] = 60
    httpd = live_server.thread.httpd
    saved_handler = httpd.RequestHandlerClass
    httpd.RequestHandlerClass = type("NoDelayHandler", (saved_handler,), {"disable_nagle_algorithm": True})
    for logger in loggers.values():
        logger.setLevel(logging.ERROR)
    try:
        yield live_server
    finally:
        db_settings["CONN_MAX_AGE"] = saved_age
        httpd.RequestHandlerClass = saved_handler
        for name, logger in loggers.items():
            logger.setLevel(saved_levels[name])


def _client(live_server, raw_key: str) -> httpx.Client:
    return httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=60)


class _Statuses:
    """Every HTTP status any thread saw (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.counts: Counter = Counter()
        self.server_errors: list[tuple[str, int, str]] = []

    def record(self, what: str, response: httpx.Response) -> None:
        with self._lock:
            self.counts[(what, response.status_code)] += 1
            if response.status_code >= 500:
                self.server_errors.append((what, response.status_code, response.text[:500]))


def _run_threads(targets) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrap(target):
        def run():
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a writer thread hung"
    return errors


def test_twenty_writers_fifty_supersedes_each(tx_world, fast_live_server, in_scope):
    from facts.models import Fact, FactRevision

    live_server = fast_live_server

    keys = [tx_world.key() for _ in range(WRITERS)]  # one key each: the rate limit is per key
    with _client(live_server, keys[0]) as client:
        created = client.post("/v1/facts", json={"type": "acme.counter", "content": {"writer": None, "n": 0}})
    assert created.status_code == 201, created.text
    fact_id = created.json()["id"]
    url = f"/v1/facts/{fact_id}"

    statuses = _Statuses()
    start = threading.Barrier(WRITERS)
    conflicts = Counter()

    def writer(index: int):
        def run():
            rng = random.Random(index)
            with _client(live_server, keys[index]) as client:
                start.wait(timeout=30)
                read = client.get(url)
                statuses.record("get", read)
                assert read.status_code == 200, read.text
                version = read.json()["version"]
                landed = 0
                misses = 0
                while landed < SUPERSEDES_EACH:
                    response = client.post(
                        url + "/supersede",
                        json={"content": {"writer": index, "n": landed}, "expectVersion": version},
                    )
                    statuses.record("supersede", response)
                    body = response.json()
                    if response.status_code == 200:
                        assert body["version"] == version + 1, body
                        assert body["content"] == {"writer": index, "n": landed}
                        version = body["version"]
                        landed += 1
                        misses = 0
                        continue
                    assert response.status_code == 409, response.text
                    assert body["code"] == "version-conflict", body
                    assert body["currentVersion"] > version, body
                    conflicts[index] += 1
                    misses += 1
                    # Back off (exponential, full jitter) so 19 losers do not retry in
                    # lockstep, then re-read the version and try again.
                    time.sleep(rng.uniform(0, min(1.0, 0.01 * 2 ** misses)))
                    read = client.get(url)
                    statuses.record("get", read)
                    assert read.status_code == 200, read.text
                    version = read.json()["version"]
                    assert version >= body["currentVersion"]

        return run

    began = time.monotonic()
    errors = _run_threads([writer(i) for i in range(WRITERS)])
    elapsed = time.monotonic() - began
    assert not statuses.server_errors, statuses.server_errors[:3]
    assert not errors, errors[:3]
    assert {status for (_, status) in statuses.counts} <= {200, 409}, statuses.counts
    assert sum(conflicts.values()) > 0, "the writers never collided: no race was tested"
    print(f"\n{WRITERS}x{SUPERSEDES_EACH} supersedes over HTTP in {elapsed:.1f}s; "
          f"{sum(conflicts.values())} conflicts; statuses {dict(statuses.counts)}")

    total = 1 + WRITERS * SUPERSEDES_EACH
    fact = Fact.objects.get(id=fact_id)
    assert fact.version == total
    revisions = list(FactRevision.objects.filter(fact_id=fact_id).order_by("version"))
    assert len(revisions) == total
    versions = [r.version for r in revisions]
    assert versions == list(range(1, total + 1))  # each once, no gaps
    assert [r.version for r in revisions if r.superseded_at is None] == [total]
    assert all(r.invalidation_reason == "superseded" for r in revisions[:-1])
    assert revisions[-1].invalidation_reason is None
    # No lost update: every writer's 50 contents landed exactly once.
    contents = Counter((r.content["writer"], r.content["n"]) for r in revisions[1:])
    assert contents == Counter({(w, n): 1 for w in range(WRITERS) for n in range(SUPERSEDES_EACH)})
    # The current state is the last revision.
    assert fact.content == revisions[-1].content and fact.updated_at == revisions[-1].recorded_at
    # Intervals are well ordered and chain: rev N ends exactly when rev N+1 begins.
    for revision in revisions[:-1]:
        assert revision.recorded_at < revision.superseded_at, revision
    for earlier, later in zip(revisions, revisions[1:]):
        assert earlier.superseded_at == later.recorded_at, (earlier.version, later.version)

    # And the API tells the same story.
    with _client(live_server, keys[0]) as client:
        listed = client.get(url + "/revisions")
        assert listed.status_code == 200
        assert [r["version"] for r in listed.json()["data"]] == list(range(1, total + 1))
        current = client.get(url).json()
        assert current["version"] == total


def test_twenty_writers_service_level(tx_world, in_scope):
    """The same race without HTTP (20 × 25): fact_supersede in threads, each with its own connection."""
    from django.db import connection

    from accounts.services import apikey_authenticate
    from core import scoping
    from core.errors import VersionConflict
    from facts import services
    from facts.models import Fact, FactRevision

    principal = apikey_authenticate(raw=tx_world.key())
    with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
        fact, _ = services.fact_write(principal=principal, data=services.FactInput(type="acme.counter", content=0))
    start = threading.Barrier(WRITERS)
    each = 25
    lock = threading.Lock()
    conflicts = [0]

    def writer(index: int):
        def run():
            try:
                with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
                    start.wait(timeout=30)
                    rng = random.Random(index)
                    version = Fact.objects.get(id=fact.id).version
                    landed = misses = 0
                    while landed < each:
                        try:
                            version = services.fact_supersede(
                                principal=principal, fact_id=fact.id, content=[index, landed], expect_version=version
                            ).version
                            landed += 1
                            misses = 0
                        except VersionConflict as conflict:
                            assert conflict.extra["currentVersion"] > version
                            with lock:
                                conflicts[0] += 1
                            misses += 1
                            time.sleep(rng.uniform(0, min(0.5, 0.005 * 2 ** misses)))
                            version = Fact.objects.get(id=fact.id).version
            finally:
                connection.close()

        return run

    began = time.monotonic()
    errors = _run_threads([writer(i) for i in range(WRITERS)])
    assert not errors, errors[:3]
    print(f"\n{WRITERS}x{each} service-level supersedes in {time.monotonic() - began:.1f}s; {conflicts[0]} conflicts")
    assert conflicts[0] > 0, "the writers never collided: no race was tested"
    total = 1 + WRITERS * each
    assert Fact.objects.get(id=fact.id).version == total
    revisions = list(FactRevision.objects.filter(fact_id=fact.id).order_by("version"))
    assert [r.version for r in revisions] == list(range(1, total + 1))
    assert sum(r.superseded_at is None for r in revisions) == 1
    for earlier, later in zip(revisions, revisions[1:]):
        assert earlier.recorded_at < earlier.superseded_at == later.recorded_at
    assert Counter(tuple(r.content) for r in revisions[1:]) == Counter({(w, n): 1 for w in range(WRITERS) for n in range(each)})


@pytest.mark.parametrize("writers, rounds", [(2, 8), (6, 4)])
def test_writers_racing_for_one_key_slot_make_one_fact(tx_world, fast_live_server, in_scope, writers, rounds):
    """Writers POST the same type/key/scope at once: one fact, one revision per writer."""
    from facts.models import Fact, FactRevision

    live_server = fast_live_server

    keys = [tx_world.key() for _ in range(writers)]
    statuses = _Statuses()
    results: dict[tuple[int, int], dict] = {}

    for round_ in range(rounds):
        start = threading.Barrier(writers)
        body_of = lambda i: {  # noqa: E731
            "type": "acme.preference", "key": f"contact-{round_}", "content": {"by": i},
            "scope": {"participantId": "end-7"},
        }

        def writer(index: int):
            def run():
                with _client(live_server, keys[index]) as client:
                    client.get("/v1/facts?limit=1")  # open the connection before the race
                    start.wait(timeout=30)
                    response = client.post("/v1/facts", json=body_of(index))
                    statuses.record("write", response)
                    assert response.status_code == 201, response.text
                    results[(round_, index)] = response.json()

            return run

        errors = _run_threads([writer(i) for i in range(writers)])
        assert not statuses.server_errors, statuses.server_errors[:3]
        assert not errors, errors[:3]

        facts = list(Fact.objects.filter(type="acme.preference", key=f"contact-{round_}"))
        assert len(facts) == 1, [(f.id, f.version) for f in facts]
        fact = facts[0]
        assert fact.version == writers and fact.status == "active"
        answers = [results[(round_, i)] for i in range(writers)]
        assert {a["id"] for a in answers} == {str(fact.id)}
        assert sorted(a["version"] for a in answers) == list(range(1, writers + 1))
        revisions = list(FactRevision.objects.filter(fact_id=fact.id).order_by("version"))
        assert [r.version for r in revisions] == list(range(1, writers + 1))
        assert sum(r.superseded_at is None for r in revisions) == 1
        # The last writer's content is current, whoever it was.
        last = next(a for a in answers if a["version"] == writers)
        assert fact.content == last["content"]


