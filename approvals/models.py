"""Approvals: a person's decision on something an agent may not do alone.

Today one kind exists, `memory-fact`: a fact an agent remembered that waits (status
`pending`) until a reviewer approves or rejects it, because its scope is wider than one
person or its text reads like an instruction (approvals.rules). The approval keeps why
(`reasons`), who asked (`requested_by`, the agent) and who decided, when and with what
note. The fact itself carries the state reads obey: until it is approved, no read sees it.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.scoping import ScopedManager


class ApprovalKind(models.TextChoices):
    MEMORY_FACT = "memory-fact"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    # Closed without a decision: a newer value for the same slot replaced the fact's
    # pending content and opened a new approval (approvals.services.approval_request).
    SUPERSEDED = "superseded"


class Approval(models.Model):
    """One request for a person's decision, and the decision once made."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="approvals")
    # The fact's project; none for a tenant-wide fact (then every project of the tenant sees it).
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="approvals")
    kind = models.CharField(max_length=32, choices=ApprovalKind.choices, default=ApprovalKind.MEMORY_FACT)
    fact = models.ForeignKey("facts.Fact", on_delete=models.CASCADE, related_name="approvals")
    reasons = models.JSONField(default=list)  # [{rule, match, start?, end?}] from approvals.rules
    status = models.CharField(max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING)
    requested_by = models.JSONField()  # {id, kind: agent, agentVersion?}
    # Where the request came from, for the reviewer: {conversationId, runId, stepId, toolCallId}
    # of the remember call (each may be null); null for writes outside an agent's turn.
    origin = models.JSONField(null=True, blank=True)
    decided_by = models.JSONField(null=True, blank=True)  # {id, kind: user}
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ScopedManager(tenant_field="tenant_id", project_field="project_id", tenant_wide_rows=True)

    class Meta:
        constraints = [
            # One open question per fact: asking again updates it (approvals.services.approval_request).
            models.UniqueConstraint(fields=["fact"], condition=Q(status="pending"), name="approval_one_pending_per_fact"),
            models.CheckConstraint(
                condition=Q(status="pending", decided_at__isnull=True) | ~Q(status="pending") & Q(decided_at__isnull=False),
                name="approval_decided_when_not_pending",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "status", "-created_at", "-id"], name="approval_queue_order"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"
