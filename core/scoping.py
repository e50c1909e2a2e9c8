"""Tenant scoping that a read cannot forget.

Every tenant-owned model uses `ScopedManager`. Its queryset refuses to run unless a
scope is active: either the request's (set by API-key authentication) or one entered
explicitly with `scope(...)`. The active scope's tenant and projects become conditions
in the SQL of every query, so a selector that forgets to filter still cannot read
another tenant's rows. Jobs that really span tenants say so with `scopes_disabled()`.

We follow django-scopes' idea, but need one thing it cannot express: a project key
also sees its tenant's tenant-wide rows (project NULL) when the model allows them.
"""

from __future__ import annotations

import contextlib
import uuid
from contextvars import ContextVar
from dataclasses import dataclass

from django.db import models


class ScopeError(RuntimeError):
    """A scoped model was queried with no scope active."""


@dataclass(frozen=True)
class Scope:
    """What the current request (or job) may see: one tenant, optionally one project."""

    tenant_id: uuid.UUID | None
    project_id: uuid.UUID | None = None  # None: every project of the tenant
    enabled: bool = True


_DISABLED = Scope(tenant_id=None, enabled=False)
_current: ContextVar[Scope | None] = ContextVar("memoryhub_scope", default=None)


@contextlib.contextmanager
def scope(*, tenant_id, project_id=None):
    token = _current.set(Scope(tenant_id=tenant_id, project_id=project_id))
    try:
        yield
    finally:
        _current.reset(token)


@contextlib.contextmanager
def scopes_disabled():
    token = _current.set(_DISABLED)
    try:
        yield
    finally:
        _current.reset(token)


def activate(value: Scope | None):
    """Set the scope for the rest of this context (used by authentication); returns a token."""
    return _current.set(value)


def deactivate(token) -> None:
    _current.reset(token)


def current_scope() -> Scope | None:
    return _current.get()


class ScopedQuerySet(models.QuerySet):
    pass


class ScopedManager(models.Manager.from_queryset(ScopedQuerySet)):
    """Filters by the active scope; raises `ScopeError` when none is active.

    `tenant_field` and `project_field` name the columns; `tenant_wide_rows` says whether
    rows with no project belong to every project of their tenant.
    """

    def __init__(self, *, tenant_field: str = "tenant_id", project_field: str | None = "project_id", tenant_wide_rows: bool = False):
        super().__init__()
        self.tenant_field = tenant_field
        self.project_field = project_field
        self.tenant_wide_rows = tenant_wide_rows

    def get_queryset(self):
        active = _current.get()
        if active is None:
            raise ScopeError(
                f"{self.model.__name__} was queried with no tenant scope active; "
                "wrap the code in core.scoping.scope(...) or scopes_disabled()."
            )
        queryset = super().get_queryset()
        if not active.enabled:
            return queryset
        queryset = queryset.filter(**{self.tenant_field: active.tenant_id})
        if self.project_field and active.project_id is not None:
            condition = models.Q(**{self.project_field: active.project_id})
            if self.tenant_wide_rows:
                condition |= models.Q(**{f"{self.project_field}__isnull": True})
            queryset = queryset.filter(condition)
        return queryset
