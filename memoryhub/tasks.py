"""Enqueueing work after commit, with or without a broker.

With Redis configured, tasks go to Celery after the transaction commits; if the broker
is down the write still succeeds (the work is logged and the backfill jobs catch up).
Without a broker (the embedded default) the task runs in-process on a background
thread after commit, so it still never runs inside the request that wrote. Tests set
MEMORYHUB_TASKS_INLINE to run it at once, in the caller's transaction (a test's
transaction never commits, so on-commit work would never run there).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, transaction

logger = logging.getLogger(__name__)
_executor: ThreadPoolExecutor | None = None


def _background(task, args) -> None:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryhub-task")

    def run():
        try:
            task.apply(args=args, throw=True)
        except Exception:
            logger.exception("background task %s failed; the backfill job will catch up", task.name)
        finally:
            close_old_connections()

    _executor.submit(run)


def enqueue_on_commit(task, *args) -> None:
    """Run `task(*args)` once the current transaction commits (never inside it)."""

    if getattr(settings, "MEMORYHUB_TASKS_INLINE", False):
        task.apply(args=args, throw=True)
        return

    def send():
        if settings.CELERY_TASK_ALWAYS_EAGER:
            _background(task, args)
        else:
            try:
                task.apply_async(args=args, retry=True, retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2})
            except Exception:
                logger.exception("could not enqueue %s (broker down?); the backfill job will catch up", task.name)

    transaction.on_commit(send)


def drain(timeout: float = 60.0) -> None:
    """Wait for in-process background tasks submitted so far (tests, `serve` shutdown)."""
    if _executor is not None:
        _executor.submit(lambda: None).result(timeout=timeout)
