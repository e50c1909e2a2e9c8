"""Tenancy: tenants, projects, members and their roles, API keys, retention."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, models
from django.db.models import Q

from core.scoping import ScopedManager


def validate_text_search_config(value: str) -> None:
    """A text search configuration PostgreSQL knows (`english`, `simple`, `german`, …)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_ts_config WHERE cfgname = %s", [value])
        if cursor.fetchone() is None:
            raise ValidationError(f"{value!r} is not a text search configuration of this database (e.g. english, simple).")


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    WRITER = "writer", "Writer"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Admin"


# What each role may do; a role includes everything of the roles before it.
ROLE_RANK = {Role.VIEWER: 1, Role.WRITER: 2, Role.REVIEWER: 3, Role.ADMIN: 4}


class Access(models.TextChoices):
    READ = "read", "Read"
    WRITE = "write", "Write"


class Tenant(models.Model):
    """A customer of memoryhub; every other row belongs to exactly one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class Project(models.Model):
    """A tenant's project: the usual boundary of a fact, an agent and an API key."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="projects")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    # PostgreSQL text search configuration for keyword retrieval ("english", "simple", …).
    text_search_config = models.CharField(max_length=63, default="english", validators=[validate_text_search_config])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "slug"], name="project_slug_unique_in_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.slug}"


class Membership(models.Model):
    """A user's role in a whole tenant (project empty) or in one project."""

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], condition=Q(project__isnull=True), name="membership_one_per_tenant"),
            models.UniqueConstraint(fields=["user", "project"], condition=Q(project__isnull=False), name="membership_one_per_project"),
        ]

    def __str__(self) -> str:
        where = self.project or self.tenant
        return f"{self.user} is {self.role} of {where}"


class ApiKey(models.Model):
    """A bearer key: acts for one user, limited to a project (or the tenant) and an access.

    Stored as healthchecks does: a short public prefix to find the row, and only a
    SHA-256 hash of the secret, compared in constant time. The key is shown once.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="api_keys")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    access = models.CharField(max_length=8, choices=Access.choices)
    # A key handed to one end user's app: it may only name this participant.
    participant_id = models.CharField(max_length=200, null=True, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "project"], name="apikey_tenant_project")]

    def __str__(self) -> str:
        return f"mh_{self.prefix}… ({self.access})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


def _default_deleted_days() -> int | None:
    return settings.MEMORYHUB_RETENTION_DELETED_DAYS


def _default_expired_days() -> int | None:
    return settings.MEMORYHUB_RETENTION_EXPIRED_DAYS


def _default_unregistered_days() -> int | None:
    return settings.MEMORYHUB_RETENTION_UNREGISTERED_DAYS


class RetentionPolicy(models.Model):
    """How long a project keeps what no read sees any more, in days; empty keeps it forever.

    A project without a policy uses the MEMORYHUB_RETENTION_* settings. The retention
    purge (privacy.retention.retention_purge) reads it; project admins change it through
    `retention_policy_set`. Facts under legal hold are never purged, whatever it says.
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="retention_policy")
    deleted_facts_days = models.PositiveIntegerField(
        null=True, blank=True, default=_default_deleted_days,
        help_text="Days after a fact is deleted (or rejected) until it and its revisions are purged. Empty: keep forever.",
    )
    expired_facts_days = models.PositiveIntegerField(
        null=True, blank=True, default=_default_expired_days,
        help_text="Days after a fact's expiresAt until it and its revisions are purged. Empty: keep forever.",
    )
    unregistered_conversations_days = models.PositiveIntegerField(
        null=True, blank=True, default=_default_unregistered_days,
        help_text="Days after a conversation is unregistered until it and its messages are purged. Empty: keep forever.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    objects = ScopedManager()

    class Meta:
        verbose_name_plural = "retention policies"

    def __str__(self) -> str:
        return f"retention of {self.project}"
