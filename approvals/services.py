"""Writes to approvals: ask for one, grant it, reject it.

`approval_request` runs inside the caller's transaction, right after the caller wrote the
fact with status `pending` (the agents' `remember` tool does). `approval_grant` and
`approval_reject` own their transaction and call the facts services, so the fact and its
approval change together: approved, the fact becomes active as its next revision;
rejected, it is ended and no read ever sees it.

Locks are taken fact first, then approval — the order `approval_request` takes them in
(the fact was locked or inserted by the write before it) — so a decision racing a new
request for the same fact waits instead of deadlocking.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts.models import Role
from accounts.services import Principal
from approvals.models import Approval, ApprovalKind, ApprovalStatus
from approvals.selectors import approval_get
from core.errors import ApplicationError, ValidationFailed
from facts.models import Fact, Status as FactStatus
from facts.selectors import fact_for_change
from facts.services import acting_user, fact_approve, fact_reject

MAX_NOTE = 2000


class ApprovalDecided(ApplicationError):
    status, code, title = 409, "approval-decided", "Approval already decided"


def approval_request(*, fact: Fact, reasons: list[dict], requested_by: dict, origin: dict | None = None) -> Approval:
    """Ask a person to approve a pending fact; asking again for the same fact replaces the open request.

    Call it in the transaction that wrote the fact, inside the fact's tenant scope. A
    second request while one is open (an agent remembering the same key again: the slot's
    pending fact took the new value as its next revision) closes the open approval as
    `superseded` — decided by the requester, its note naming the new approval — and opens a
    new one, so one question stays open per slot, the older one stays in the fact's
    history, and a reviewer who read the old value cannot approve the new one unseen.
    """
    if fact.status != FactStatus.PENDING:
        raise ValueError(f"approval_request needs a pending fact; fact {fact.id} is {fact.status}")
    with transaction.atomic():
        older = Approval.objects.select_for_update().filter(fact_id=fact.id, status=ApprovalStatus.PENDING).first()
        if older is not None:
            older.status = ApprovalStatus.SUPERSEDED
            older.decided_by = dict(requested_by)
            older.decided_at = timezone.now()
            older.save(update_fields=["status", "decided_by", "decided_at"])
        approval = Approval.objects.create(
            tenant_id=fact.tenant_id,
            project_id=fact.project_id,
            kind=ApprovalKind.MEMORY_FACT,
            fact=fact,
            reasons=[dict(reason) for reason in reasons],
            status=ApprovalStatus.PENDING,
            requested_by=dict(requested_by),
            origin=dict(origin) if origin else None,
            created_at=timezone.now(),
        )
        if older is not None:
            older.note = f"Superseded by approval {approval.id}: a newer value for the same key (fact version {fact.version})."
            older.save(update_fields=["note"])
        approval.fact = fact
        return approval


def approval_grant(*, principal: Principal, approval_id, note: str | None = None) -> Approval:
    """Approve: the fact becomes active (its next revision) and every read sees it (reviewer or admin)."""
    return _decide(principal=principal, approval_id=approval_id, note=note, grant=True)


def approval_reject(*, principal: Principal, approval_id, note: str | None = None) -> Approval:
    """Reject: the fact is ended (status `rejected`) and no read ever sees it (reviewer or admin)."""
    return _decide(principal=principal, approval_id=approval_id, note=note, grant=False)


def _clean_note(note: str | None) -> str | None:
    if note is None:
        return None
    if not isinstance(note, str):
        raise ValidationFailed("note must be text.", errors={"note": ["text"]})
    if len(note) > MAX_NOTE:
        raise ValidationFailed(f"note is at most {MAX_NOTE} characters.", errors={"note": [f"at most {MAX_NOTE} characters"]})
    return note or None


def _decide(*, principal: Principal, approval_id, note: str | None, grant: bool) -> Approval:
    principal.require(Role.REVIEWER)
    note = _clean_note(note)
    with transaction.atomic():
        found = approval_get(principal=principal, approval_id=approval_id)  # 404 outside what the key sees
        fact = fact_for_change(principal=principal, fact_id=found.fact_id)  # lock the fact first
        approval = Approval.objects.select_for_update(of=("self",)).get(pk=found.pk)
        if approval.status != ApprovalStatus.PENDING:
            raise ApprovalDecided(
                f"The approval was already {approval.status}"
                + (f" at {approval.decided_at.isoformat()}" if approval.decided_at else "")
                + "; a decision is made once."
                + (f" {approval.note}" if approval.status == ApprovalStatus.SUPERSEDED and approval.note else "")
            )
        if grant:
            fact = fact_approve(principal=principal, fact_id=fact.id)  # 409 if the fact is no longer pending
        elif fact.status == FactStatus.PENDING:
            fact = fact_reject(principal=principal, fact_id=fact.id)
        # else: the fact was deleted or rewritten meanwhile; rejecting closes the question and leaves it be.
        approval.status = ApprovalStatus.APPROVED if grant else ApprovalStatus.REJECTED
        approval.decided_by = acting_user(principal)
        approval.decided_at = timezone.now()
        approval.note = note
        approval.save(update_fields=["status", "decided_by", "decided_at", "note"])
        approval.fact = fact
        return approval
