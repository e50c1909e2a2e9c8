"""What retrieval keeps of its own: how long the per-turn reads took, per project and day."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from core.scoping import ScopedManager


class ReadLatency(models.Model):
    """A histogram of one project's read latencies on one day (UTC), per kind of read.

    `buckets[i]` counts reads that took at most retrieval.latency.BUCKETS_MS[i] ms (the last:
    longer). Each process adds what it measured (retrieval.latency.flush), so rows only grow.
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    kind = models.CharField(max_length=16)  # "retrieve" (POST /v1/retrieve) or "context" (POST /v1/agents/{slug}/context)
    buckets = ArrayField(models.BigIntegerField())
    count = models.BigIntegerField(default=0)
    total_ms = models.FloatField(default=0)

    objects = ScopedManager(tenant_field="tenant_id", project_field="project_id")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "day", "kind"], name="read_latency_one_per_day")]
