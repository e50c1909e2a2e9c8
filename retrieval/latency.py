"""How long the per-turn reads take, measured where they are served, kept as daily histograms.

`observe` adds one read's duration to this process's counts (a dict under a lock: no I/O on
the request's path). `flush` adds the counts to ReadLatency rows with one upsert per
(project, day, kind), summing bucket by bucket, so every process of a deployment adds its
own; it runs on a background thread at most every FLUSH_SECONDS, and when the dashboard
reads the figures. What a process measured and had not flushed when it stopped is lost:
these are figures for a chart, not records.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from datetime import date

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from accounts.models import Project
from core import scoping
from retrieval.models import ReadLatency

logger = logging.getLogger(__name__)

# Upper bounds, in ms, of the histogram's buckets; the last bucket holds anything slower.
BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000)
FLUSH_SECONDS = 30.0

_lock = threading.Lock()
_counts: dict[tuple, list] = {}  # (tenant, project, day, kind) -> [buckets, count, total_ms]
_last_flush = time.monotonic()
_flushing = False


def _entry(key: tuple) -> list:
    """This process's [buckets, count, total_ms] for `key`, made empty if new (hold `_lock`)."""
    entry = _counts.get(key)
    if entry is None:
        entry = _counts[key] = [[0] * (len(BUCKETS_MS) + 1), 0, 0.0]
    return entry


def _summed(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def observe(*, tenant_id, project_id, kind: str, seconds: float) -> None:
    """Count one read of `kind` in the project; starts a flush when one is due."""
    global _flushing
    if project_id is None:
        return
    ms = seconds * 1000
    key = (tenant_id, project_id, timezone.now().date(), kind)
    with _lock:
        entry = _entry(key)
        entry[0][bisect.bisect_left(BUCKETS_MS, ms)] += 1
        entry[1] += 1
        entry[2] += ms
        due = not _flushing and time.monotonic() - _last_flush >= FLUSH_SECONDS
        if due:
            _flushing = True
    if due:
        try:
            threading.Thread(target=_flush_in_thread, name="memoryhub-latency", daemon=True).start()
        except RuntimeError:  # no new threads (the interpreter is shutting down): the next read tries
            _flushing = False


def _flush_in_thread() -> None:
    global _flushing
    try:
        flush()
    except Exception:  # a chart's figures never fail a read; the counts wait for the next flush
        logger.warning("latency figures not saved; they are kept for the next flush", exc_info=True)
    finally:
        _flushing = False
        # This thread's own connection, closed outright: close_old_connections() would first
        # ask the database whether it is usable, which raises (unhandled, in a thread) when
        # the database is gone or, in the suite, once the test that started the flush is over.
        connection.close()


# A project deleted since its reads were counted takes its figures with it (the EXISTS).
_UPSERT = f"""
INSERT INTO {ReadLatency._meta.db_table} (tenant_id, project_id, day, kind, buckets, count, total_ms)
SELECT %s, %s, %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM {Project._meta.db_table} p WHERE p.id = %s)
ON CONFLICT (project_id, day, kind) DO UPDATE SET
    buckets = ARRAY(SELECT a + b FROM unnest({ReadLatency._meta.db_table}.buckets, EXCLUDED.buckets) AS u(a, b)),
    count = {ReadLatency._meta.db_table}.count + EXCLUDED.count,
    total_ms = {ReadLatency._meta.db_table}.total_ms + EXCLUDED.total_ms
"""


def flush() -> int:
    """Add this process's counts to the database; returns how many rows it touched."""
    global _last_flush
    with _lock:
        taken = dict(_counts)
        _counts.clear()
        _last_flush = time.monotonic()
    if not taken:
        return 0
    try:
        with connection.cursor() as cursor:
            cursor.executemany(_UPSERT, [
                (tenant, project, day, kind, buckets, count, total, project)
                for (tenant, project, day, kind), (buckets, count, total) in taken.items()
            ])
    except Exception:
        with _lock:  # put them back: the next flush tries again
            for key, (buckets, count, total) in taken.items():
                entry = _entry(key)
                entry[0] = _summed(entry[0], buckets)
                entry[1] += count
                entry[2] += total
        raise
    return len(taken)


def quantile(buckets: list[int], q: float) -> float | None:
    """The bucket bound under which a fraction `q` of the reads fall (None: no reads)."""
    total = sum(buckets)
    if not total:
        return None
    seen = 0
    for index, n in enumerate(buckets):
        seen += n
        if seen >= q * total:
            return float(BUCKETS_MS[index]) if index < len(BUCKETS_MS) else float("inf")
    return float("inf")  # pragma: no cover


def daily(*, project_id, days: list[date]) -> dict[date, list[int]]:
    """Each day's histogram of the project's reads (all kinds together), this process's flushed
    first (if that fails, the page shows what is stored; the counts wait for the next flush)."""
    try:
        with transaction.atomic():
            flush()
    except DatabaseError:
        logger.warning("latency figures not saved before the overview; they are kept for the next flush", exc_info=True)
    found: dict[date, list[int]] = {}
    with scoping.scopes_disabled():  # the caller gives the project it may read
        rows = ReadLatency.objects.filter(project_id=project_id, day__gte=days[0], day__lte=days[-1]).values_list("day", "buckets")
        for day, buckets in rows:
            found[day] = _summed(found[day], buckets) if day in found else list(buckets)
    return found
