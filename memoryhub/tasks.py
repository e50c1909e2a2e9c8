"""Enqueueing work after commit, with or without a broker.

With Redis configured, tasks go to Celery after the transaction commits; if the broker
is down the write still succeeds (the work is logged and the backfill jobs catch up).
Without a broker (the embedded default) the task runs in-process on one background
thread after commit, so it still never runs inside the request that wrote; calls of
the same task that wait in line are merged into one (their id lists joined, up to
MEMORYHUB_EMBEDDINGS_BATCH ids), so a burst of single writes is embedded in batches.
Tests set MEMORYHUB_TASKS_INLINE to run it at once, in the caller's transaction (a
test's transaction never commits, so on-commit work would never run there).

The scheduled jobs' tasks (expiry, retention purge, embedding backfill) are defined at
the end: each is a thin door onto memoryhub.jobs.
"""

from __future__ import annotations

import logging
import queue
import random
import threading

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, transaction

logger = logging.getLogger(__name__)


class _InProcessRunner:
    """One daemon thread working through (task, ids) in order, merging queued calls."""

    def __init__(self):
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="memoryhub-tasks", daemon=True)
        self._stopped = False
        self._thread.start()

    def submit(self, task, ids: list) -> None:
        if not self._stopped:
            self._queue.put((task, list(ids)))

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            task, ids = item
            limit = max(1, settings.MEMORYHUB_EMBEDDINGS_BATCH)
            while len(ids) < limit:  # merge what waits behind it for the same task
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None or nxt[0] is not task:
                    self._queue.put(nxt)
                    break
                ids.extend(nxt[1])
            try:
                task.apply(args=(ids,), throw=True)
            except Exception:
                logger.exception("in-process task %s failed; the backfill job will catch up", task.name)
            finally:
                close_old_connections()

    def stop(self) -> int:
        """Drop what has not started (the backfill job catches up) and stop; returns how many were dropped."""
        self._stopped = True
        dropped = 0
        while True:
            try:
                if self._queue.get_nowait() is not None:
                    dropped += 1
            except queue.Empty:
                break
        self._queue.put(None)
        self._thread.join(timeout=30)
        return dropped


_runner: _InProcessRunner | None = None
_runner_lock = threading.Lock()


def enqueue_on_commit(task, ids: list) -> None:
    """Run `task(ids)` once the current transaction commits (never inside it)."""
    if getattr(settings, "MEMORYHUB_TASKS_INLINE", False):
        task.apply(args=(ids,), throw=True)
        return

    def send():
        global _runner
        if settings.CELERY_TASK_ALWAYS_EAGER:
            with _runner_lock:
                if _runner is None:
                    _runner = _InProcessRunner()
            _runner.submit(task, ids)
            return
        try:
            task.apply_async(args=(ids,), retry=True, retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2})
        except Exception:
            logger.exception("could not enqueue %s (broker down?); the backfill job will catch up", task.name)

    transaction.on_commit(send)


def shutdown() -> None:
    """Stop the in-process runner before the database goes away (`serve` on Ctrl-C)."""
    global _runner
    with _runner_lock:
        runner, _runner = _runner, None
    if runner is not None:
        dropped = runner.stop()
        if dropped:
            logger.info("left %d queued in-process tasks to the backfill job", dropped)


# --- The scheduled jobs: thin doors onto memoryhub.jobs (schedule: memoryhub/celery.py) --------

JOB_RETRY_BASE_SECONDS = 10
JOB_RETRY_MAX_SECONDS = 600


def _transient(exc: Exception) -> bool:
    """Errors worth trying again later: the database or the embeddings provider away for a while."""
    from django.db import InterfaceError, OperationalError

    from retrieval.embeddings import EmbeddingError

    if isinstance(exc, EmbeddingError):
        return exc.transient
    return isinstance(exc, (OperationalError, InterfaceError))


def _run_job(task, service) -> dict:
    """Run a job; a transient error retries with exponential backoff and full jitter.

    In-process (no broker) there is no retry queue: the error is logged and the next
    tick of the schedule runs the job again.
    """
    try:
        return service()
    except Exception as exc:
        if not _transient(exc):
            raise
        if task.request.is_eager:
            logger.warning("%s: %s; the next scheduled run tries again", task.name, exc)
            return {"error": str(exc)}
        countdown = random.uniform(0, min(JOB_RETRY_MAX_SECONDS, JOB_RETRY_BASE_SECONDS * 2 ** task.request.retries))
        logger.warning("%s: %s; retrying in %.0f s", task.name, exc, countdown)
        raise task.retry(exc=exc, countdown=countdown)


@shared_task(bind=True, name="memoryhub.expire_facts", max_retries=5, acks_late=True)
def expire_facts(self) -> dict:
    """Facts past expiresAt become `expired` (memoryhub.jobs.facts_expire)."""
    from memoryhub.jobs import facts_expire

    return _run_job(self, facts_expire)


@shared_task(bind=True, name="memoryhub.retention_purge", max_retries=5, acks_late=True)
def retention_purge(self) -> dict:
    """Delete what is past its project's retention (memoryhub.jobs.retention_purge)."""
    from memoryhub.jobs import retention_purge as purge

    return _run_job(self, purge)


@shared_task(bind=True, name="memoryhub.embeddings_backfill", max_retries=8, acks_late=True)
def embeddings_backfill(self) -> dict:
    """Embed facts and messages missing an embedding of the configured model (memoryhub.jobs.embeddings_backfill)."""
    from memoryhub.jobs import embeddings_backfill as backfill

    return _run_job(self, backfill)
