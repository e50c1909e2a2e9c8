"""What core keeps in the database: the idempotent responses of POSTs (core.idempotency)."""

from __future__ import annotations

from django.db import models


class IdempotencyRecord(models.Model):
    """The first response to a POST sent with an `Idempotency-Key`, kept 24 hours."""

    class State(models.TextChoices):
        IN_FLIGHT = "in-flight"
        DONE = "done"

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    api_key = models.ForeignKey("memoryhub.ApiKey", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=State.choices, default=State.IN_FLIGHT)
    response_status = models.PositiveSmallIntegerField(null=True)
    response_body = models.BinaryField(null=True)
    response_content_type = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "memoryhub_idempotencyrecord"  # made by the accounts app (label memoryhub) before core had models
        constraints = [models.UniqueConstraint(fields=["api_key", "key"], name="idempotency_one_per_key_owner")]
