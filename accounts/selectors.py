"""Tenancy reads: the search configuration hot paths need (cached briefly per process), and the
projects, members and keys the dashboard lists."""

from __future__ import annotations

import time

from django.db.models import Q

from accounts.models import ROLE_RANK, ApiKey, Membership, Project, Role

_CONFIG_TTL = 60.0
_configs: dict = {}


def project_search_config(project_id) -> str:
    """The project's text search configuration (cached a minute per process)."""
    if project_id is None:
        return "english"
    cached = _configs.get(project_id)
    now = time.monotonic()
    if cached and cached[1] > now:
        return cached[0]
    config = Project.objects.filter(id=project_id).values_list("text_search_config", flat=True).first() or "english"
    _configs[project_id] = (config, now + _CONFIG_TTL)
    return config


def projects_for_user(*, user_id: int) -> list[tuple[Project, str]]:
    """Every project a person has a role in, with their highest role there, by tenant and slug.

    A tenant-wide membership gives a role in each of the tenant's projects; a project
    membership in that one. What the dashboard's project switcher offers.
    """
    best: dict = {}
    memberships = Membership.objects.filter(user_id=user_id).select_related("tenant", "project__tenant")
    tenant_roles = {m.tenant_id: m.role for m in memberships if m.project_id is None}
    projects = Project.objects.filter(tenant_id__in=list(tenant_roles)).select_related("tenant")
    for project in projects:
        best[project.id] = (project, tenant_roles[project.tenant_id])
    for membership in memberships:
        if membership.project_id is None:
            continue
        current = best.get(membership.project_id)
        if current is None or ROLE_RANK[Role(membership.role)] > ROLE_RANK[Role(current[1])]:
            best[membership.project_id] = (membership.project, membership.role)
    return sorted(best.values(), key=lambda pair: (pair[0].tenant.slug, pair[0].slug))


def members_list(*, tenant_id, project_id):
    """The memberships that give someone a role in a project: the tenant-wide ones and the project's own."""
    return (
        Membership.objects.filter(Q(project__isnull=True) | Q(project_id=project_id), tenant_id=tenant_id)
        .select_related("user", "project")
        .order_by("user__username", "project_id")
    )


def apikeys_list(*, tenant_id, project_id):
    """A project's API keys, newest first, revoked ones too (their hashes are never read out)."""
    return ApiKey.objects.filter(tenant_id=tenant_id, project_id=project_id).select_related("user").order_by("-created_at")
