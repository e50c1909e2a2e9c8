"""Agents (what each one reads before a turn and may remember) and remember-call records."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Case, F, Q, Value, When
from pgvector.django import HnswIndex, VectorField

from core.scoping import ScopedManager
from facts.models import RegConfigField


class Agent(models.Model):
    """An agent declaration in a project: `acme.desk` version `1.0.0`, its intents and remember rules."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="agents")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="agents")
    slug = models.CharField(max_length=200)
    version = models.CharField(max_length=100, default="1.0.0")
    instructions = models.TextField(blank=True)
    retrieval = models.JSONField(default=list)  # intents, as validated by agent.services
    remember = models.JSONField(null=True, blank=True)  # {types, scope, keepDays} or None
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "slug"], name="agent_slug_unique_in_project")]

    def __str__(self) -> str:
        return f"{self.slug}@{self.version}"


class RememberCall(models.Model):
    """One remember tool call (run + tool call id), so a retried call writes nothing twice."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="remember_calls")
    participant_id = models.CharField(max_length=200, null=True, blank=True)  # the person the call was for
    run_id = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=200)
    # sha256 of the call's canonical arguments: a replay must send the same (empty: before this was kept).
    arguments_hash = models.CharField(max_length=64, blank=True, default="")
    fact = models.ForeignKey("facts.Fact", on_delete=models.CASCADE, related_name="+")
    result = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "participant_id", "run_id", "tool_call_id"], name="remember_call_once", nulls_distinct=False,
            ),
        ]


class Conversation(models.Model):
    """One conversation of an agent in a project, with an end user (participant) or none.

    `agent_slug` names the agent (its declaration may be replaced or re-created under the
    same slug; its conversations stay its). A replay re-runs a past turn on another version:
    its messages are no one's, so recall never reads them. An unregistered conversation
    (`unregistered_at` set) is never recalled again.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="conversations")
    agent_slug = models.CharField(max_length=200)
    participant_id = models.CharField(max_length=200, null=True, blank=True)
    segment = models.CharField(max_length=500, null=True, blank=True)  # a path such as acme/customers/c-42
    replay = models.BooleanField(default=False)
    user_id = models.IntegerField()  # the user the creating key acts for
    created_at = models.DateTimeField(auto_now_add=True)
    unregistered_at = models.DateTimeField(null=True, blank=True)
    next_sequence = models.PositiveIntegerField(default=0)

    objects = ScopedManager()

    class Meta:
        indexes = [
            models.Index(fields=["project", "agent_slug", "participant_id"], name="conversation_agent_participant"),
            models.Index(fields=["project", "agent_slug", "segment"], name="conversation_agent_segment"),
            # The retention purge's candidates (privacy.retention).
            models.Index(fields=["unregistered_at"], name="conversation_unregistered", condition=Q(unregistered_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.agent_slug} {self.id}"


class MessageRole(models.TextChoices):
    USER = "user"
    AGENT = "agent"
    TOOL = "tool"


class Message(models.Model):
    """One message of a conversation, numbered from 0. Tool messages are kept, never indexed."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    sequence = models.PositiveIntegerField()
    role = models.CharField(max_length=8, choices=MessageRole.choices)
    text = models.TextField()
    external_id = models.CharField(max_length=200, null=True, blank=True)
    user_id = models.IntegerField()  # the user the appending key acted for
    created_at = models.DateTimeField()
    # Search, as for facts: the project's configuration at write time, the tsvector kept by
    # PostgreSQL (empty for tool messages), and the embedding (none for tool messages).
    search_config = RegConfigField(max_length=63, default="english")
    search_vector = models.GeneratedField(
        expression=SearchVector(
            Case(When(role=MessageRole.TOOL, then=Value("")), default=F("text"), output_field=models.TextField()),
            config=F("search_config"),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=settings.MEMORYHUB_EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, null=True, blank=True)

    objects = ScopedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "sequence"], name="message_unique_sequence"),
        ]
        indexes = [
            # fastupdate off and inline vectors, as for facts (PERFORMANCE.md).
            GinIndex(fields=["search_vector"], name="message_search_vector", fastupdate=False),
            HnswIndex(
                name="message_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}#{self.sequence}"
