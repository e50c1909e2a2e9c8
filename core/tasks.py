"""Enqueueing work after commit, with or without a broker.

With Redis configured, tasks go to Celery after the transaction commits; if the broker
is down the write still succeeds (the work is logged and the backfill jobs catch up).
Without a broker (the embedded default) the task runs in-process on one background
thread after commit, so it still never runs inside the request that wrote; each tenant's
calls wait in a lane of their own, lanes take turns, and calls of the same task that wait
in a lane are merged into one turn (their id lists joined, up to 16 ids), so a burst of
single writes is embedded in batches and one tenant's burst does not hold up another's.
Tests set MEMORYHUB_TASKS_INLINE to run it at once, in the caller's transaction (a
test's transaction never commits, so on-commit work would never run there).

The scheduled jobs' tasks (facts.tasks, privacy.tasks, retrieval.tasks) run their job
through `run_job`, which retries what says it is transient.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque

from django.conf import settings
from django.db import close_old_connections, connections, transaction

from core import scoping

logger = logging.getLogger(__name__)


class _InProcessRunner:
    """One daemon thread working through (task, ids), each tenant's in a lane of its own.

    Lanes are served round-robin, a turn at a time: a turn is the lane's next call with
    the calls of the same task waiting behind it merged in, up to `TURN_IDS` ids (and
    MEMORYHUB_EMBEDDINGS_BATCH), so one tenant's backlog delays another's fresh write by
    one turn at most. A lane holds at most `LANE_IDS` ids: a call beyond it is not queued
    (logged), and the backfill job embeds those rows later, as it does after a restart.
    """

    TURN_IDS = 16
    LANE_IDS = 1_000

    def __init__(self):
        self._lanes: dict[object, deque] = {}  # insertion order: the first lane is served next
        self._queued: dict[object, int] = {}
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="memoryhub-tasks", daemon=True)
        self._stopped = False
        self._thread.start()

    def submit(self, task, ids: list, *, lane: object = None) -> bool:
        """Queue `task(ids)` in `lane` (a tenant); False if it was left to the backfill job."""
        with self._ready:
            if self._stopped:
                return False
            queued = self._queued.get(lane, 0)
            if queued + len(ids) > self.LANE_IDS:
                logger.warning("in-process %s: %d ids already wait for tenant %s; %d more are left to the backfill job",
                               task.name, queued, lane, len(ids))
                return False
            self._lanes.setdefault(lane, deque()).append((task, list(ids)))
            self._queued[lane] = queued + len(ids)
            self._ready.notify()
            return True

    def _next_turn(self) -> tuple | None:
        """The first lane's next turn; the lane goes to the back of the line (None: stopped)."""
        with self._ready:
            while not self._lanes and not self._stopped:
                self._ready.wait()
            if self._stopped:
                return None
            lane = next(iter(self._lanes))
            calls = self._lanes.pop(lane)
            task, ids = calls.popleft()
            limit = max(1, min(self.TURN_IDS, settings.MEMORYHUB_EMBEDDINGS_BATCH))
            if len(ids) > limit:
                calls.appendleft((task, ids[limit:]))
                ids = ids[:limit]
            while calls and calls[0][0] is task and len(ids) < limit:  # merge what waits behind it
                _, more = calls.popleft()
                room = limit - len(ids)
                if len(more) > room:
                    calls.appendleft((task, more[room:]))
                ids = ids + more[:room]
            self._queued[lane] -= len(ids)
            if calls:
                self._lanes[lane] = calls
            else:
                del self._queued[lane]
            return task, ids

    def _loop(self) -> None:
        while (turn := self._next_turn()) is not None:
            task, ids = turn
            try:
                task.apply(args=(ids,), throw=True)
            except Exception:
                logger.exception("in-process task %s failed; the backfill job will catch up", task.name)
            finally:
                close_old_connections()
        connections.close_all()  # this thread's own connections

    def stop(self, timeout: float = 10.0) -> int:
        """Drop what has not started (the backfill job catches up) and stop; returns how many
        calls were dropped. An embedding in flight stops at its next chunk (`serve` interrupts
        it first), so the wait is short."""
        with self._ready:
            self._stopped = True
            dropped = sum(len(calls) for calls in self._lanes.values())
            self._lanes.clear()
            self._queued.clear()
            self._ready.notify_all()
        self._thread.join(timeout=timeout)
        return dropped


_runner: _InProcessRunner | None = None
_runner_lock = threading.Lock()


def _lane() -> object:
    """The lane of work enqueued now: the tenant of the request (None outside one)."""
    scope = scoping.current_scope()
    return scope.tenant_id if scope is not None else None


def enqueue_on_commit(task, ids: list) -> None:
    """Run `task(ids)` once the current transaction commits (never inside it)."""
    if getattr(settings, "MEMORYHUB_TASKS_INLINE", False):
        task.apply(args=(ids,), throw=True)
        return
    lane = _lane()

    def send():
        global _runner
        if settings.CELERY_TASK_ALWAYS_EAGER:
            with _runner_lock:
                if _runner is None:
                    _runner = _InProcessRunner()
            _runner.submit(task, ids, lane=lane)
            return
        try:
            task.apply_async(args=(ids,), retry=True, retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2})
        except Exception:
            logger.exception("could not enqueue %s (broker down?); the backfill job will catch up", task.name)

    transaction.on_commit(send)


_interrupts: list = []


def on_shutdown_interrupt(interrupt) -> None:
    """`interrupt(True)` is called when the runner stops and `interrupt(False)` once it has:
    long work in flight (retrieval's document embedding) stops at its next step."""
    _interrupts.append(interrupt)


def shutdown() -> None:
    """Stop the in-process runner before the database goes away (`serve` on Ctrl-C): an
    embedding in flight is interrupted at its next chunk, what waits is dropped (the
    backfill job embeds it later)."""
    global _runner
    with _runner_lock:
        runner, _runner = _runner, None
    if runner is not None:
        for interrupt in _interrupts:
            interrupt(True)
        try:
            dropped = runner.stop()
        finally:
            for interrupt in _interrupts:
                interrupt(False)
        if dropped:
            logger.info("left %d queued in-process tasks to the backfill job", dropped)


# --- The scheduled jobs' runner (their tasks: facts.tasks, privacy.tasks, retrieval.tasks) ------

JOB_RETRY_BASE_SECONDS = 10
JOB_RETRY_MAX_SECONDS = 600


def _transient(exc: Exception) -> bool:
    """Errors worth trying again later: the database away for a while, or any error that says
    it is (a `transient` attribute: retrieval.embeddings.EmbeddingError when the provider is)."""
    from django.db import InterfaceError, OperationalError

    if hasattr(exc, "transient"):
        return bool(exc.transient)
    return isinstance(exc, (OperationalError, InterfaceError))


def run_job(task, service) -> dict:
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
