"""Facts and their append-only revisions.

A `Fact` row is the current state of one remembered thing (what reads use); every
version of it is a `FactRevision`, kept with the interval in which it was current
(`recorded_at` until `superseded_at`). The database enforces the two invariants that
matter under concurrency: one current revision per fact, and one live fact per slot
(tenant, project, participant, conversation, namespace, type, key).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import F, Q
from pgvector.django import HnswIndex, VectorField

from core.scoping import ScopedManager


class Trust(models.TextChoices):
    ASSERTED = "asserted"
    UNVERIFIED = "unverified"
    VERIFIED = "verified"


# Lowest first: an intent's minTrust reads it this way, and the wire lists it so.
TRUST_ASCENDING = [Trust.UNVERIFIED.value, Trust.ASSERTED.value, Trust.VERIFIED.value]


class Status(models.TextChoices):
    ACTIVE = "active"
    PENDING = "pending"
    REJECTED = "rejected"
    DELETED = "deleted"
    EXPIRED = "expired"


class InvalidationReason(models.TextChoices):
    SUPERSEDED = "superseded"
    DELETED = "deleted"
    ERASED = "erased"
    EXPIRED = "expired"
    REJECTED = "rejected"


# Statuses in which a fact can still change (supersede, verify, approve).
SLOT_HOLDING = [Status.ACTIVE, Status.PENDING]
# A key slot (tenant, project, participant, conversation, namespace, type, key) holds at most
# one active fact, its value, and at most one pending fact, the value waiting for approval:
# a pending fact reserves nothing, and approving it ends the active one (facts.services.fact_approve).


class RegConfigField(models.CharField):
    """A PostgreSQL text search configuration (`regconfig`), e.g. `english` or `simple`."""

    def db_type(self, connection):
        return "regconfig"

    def cast_db_type(self, connection):
        return "regconfig"


class FactFields(models.Model):
    """The versioned part of a fact: what every revision snapshots."""

    type = models.CharField(max_length=200)
    key = models.CharField(max_length=200, null=True, blank=True)
    namespace = models.CharField(max_length=200, null=True, blank=True)
    content = models.JSONField()
    content_hash = models.CharField(max_length=71)  # "sha256:" + 64 hex
    size = models.PositiveIntegerField()
    text = models.TextField(blank=True)  # the searchable text of `content`
    trust = models.CharField(max_length=16, choices=Trust.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    attributed_to = models.JSONField()
    generated_by = models.JSONField(null=True, blank=True)
    subjects = models.JSONField(default=list)
    references = models.JSONField(default=list)  # ids of other facts of the same project
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    verified_by = models.CharField(max_length=200, null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        abstract = True


class Fact(FactFields):
    """One remembered thing, in its current state."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="facts")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="facts")
    participant_id = models.CharField(max_length=200, null=True, blank=True)
    conversation_id = models.UUIDField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Search: the project's text search configuration at write time, the tsvector kept by
    # PostgreSQL itself, and the embedding (with its model in `embedding_model`).
    search_config = RegConfigField(max_length=63, default="english")
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config=F("search_config")),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=settings.MEMORYHUB_EMBEDDING_DIMENSIONS, null=True, blank=True)
    # Not versioned: an operator's flag that keeps the fact and its revisions out of
    # every retention purge until it is lifted (erasure by person still removes it).
    legal_hold = models.BooleanField(db_default=False)

    objects = ScopedManager(tenant_wide_rows=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "project", "participant_id", "conversation_id", "namespace", "type", "key"],
                condition=Q(key__isnull=False, status=Status.ACTIVE),
                nulls_distinct=False,
                name="fact_one_live_fact_per_slot",
            ),
            models.UniqueConstraint(
                fields=["tenant", "project", "participant_id", "conversation_id", "namespace", "type", "key"],
                condition=Q(key__isnull=False, status=Status.PENDING),
                nulls_distinct=False,
                name="fact_one_pending_fact_per_slot",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "project", "-created_at", "-id"], name="fact_list_order"),
            models.Index(fields=["tenant", "project", "participant_id", "type"], name="fact_participant_type"),
            models.Index(fields=["tenant", "project", "namespace", "key"], name="fact_namespace_key"),
            # fastupdate off: the pending list otherwise grows under steady inserts and
            # slows keyword reads ~4x until vacuum merges it (PERFORMANCE.md).
            GinIndex(fields=["search_vector"], name="fact_search_vector", fastupdate=False),
            HnswIndex(
                name="fact_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            # For the scheduled jobs (facts.expiry, privacy.retention): a tick with nothing to do reads a few
            # index pages instead of the whole table.
            models.Index(fields=["expires_at"], name="fact_expiry_due", condition=Q(status="active", expires_at__isnull=False)),
            models.Index(fields=["updated_at"], name="fact_ended", condition=Q(status__in=["deleted", "rejected"])),
            models.Index(fields=["id"], name="fact_unembedded", condition=Q(embedding_model__isnull=True)),
            # The facts kept for a whole project (no participant, no conversation) in their
            # own graph: a same-project or tenant read then walks only candidates it may
            # return, instead of filtering most of them away (at 1M facts, 20% of them
            # project-level, recall@10 0.895 -> see docs/benchmarks.md).
            HnswIndex(
                name="fact_project_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64,
                opclasses=["vector_cosine_ops"],
                condition=Q(participant_id__isnull=True, conversation_id__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.id} v{self.version}"


class FactRevision(FactFields):
    """One version of a fact, append-only; current from `recorded_at` until `superseded_at`."""

    id = models.BigAutoField(primary_key=True)
    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="revisions")
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    participant_id = models.CharField(max_length=200, null=True, blank=True)
    conversation_id = models.UUIDField(null=True, blank=True)
    version = models.PositiveIntegerField()
    recorded_at = models.DateTimeField()
    recorded_by = models.JSONField()  # who wrote this revision ({id, kind}), e.g. the verifier
    superseded_at = models.DateTimeField(null=True, blank=True)
    invalidation_reason = models.CharField(max_length=16, choices=InvalidationReason.choices, null=True, blank=True)
    invalidated_by = models.JSONField(null=True, blank=True)  # who ended it ({id, kind}), e.g. the deleter

    objects = ScopedManager(tenant_wide_rows=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fact", "version"], name="revision_unique_version"),
            models.UniqueConstraint(fields=["fact"], condition=Q(superseded_at__isnull=True), name="revision_one_current_per_fact"),
        ]

    def __str__(self) -> str:
        return f"{self.fact_id} v{self.version}"


class Workspace(models.Model):
    """A working-memory namespace of a project (e.g. an encoded working directory).

    Its entries are facts with this `namespace`; the row itself holds the state the
    relational query reads besides them: the active goal's task list.
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="+")
    # A participant-bound key keeps its working memory for its participant; any other key
    # keeps it for the project (None). Entries, task list and tool calls alike.
    participant_id = models.CharField(max_length=200, null=True, blank=True)
    namespace = models.CharField(max_length=200)
    tasks = models.JSONField(default=list)  # [{id, desc, status, rounds, note}]
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    objects = ScopedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "project", "participant_id", "namespace"], name="workspace_unique_namespace",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return self.namespace


class ToolCall(models.Model):
    """One tool call an agent loop reported for a workspace (the `tool_calls` relation)."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="+")
    participant_id = models.CharField(max_length=200, null=True, blank=True)  # as the workspace's
    namespace = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    args = models.JSONField(default=dict)
    result = models.TextField(blank=True)
    created_at = models.DateTimeField()

    objects = ScopedManager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "project", "namespace", "participant_id", "-id"], name="toolcall_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace} {self.name}"
