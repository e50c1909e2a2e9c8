"""Idempotent POSTs (Stripe and pretix style): one stored response per (API key, Idempotency-Key).

The claim is committed before the request runs, so a duplicate arriving meanwhile sees
it and gets `409` with `Retry-After`. The view's writes and the stored response commit
in one transaction: a write is never acknowledged without its stored response, and a
request that failed with a server error leaves nothing behind, so it can be retried.

A claim whose request died with its server (kill -9, a lost machine) is taken over at
once, not after the stale limit: while the request runs, its transaction holds an
advisory lock named after the claim (`hold`), which PostgreSQL releases the moment that
session ends. A duplicate that finds the claim in flight and its lock free knows nobody
is serving it, deletes it under that lock and claims the key afresh. The owner takes the
lock just after committing the claim; if a duplicate took the claim over in between, the
owner finds it gone once it holds the lock and answers `409` without running, so the
request still runs once. Transaction-scoped locks work behind a transaction-pooling
PgBouncer too. The stale limit stays, for an owner that holds its lock but never ends.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.errors import ApplicationError, Conflict, ValidationFailed
from core.models import IdempotencyRecord

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
LOCK_CLASS = 0x6D686964  # "mhid": the first of pg_advisory_xact_lock's two keys; the claim's id is the second


class Replay(Exception):
    """Raised to short-circuit a request with the stored first response."""

    def __init__(self, record: IdempotencyRecord):
        self.record = record


def request_fingerprint(request) -> str:
    digest = hashlib.sha256()
    digest.update(request.method.encode())
    digest.update(b"\0")
    digest.update(request.get_full_path().encode())
    digest.update(b"\0")
    digest.update(request.body)
    return digest.hexdigest()


def claim(*, principal, key: str, fingerprint: str) -> IdempotencyRecord:
    """Record that this key is being served, or raise Replay / Conflict."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValidationFailed(f"{HEADER} must be 1 to {MAX_KEY_LENGTH} characters.", errors={HEADER: ["invalid length"]})
    now = timezone.now()
    ttl = timedelta(hours=settings.MEMORYHUB_IDEMPOTENCY_TTL_HOURS)
    stale = timedelta(seconds=settings.MEMORYHUB_IDEMPOTENCY_STALE_SECONDS)
    for _ in range(3):
        try:
            with transaction.atomic():
                return IdempotencyRecord.objects.create(
                    tenant_id=principal.tenant_id, api_key_id=principal.api_key_id, key=key, request_hash=fingerprint
                )
        except IntegrityError:
            pass
        existing = IdempotencyRecord.objects.filter(api_key_id=principal.api_key_id, key=key).first()
        if existing is None:
            continue  # purged meanwhile: claim again
        if existing.created_at < now - ttl:
            # Take over an expired record.
            if IdempotencyRecord.objects.filter(pk=existing.pk, updated_at=existing.updated_at).delete()[0]:
                continue
        elif existing.state == IdempotencyRecord.State.IN_FLIGHT and _take_over(existing, stale_before=now - stale):
            continue  # its request died before it finished: claim the key afresh
        if existing.request_hash != fingerprint:
            raise IdempotencyKeyReused(
                f"This {HEADER} was already used with another request; use a new key for a new request."
            )
        if existing.state == IdempotencyRecord.State.IN_FLIGHT:
            raise RequestInFlight(
                f"A request with this {HEADER} is still being processed; retry shortly.", headers={"Retry-After": "1"}
            )
        raise Replay(existing)
    raise Conflict(f"Could not claim this {HEADER}; retry.", headers={"Retry-After": "1"})


def _lock_key(record: IdempotencyRecord) -> tuple[int, int]:
    return LOCK_CLASS, (record.pk + 2**31) % 2**32 - 2**31  # the id, wrapped into PostgreSQL's int4


def hold(*, record: IdempotencyRecord) -> None:
    """In the request's transaction, before it runs: hold the claim's lock until it commits or
    rolls back (or its session dies). Raises RequestInFlight when a duplicate took the claim
    over before the lock was held (see the module's notes)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", _lock_key(record))
    if not IdempotencyRecord.objects.filter(pk=record.pk, state=IdempotencyRecord.State.IN_FLIGHT).exists():
        raise RequestInFlight(f"A request with this {HEADER} is being processed; retry shortly.", headers={"Retry-After": "1"})


def _take_over(existing: IdempotencyRecord, *, stale_before) -> bool:
    """Delete an in-flight claim nobody serves: its lock is free (its request's session is
    gone), or it is older than the stale limit. Whether it was deleted."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", _lock_key(existing))
            unowned = cursor.fetchone()[0]
        if not unowned and existing.updated_at >= stale_before:
            return False
        orphan = IdempotencyRecord.objects.filter(pk=existing.pk, state=IdempotencyRecord.State.IN_FLIGHT, updated_at=existing.updated_at)
        return orphan.delete()[0] > 0


def complete(*, record: IdempotencyRecord, status: int, body: bytes, content_type: str) -> None:
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        state=IdempotencyRecord.State.DONE, response_status=status, response_body=body,
        response_content_type=content_type, updated_at=timezone.now(),
    )


def release(*, record: IdempotencyRecord) -> None:
    IdempotencyRecord.objects.filter(pk=record.pk).delete()


class IdempotencyKeyReused(ApplicationError):
    status, code, title = 409, "idempotency-key-reused", "Idempotency key reused"


class RequestInFlight(ApplicationError):
    status, code, title = 409, "request-in-flight", "Request in flight"
