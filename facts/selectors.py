"""Reads of facts. Every queryset starts from the scoped manager (tenant and project in
its SQL) and narrows to what the principal may see; nothing is filtered after the fact."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.services import Principal
from core import policy
from core.errors import NotFound
from core.policy import Act
from facts import visibility
from facts.models import Fact, FactRevision, Status


def facts_visible(*, principal: Principal, act: Act = Act.READ) -> QuerySet[Fact]:
    """Every fact (any status) the principal may `act` on, as core.policy's table says.

    Reading facts kept for participants takes write access (the participant rule). A
    participant-bound key reads its participant's facts and those kept for no one in
    particular (the project's and the tenant's), and changes only its participant's; a read
    key sees only the facts kept for no participant; what waits for approval, or was
    refused, is seen by those who may review it.
    """
    return Fact.objects.filter(policy.fact_condition(principal, act))


def slot_filter(*, tenant_id, project_id, participant_id, conversation_id, namespace, type: str, key: str, status: str) -> dict:
    """The fact of one key slot in one status (active: its value; pending: the value awaiting approval)."""
    return {
        "tenant_id": tenant_id, "project_id": project_id, "participant_id": participant_id,
        "conversation_id": conversation_id, "namespace": namespace, "type": type, "key": key, "status": status,
    }


def slot_value(*, fact: Fact, lock: bool = False) -> Fact | None:
    """The active fact holding `fact`'s key slot, other than `fact` (None for a keyless fact):
    for a pending fact, the value approving it would replace."""
    if fact.key is None:
        return None
    queryset = Fact.objects.select_for_update() if lock else Fact.objects
    return queryset.filter(**slot_filter(
        tenant_id=fact.tenant_id, project_id=fact.project_id, participant_id=fact.participant_id,
        conversation_id=fact.conversation_id, namespace=fact.namespace, type=fact.type, key=fact.key, status=Status.ACTIVE,
    )).exclude(id=fact.id).first()


live_condition = visibility.live_q  # facts a read may return (facts.visibility)


def expired_condition(now: datetime | None = None) -> Q:
    now = now or timezone.now()
    return Q(status=Status.EXPIRED) | Q(status=Status.ACTIVE) & (Q(expires_at__lte=now) | Q(valid_until__lte=now))


def facts_list(*, principal: Principal, status: str = Status.ACTIVE) -> QuerySet[Fact]:
    """The facts a list shows for a status; `active` means live at this moment."""
    queryset = facts_visible(principal=principal)
    if status == Status.ACTIVE:
        return queryset.filter(live_condition())
    if status == Status.EXPIRED:
        return queryset.filter(expired_condition())
    return queryset.filter(status=status)


def effective_status(fact: Fact | FactRevision, now: datetime | None = None) -> str:
    now = now or timezone.now()
    if fact.status == Status.ACTIVE and (
        (fact.expires_at is not None and fact.expires_at <= now) or (fact.valid_until is not None and fact.valid_until <= now)
    ):
        return Status.EXPIRED
    return fact.status


def fact_get(*, principal: Principal, fact_id) -> Fact:
    fact = facts_visible(principal=principal).filter(id=fact_id).first()
    if fact is None:
        raise NotFound("No such fact here.")
    return fact


def fact_for_change(*, principal: Principal, fact_id, act: Act = Act.WRITE) -> Fact:
    """The fact, locked for the rest of the transaction (the caller owns it); 404 when the
    principal cannot see it, 403 when it may see it but not `act` on it (core.policy)."""
    fact = facts_visible(principal=principal).select_for_update().filter(id=fact_id).first()
    if fact is None:
        raise NotFound("No such fact here.")
    policy.require_object(principal, act, project_id=fact.project_id, participant_id=fact.participant_id)
    return fact


def fact_revisions(*, principal: Principal, fact_id) -> tuple[Fact, list[FactRevision]]:
    fact = fact_get(principal=principal, fact_id=fact_id)
    return fact, list(FactRevision.objects.filter(fact_id=fact.id).order_by("version"))


def fact_revision(*, principal: Principal, fact_id, version: int) -> tuple[Fact, FactRevision]:
    fact = fact_get(principal=principal, fact_id=fact_id)
    revision = FactRevision.objects.filter(fact_id=fact.id, version=version).first()
    if revision is None:
        raise NotFound(f"The fact has no revision {version} (it is at version {fact.version}).")
    return fact, revision


def fact_as_of(*, principal: Principal, fact_id, at: datetime) -> tuple[Fact, FactRevision]:
    """The revision that was current at `at` (also before a later delete)."""
    fact = fact_get(principal=principal, fact_id=fact_id)
    revision = (
        FactRevision.objects.filter(fact_id=fact.id, recorded_at__lte=at)
        .filter(Q(superseded_at__isnull=True) | Q(superseded_at__gt=at))
        .first()
    )
    if revision is None:
        raise NotFound(f"The fact had no current revision at {at.isoformat()}.")
    return fact, revision
