"""Keyset (cursor) pagination on a unique, indexed ordering: `-created_at, -id`.

Lists answer `{"data": [...], "nextCursor": "…" | null}`; `?limit=` (default 50, max 500)
and `?cursor=` (opaque, from the previous page).
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime

from django.db.models import Q

from core.errors import ValidationFailed
from core.times import parse_time

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def parse_limit(raw: str | None, *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if not 1 <= value <= maximum:
        raise ValidationFailed(f"limit must be a whole number from 1 to {maximum}.", errors={"limit": [f"1 to {maximum}"]})
    return value


def encode_cursor(created_at: datetime, pk) -> str:
    raw = json.dumps([created_at.isoformat(), str(pk)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, pk = json.loads(base64.urlsafe_b64decode(padded.encode()))
        created = parse_time(created)
        if created is None or not isinstance(pk, str):
            raise ValueError("not a cursor of ours")
        return created, pk
    except (ValueError, TypeError, json.JSONDecodeError):
        raise ValidationFailed("cursor is not one this API gave out.", errors={"cursor": ["invalid"]}) from None


def paginate(queryset, *, params, created_field: str = "created_at", pk_field: str = "id", pk_type=uuid.UUID):
    """One page of `queryset` (newest first) and the cursor of the next page."""
    limit = parse_limit(params.get("limit"))
    cursor = params.get("cursor")
    queryset = queryset.order_by(f"-{created_field}", f"-{pk_field}")
    if cursor:
        created, pk = decode_cursor(cursor)
        try:
            pk = pk_type(pk)
        except (ValueError, TypeError):
            raise ValidationFailed("cursor is not one this API gave out.", errors={"cursor": ["invalid"]}) from None
        queryset = queryset.filter(Q(**{f"{created_field}__lt": created}) | Q(**{created_field: created, f"{pk_field}__lt": pk}))
    rows = list(queryset[: limit + 1])
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = encode_cursor(getattr(last, created_field), getattr(last, pk_field))
    return rows, next_cursor
