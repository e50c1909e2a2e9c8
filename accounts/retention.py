"""A project's retention policy: how long it keeps what no read sees any more (privacy.retention purges by it)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from accounts.models import RetentionPolicy
from accounts.services import Principal
from core import policy, scoping
from core.errors import ValidationFailed

logger = logging.getLogger(__name__)

MAX_DAYS = 36_500
POLICY_FIELDS = ("deleted_facts_days", "expired_facts_days", "unregistered_conversations_days")


def retention_policy_for(*, project_id) -> dict:
    """The days a project keeps each kind of row (None: forever), its own policy or the defaults."""
    with scoping.scopes_disabled():
        policy = RetentionPolicy.objects.filter(project_id=project_id).first() if project_id else None
    if policy is None:
        return {
            "deleted_facts_days": settings.MEMORYHUB_RETENTION_DELETED_DAYS,
            "expired_facts_days": settings.MEMORYHUB_RETENTION_EXPIRED_DAYS,
            "unregistered_conversations_days": settings.MEMORYHUB_RETENTION_UNREGISTERED_DAYS,
        }
    return {name: getattr(policy, name) for name in POLICY_FIELDS}


def retention_policy_set(
    *, principal: Principal, project_id, deleted_facts_days: int | None, expired_facts_days: int | None,
    unregistered_conversations_days: int | None,
) -> RetentionPolicy:
    """Set a project's retention (project admins); None keeps that kind of row forever."""
    policy.require(principal, policy.Act.ADMIN, policy.Reach.PROJECT)
    project_id = principal.project_for(project_id)
    if project_id is None:
        raise ValidationFailed("A retention policy belongs to a project: name its projectId.", errors={"projectId": ["required"]})
    values = {
        "deleted_facts_days": deleted_facts_days,
        "expired_facts_days": expired_facts_days,
        "unregistered_conversations_days": unregistered_conversations_days,
    }
    errors = {
        name: [f"0 to {MAX_DAYS} days, or empty to keep forever"]
        for name, value in values.items()
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_DAYS)
    }
    if errors:
        raise ValidationFailed(f"{next(iter(errors))}: {next(iter(errors.values()))[0]}", errors=errors)
    with transaction.atomic():
        retention, _ = RetentionPolicy.objects.update_or_create(
            project_id=project_id, defaults=values | {"tenant_id": principal.tenant_id, "updated_by_id": principal.user_id},
        )
    logger.info("retention policy of project %s set by user %s: %s", project_id, principal.user_id, values)
    return retention


def retention_policy_read(*, principal: Principal) -> dict:
    """The principal's project's retention, its own or the defaults (any member may see it)."""
    policy.require(principal, policy.Act.READ, policy.Reach.PROJECT)
    return retention_policy_for(project_id=principal.project_id)
