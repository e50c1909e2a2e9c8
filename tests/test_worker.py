"""The jobs under a real Celery worker process, with a real Redis broker.

Each test starts `celery -A memoryhub worker` as a subprocess pointed at this session's
test database (committed rows: transactional tests), at a Redis database of its own and
a queue name of its own, and at a real loopback embeddings server that counts every
text it is sent. A PostgreSQL trigger, added for the test, records every write of an
embedding, so "embedded exactly once" is counted in the database itself.

- A worker killed with SIGKILL in the middle of a backfill: its task comes back (acks
  late, visibility timeout) to the restarted worker, and every row ends up written once.
- Two beat ticks at once: the work is done once.
- Redis stopped and started again: the API (gunicorn) goes on serving reads and writes,
  and the backfill catches up on what was written meanwhile.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from celery import Celery
from django.db import connection

from core import scoping
from memoryhub.celery import app as memoryhub_app
from tests.database_url import database_url
from tests.embedding_server import EmbeddingServer

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
VISIBILITY_TIMEOUT = 5  # seconds; a killed worker's task is handed out again after this
BATCH = 4  # rows per embeddings request, per committed batch


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Broker:
    """A Redis database and a queue of this test's own, and a client to send ticks with."""

    def __init__(self, url: str):
        self.url = url
        self.queue = f"memoryhub-test-{uuid.uuid4().hex[:8]}"
        self.client = Celery("memoryhub-tests", broker=url)
        self.client.conf.broker_connection_retry_on_startup = True

    def tick(self, entry: str) -> str:
        """Send what beat sends for a schedule entry; returns the task id."""
        scheduled = memoryhub_app.conf.beat_schedule[entry]
        result = self.client.send_task(scheduled["task"], queue=self.queue, **scheduled.get("options", {}))
        return result.id

    def close(self):
        self.client.close()
        import redis

        try:  # leave nothing of this test's queue behind in the shared Redis
            server = redis.Redis.from_url(self.url, socket_connect_timeout=1)
            for key in server.scan_iter(f"*{self.queue}*"):
                server.delete(key)
        except redis.RedisError:
            pass  # a Redis of the test's own, already stopped


class Worker:
    """`celery -A memoryhub worker` in its own process group, logging to a file."""

    def __init__(self, env: dict, log: Path, concurrency: int = 1):
        self.log = log
        self.log.write_text("")
        self.process = subprocess.Popen(
            [PYTHON, "-m", "celery", "-A", "memoryhub", "worker", "-l", "INFO", "-c", str(concurrency), "-P", "prefork",
             "-Q", env["MEMORYHUB_CELERY_QUEUE"], "-n", f"{uuid.uuid4().hex[:8]}@%h",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text()

    def wait_ready(self, timeout: float = 30):
        wait_for(lambda: " ready." in self.text() or self.process.poll() is not None, timeout, "the worker to start")
        assert self.process.poll() is None, self.text()[-3000:]

    def results(self, task_id: str) -> list[str]:
        return re.findall(rf"Task memoryhub\.\w+\[{task_id}\] succeeded in [\d.]+s: (.*)", self.text())

    def kill(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def embeddings():
    server = EmbeddingServer()
    yield server
    server.close()


@pytest.fixture
def written(transactional_db):
    """Every write of an embedding, recorded by a trigger: (table, row id)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE test_embedding_writes (tbl text, row_id text)")
        cursor.execute("""
            CREATE FUNCTION test_record_embedding_write() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO test_embedding_writes VALUES (TG_TABLE_NAME, NEW.id::text); RETURN NEW; END $$""")
        for table in ["facts_fact", "retrieval_message"]:
            cursor.execute(f"""
                CREATE TRIGGER test_record_embedding_write AFTER UPDATE OF embedding ON {table}
                FOR EACH ROW WHEN (NEW.embedding IS NOT NULL) EXECUTE FUNCTION test_record_embedding_write()""")

    def counts() -> Counter:
        with connection.cursor() as cursor:
            cursor.execute("SELECT row_id FROM test_embedding_writes")
            return Counter(row[0] for row in cursor.fetchall())

    yield counts
    with connection.cursor() as cursor:
        for table in ["facts_fact", "retrieval_message"]:
            cursor.execute(f"DROP TRIGGER IF EXISTS test_record_embedding_write ON {table}")
        cursor.execute("DROP FUNCTION IF EXISTS test_record_embedding_write()")
        cursor.execute("DROP TABLE IF EXISTS test_embedding_writes")


def worker_env(broker: Broker, embeddings: EmbeddingServer, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYHUB_", "CELERY_", "REDIS_", "DATABASE_"))}
    return env | {
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "DATABASE_URL": database_url(),
        "REDIS_URL": broker.url,
        "MEMORYHUB_CELERY_QUEUE": broker.queue,
        "SECRET_KEY": "worker-tests",
        "MEMORYHUB_EMBEDDINGS": "openai",
        "MEMORYHUB_EMBEDDINGS_URL": embeddings.url,
        "MEMORYHUB_EMBEDDINGS_MODEL": "model-a",
        "MEMORYHUB_EMBEDDINGS_BATCH": str(BATCH),
        "MEMORYHUB_BACKFILL_GRACE_SECONDS": "0",
        "MEMORYHUB_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "MEMORYHUB_TASK_TIME_LIMIT": str(VISIBILITY_TIMEOUT - 1),
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "INFO",
    } | extra


@pytest.fixture
def broker(redis_url):
    # Database 12 of the shared Redis: the suite's other Redis tests use (and flush) 15.
    broker = Broker(redis_url.rsplit("/", 1)[0] + "/12")
    yield broker
    broker.close()


def unembedded(tx_world, facts: int, messages: int = 0) -> tuple[list[str], list[str]]:
    """Facts (and messages) written while no embeddings provider was configured."""
    client = tx_world.client()
    fact_ids = [
        client.post("/v1/facts", {"type": "acme.note", "content": f"fact number {i}"}, format="json").json()["id"]
        for i in range(facts)
    ]
    message_ids = []
    if messages:
        assert client.post("/v1/agents", {"slug": "acme.desk", "instructions": "x"}, format="json").status_code == 201
        conversation = client.post("/v1/conversations", {"agent": "acme.desk"}, format="json").json()["id"]
        said = {"messages": [{"role": "user", "text": f"message number {i}"} for i in range(messages)]}
        assert client.post(f"/v1/conversations/{conversation}/messages", said, format="json").status_code == 201
        from agent.models import Message

        with scoping.scopes_disabled():
            message_ids = [str(i) for i in Message.objects.filter(conversation_id=conversation).values_list("id", flat=True)]
    return fact_ids, message_ids


def embedded_count(model: str = "model-a") -> int:
    from agent.models import Message
    from facts.models import Fact

    with scoping.scopes_disabled():
        return Fact.objects.filter(embedding_model=model).count() + Message.objects.filter(embedding_model=model).count()


def test_a_worker_killed_mid_backfill_comes_back_and_every_row_is_written_once(tx_world, broker, embeddings, written, tmp_path):
    fact_ids, message_ids = unembedded(tx_world, facts=10, messages=2)
    embeddings.hold_request = 2  # the second batch's request hangs: the worker is mid-backfill
    env = worker_env(broker, embeddings)
    first = Worker(env, tmp_path / "worker-1.log")
    second = None
    try:
        first.wait_ready()
        task_id = broker.tick("embeddings-backfill")
        assert embeddings.holding.wait(30), first.text()[-3000:]
        first.kill()  # SIGKILL to the whole worker: main process and pool
        embeddings.release.set()
        assert embedded_count() == BATCH  # the first batch was committed, the second never was

        second = Worker(env, tmp_path / "worker-2.log")
        second.wait_ready()
        # No new tick: the killed worker's unacknowledged task is handed out again.
        wait_for(lambda: second.results(task_id), 30, "the redelivered backfill to finish")
        assert embedded_count() == 12
    finally:
        first.kill()
        if second is not None:
            second.stop()
    counts = written()
    assert sorted(counts) == sorted(fact_ids + message_ids) and set(counts.values()) == {1}  # each row written once
    # The provider was asked again only for the batch in flight when the worker died.
    assert sum(embeddings.sent.values()) == 12 + BATCH
    assert sorted(embeddings.sent.values()) == [1] * (12 - BATCH) + [2] * BATCH
    assert "'done': True" in second.results(task_id)[0]


def test_two_beat_ticks_at_once_do_the_work_once(tx_world, broker, embeddings, written, tmp_path):
    fact_ids, _ = unembedded(tx_world, facts=6)
    embeddings.delay = 0.4  # slow enough that both ticks are running at the same time
    worker = Worker(worker_env(broker, embeddings), tmp_path / "worker.log", concurrency=2)
    try:
        worker.wait_ready()
        ticks = [broker.tick("embeddings-backfill"), broker.tick("embeddings-backfill")]
        wait_for(lambda: all(worker.results(t) for t in ticks), 30, "both ticks to finish")
    finally:
        worker.stop()
    results = [worker.results(t)[0] for t in ticks]
    assert sorted("skipped" in r for r in results) == [False, True], results  # the second found the first at work
    assert "'facts': 6" in next(r for r in results if "skipped" not in r)
    counts = written()
    assert sorted(counts) == sorted(fact_ids) and set(counts.values()) == {1}
    assert set(embeddings.sent.values()) == {1}


class RedisServer:
    """A Redis of this test's own (the machine's shared one is never stopped)."""

    def __init__(self, port: int, folder: Path):
        self.port, self.folder = port, folder
        self.process = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )

        def answers():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        wait_for(answers, 10, "redis-server to start")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def test_the_api_serves_while_redis_is_down_and_the_jobs_catch_up(tx_world, embeddings, tmp_path):
    if shutil.which("redis-server") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed (CI must run the Redis tests)")
        pytest.skip("redis-server is not installed")
    redis_server = RedisServer(free_port(), tmp_path)
    redis_server.start()
    broker = Broker(redis_server.url)
    env = worker_env(broker, embeddings)
    # This test is about the after-commit path: writes are not embedded inside the request.
    env["MEMORYHUB_EMBEDDINGS_INLINE_BUDGET_MS"] = "0"
    port = free_port()
    web = subprocess.Popen(
        [PYTHON, "-m", "gunicorn", "memoryhub.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", "1", "--threads", "4",
         "--timeout", "60"],
        cwd=ROOT, env=env, stdout=(tmp_path / "web.log").open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    worker = Worker(env, tmp_path / "worker.log")
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {tx_world.key()}"}, timeout=10)
    try:
        worker.wait_ready()
        wait_for(lambda: _answers(api), 30, "gunicorn to serve")
        first = api.post("/v1/facts", json={"type": "acme.note", "content": "written with redis up"})
        assert first.status_code == 201
        wait_for(lambda: embedded_count() == 1, 20, "the after-commit embedding through the worker")

        redis_server.stop()
        during = []
        for i in range(3):
            started = time.monotonic()
            response = api.post("/v1/facts", json={"type": "acme.note", "content": f"outage note {i}"})
            assert response.status_code == 201, response.text
            assert time.monotonic() - started < 5
            during.append(response.json()["id"])
        listed = api.get("/v1/facts", params={"limit": 10})
        assert listed.status_code == 200 and {f["id"] for f in listed.json()["data"]} >= set(during)
        found = api.post("/v1/retrieve", json={"query": "outage", "intents": [{"scope": "same-project", "mode": "keyword"}]})
        assert found.status_code == 200 and len(found.json()["facts"]) == 3
        assert embedded_count() == 1  # nothing could be enqueued meanwhile

        redis_server.start()  # empty: whatever was queued is gone
        assert api.get("/v1/me").status_code == 200
        broker.tick("embeddings-backfill")  # the next beat tick
        wait_for(lambda: embedded_count() == 4, 40, "the backfill to catch up", interval=0.2)
    finally:
        api.close()
        worker.stop()
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
            web.wait(10)
        broker.close()
        redis_server.stop()


def _answers(api: httpx.Client) -> bool:
    try:
        return api.get("/v1/me").status_code == 200
    except httpx.TransportError:
        return False
