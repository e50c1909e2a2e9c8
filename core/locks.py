"""One run of a job at a time, across every worker: PostgreSQL session advisory locks.

A lock belongs to the database session, so a worker that dies (even by SIGKILL) loses
it the moment PostgreSQL sees its connection close. Session locks need a direct
connection (or a pooler in session mode), not a transaction-mode pooler.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator

from django.conf import settings
from django.db import connection

SKIPPED = {"skipped": "running"}  # what a run returns when another run holds the lock


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"memoryhub.jobs:{name}".encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def job_lock(name: str) -> Iterator[bool]:
    """Try to take the job's lock; yields whether this run got it (never waits)."""
    key = _lock_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        locked = bool(cursor.fetchone()[0])
    try:
        yield locked
    finally:
        if locked:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


DEFAULT_BUDGET: float = -1.0  # a job's `budget_seconds` default: MEMORYHUB_JOB_BUDGET_SECONDS


class Budget:
    """How long a run may keep starting batches; None: until the work is done."""

    def __init__(self, seconds: float | None):
        if seconds == DEFAULT_BUDGET:
            seconds = settings.MEMORYHUB_JOB_BUDGET_SECONDS
        self.deadline = None if seconds is None else time.monotonic() + seconds

    @property
    def spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline
