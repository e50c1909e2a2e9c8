"""Idempotent POSTs (Stripe and pretix style): one stored response per (API key, Idempotency-Key).

The claim is committed before the request runs, so a duplicate arriving meanwhile sees
it and gets `409` with `Retry-After`. The view's writes and the stored response commit
in one transaction: a write is never acknowledged without its stored response, and a
request that failed with a server error leaves nothing behind, so it can be retried.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from memoryhub.errors import ApplicationError, Conflict, ValidationFailed
from memoryhub.models import IdempotencyRecord

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255


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
        expired = existing.created_at < now - ttl
        abandoned = existing.state == IdempotencyRecord.State.IN_FLIGHT and existing.updated_at < now - stale
        if expired or abandoned:
            # Take over an expired record, or one whose request died before it finished.
            taken = IdempotencyRecord.objects.filter(pk=existing.pk, updated_at=existing.updated_at).delete()[0]
            if taken:
                continue
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
