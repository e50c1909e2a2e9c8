"""Agents (what each one reads before a turn and may remember) and remember-call records."""

from __future__ import annotations

import uuid

from django.db import models

from memoryhub.scoping import ScopedManager


class Agent(models.Model):
    """An agent declaration in a project: `acme.desk` version `1.0.0`, its intents and remember rules."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("memoryhub.Tenant", on_delete=models.CASCADE, related_name="agents")
    project = models.ForeignKey("memoryhub.Project", on_delete=models.CASCADE, related_name="agents")
    slug = models.CharField(max_length=200)
    version = models.CharField(max_length=100, default="1.0.0")
    instructions = models.TextField(blank=True)
    retrieval = models.JSONField(default=list)  # intents, as validated by retrieval.agents
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
    run_id = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=200)
    fact = models.ForeignKey("facts.Fact", on_delete=models.CASCADE, related_name="+")
    result = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "run_id", "tool_call_id"], name="remember_call_once"),
        ]
