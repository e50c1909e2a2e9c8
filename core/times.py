"""Times a client sends: one parser for every body field, query parameter and cursor.

ISO 8601 allows what Python's datetime and PostgreSQL do not: impossible dates
(2026-02-30), hours of 24, offsets of a day or more (+25:00), year 0, and times whose
offset carries them outside years 1 to 9999 in UTC (0001-01-01T00:00+01:00). Each was a
500 somewhere; `parse_time` turns them all into None, which the caller refuses as a 400.
Times are returned in UTC, as PostgreSQL refuses offsets beyond ±15:59.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime


def parse_time(raw: object) -> datetime | None:
    """An ISO 8601 time with a zone, in UTC; None for anything else (no zone, not a time, out of range)."""
    if not isinstance(raw, str):
        return None
    try:
        parsed = parse_datetime(raw)
        return parsed.astimezone(UTC) if parsed is not None and parsed.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None
