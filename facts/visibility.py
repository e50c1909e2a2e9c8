"""Which facts a read returns: the one definition, rendered for the ORM and for raw SQL.

A read returns a fact when
  1. it is of the reader's tenant, and of the key's project or tenant-wide (no project);
  2. it is live: active, not past `expires_at`, not past `valid_until` (at read time);
  3. core.policy lets the key read whom it is kept for (participant_sql / fact_condition).

The ORM's reads (facts.selectors, profiles, workspaces, markdown) take `live_q` and the
scoped manager (1); retrieval's raw SQL takes `read_sql`, which renders 1–3 with the same
names. tests/test_visibility.py checks, over every combination of status, expiry, validity,
project and participant and every kind of key, that both renderings select the same rows.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from core import policy
from facts.models import Status


def live_q(now: datetime | None = None) -> Q:
    """(2) as a Django condition."""
    now = now or timezone.now()
    return (
        Q(status=Status.ACTIVE)
        & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        & (Q(valid_until__isnull=True) | Q(valid_until__gt=now))
    )


def live_sql(alias: str = "f") -> list[str]:
    """(2) as SQL conditions on `alias` (a facts_fact row), read at the statement's now()."""
    return [
        f"{alias}.status = '{Status.ACTIVE.value}'",
        f"({alias}.expires_at IS NULL OR {alias}.expires_at > now())",
        f"({alias}.valid_until IS NULL OR {alias}.valid_until > now())",
    ]


def scope_sql(principal, params: dict, alias: str = "f") -> list[str]:
    """(1) as SQL: what core.scoping's manager adds to an ORM read of facts for this key."""
    params["tenant"] = principal.tenant_id
    conds = [f"{alias}.tenant_id = %(tenant)s"]
    if principal.project_id is not None:  # a project key: its project and the tenant-wide facts
        params["key_project"] = principal.project_id
        conds.append(f"({alias}.project_id = %(key_project)s OR {alias}.project_id IS NULL)")
    return conds


def read_sql(principal, params: dict, alias: str = "f") -> list[str]:
    """1–3 as SQL conditions: the facts a read by `principal` may return."""
    conds = scope_sql(principal, params, alias) + live_sql(alias)
    visible = policy.participant_sql(principal, f"{alias}.participant_id", params)
    return conds if visible == "TRUE" else conds + [visible]
