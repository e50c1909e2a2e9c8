"""Reads of approvals: reviewers and admins only, and only of facts the key may see.

Every queryset starts from the scoped manager (tenant and project in its SQL) and keeps
the approvals whose fact the principal may review (facts.selectors.facts_visible), so a
participant-bound key sees only its participant's questions, as with facts.
"""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet

from accounts.models import Role
from accounts.services import Principal
from approvals.models import Approval, ApprovalStatus
from core import scoping
from core.errors import NotFound, ValidationFailed
from core.policy import Act
from facts.models import Fact, Status as FactStatus
from facts.selectors import facts_visible, slot_filter


def approvals_visible(*, principal: Principal, vectors: bool = False) -> QuerySet[Approval]:
    """Every approval the principal may see; 403 below reviewer. With `vectors`, each fact's
    embedding comes along: the gate reads it when it asks again for a reviewer's view
    (approvals.gate.approval_current_reasons), which would otherwise fetch it row by row."""
    principal.require(Role.REVIEWER)
    large = ("fact__search_vector",) if vectors else ("fact__embedding", "fact__search_vector")
    return (
        Approval.objects.filter(fact__in=facts_visible(principal=principal, act=Act.REVIEW).values("id"))
        .select_related("fact")
        .defer(*large)  # shown nowhere
    )


def approvals_list(*, principal: Principal, status: str | None = ApprovalStatus.PENDING, vectors: bool = False) -> QuerySet[Approval]:
    """The approvals in one status (all with None). The pending queue shows only questions
    still open: a fact deleted or rewritten meanwhile has nothing left to approve."""
    queryset = approvals_visible(principal=principal, vectors=vectors)
    if status is None:
        return queryset
    if status not in ApprovalStatus.values:
        allowed = ", ".join(ApprovalStatus.values)
        raise ValidationFailed(f"status must be one of {allowed}.", errors={"status": [f"one of {allowed}"]})
    queryset = queryset.filter(status=status)
    if status == ApprovalStatus.PENDING:
        queryset = queryset.filter(fact__status=FactStatus.PENDING)
    return queryset


def approval_get(*, principal: Principal, approval_id) -> Approval:
    """One approval; 404 when it is another tenant's or project's, or of a fact the key can't see."""
    try:
        approval_id = uuid.UUID(str(approval_id))
    except ValueError:
        raise NotFound("No such approval here.") from None
    approval = approvals_visible(principal=principal).filter(id=approval_id).first()
    if approval is None:
        raise NotFound("No such approval here.")
    return approval


def approvals_replacing(*, approvals: list[Approval]) -> dict:
    """{approval id: the slot value approving it would end}, for a page of approvals in one
    query (`approval_replaces` for many)."""
    waiting = [a for a in approvals if a.status == ApprovalStatus.PENDING and a.fact.status == FactStatus.PENDING and a.fact.key]
    if not waiting:
        return {}
    condition = Q()
    for approval in waiting:
        condition |= Q(**slot_filter(**_slot_of(approval.fact)))
    slots = {}
    with scoping.scopes_disabled():  # each condition names its tenant: the approvals' own
        for fact in Fact.objects.filter(condition).defer("embedding", "search_vector"):
            slots[tuple(_slot_of(fact).values())] = fact
    found = {}
    for approval in waiting:
        value = slots.get(tuple(_slot_of(approval.fact).values()))
        if value is not None and value.id != approval.fact_id:
            found[approval.id] = value
    return found


def _slot_of(fact: Fact) -> dict:
    return {
        "tenant_id": fact.tenant_id, "project_id": fact.project_id, "participant_id": fact.participant_id,
        "conversation_id": fact.conversation_id, "namespace": fact.namespace, "type": fact.type, "key": fact.key,
        "status": FactStatus.ACTIVE,
    }


def approval_replaces(*, approval: Approval) -> Fact | None:
    """The active value of the key slot that approving would end (None: a keyless fact, an
    empty slot, or a question already closed). The slot is the pending fact's own scope, so
    whoever may review the fact may see its value."""
    return approvals_replacing(approvals=[approval]).get(approval.id)
