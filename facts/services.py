"""Writes to facts: write (with key slots), batch write, supersede, verify, delete.

Each function owns its transaction. Revisions are append-only: a change closes the
current revision (`superseded_at`, `invalidation_reason`) and inserts the next one; the
fact row is locked (`SELECT … FOR UPDATE`) for the change, so two racing writers are
serialised and the loser sees the new version (`409 version-conflict`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accounts.models import Role
from accounts.selectors import project_search_config
from accounts.services import Principal
from core import policy
from core.errors import ApplicationError, ParticipantNotAllowed, ValidationFailed, VersionConflict
from facts import hooks
from facts.content import content_hash, content_problems, name_problem
from facts.models import SLOT_HOLDING, Fact, FactFields, FactRevision, InvalidationReason, Status, Trust
from facts.selectors import fact_for_change, slot_filter, slot_value

UNSET: Any = object()  # a scope field the client did not send
MAX_BATCH = 1000
MAX_REFERENCES = 100
MAX_SUBJECTS = 50
SUBJECT_KINDS = {"participant", "user", "external"}


class FactNotActive(ApplicationError):
    status, code, title = 409, "fact-not-active", "Fact is not active"


class SlotChanged(ApplicationError):
    status, code, title = 409, "slot-changed", "The key's value changed"


@dataclass
class FactInput:
    """A fact as a client asks for it, before the server decides scope, trust and attribution."""

    type: str
    content: Any
    key: str | None = None
    namespace: str | None = None
    project_id: Any = UNSET
    participant_id: str | None = None
    conversation_id: Any = None
    subjects: list[dict] | None = None
    references: list[str] = field(default_factory=list)
    expires_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None


@dataclass
class Provenance:
    """Who writes and with what trust: from the credential, never from the body."""

    trust: str
    attributed_to: dict
    generated_by: dict | None = None
    status: str = Status.ACTIVE


def acting_user(principal: Principal) -> dict:
    """The person a change is recorded against ({id, kind: user})."""
    return {"id": str(principal.user_id), "kind": "user"}


def provenance_for(principal: Principal) -> Provenance:
    return Provenance(trust=Trust.ASSERTED, attributed_to=acting_user(principal))


# --- validation ---------------------------------------------------------------------------


@dataclass
class _Prepared:
    data: FactInput
    project_id: Any
    canonical: bytes
    text: str
    subjects: list[dict]
    references: list[str]
    embedding: list[float] | None = None  # made inside the request (retrieval.inline), else after commit
    embedding_model: str | None = None


def _prepare(principal: Principal, data: FactInput, prefix: str = "", *, gated: bool = False) -> tuple[_Prepared | None, dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}

    def err(name: str, message: str) -> None:
        errors.setdefault(prefix + name, []).append(message)

    if problem := name_problem(data.type, "type"):
        err("type", problem)
    if data.key is not None and (problem := name_problem(data.key, "key")):
        err("key", problem)
    if data.namespace is not None and (problem := name_problem(data.namespace, "namespace")):
        err("namespace", problem)
    problems, canonical, text = content_problems(data.content)
    for problem in problems:
        err("content", problem)
    if data.valid_from and data.valid_until and data.valid_until <= data.valid_from:
        err("validUntil", "validUntil must be after validFrom")
    if data.participant_id is not None and (not isinstance(data.participant_id, str) or not 1 <= len(data.participant_id) <= 200):
        err("scope.participantId", "participantId must be 1 to 200 characters")
    subjects = data.subjects
    if subjects is None:
        subjects = [{"kind": "participant", "id": data.participant_id}] if data.participant_id else []
    if len(subjects) > MAX_SUBJECTS:
        err("subjects", f"at most {MAX_SUBJECTS} subjects")
    for index, subject in enumerate(subjects):
        if subject.get("kind") not in SUBJECT_KINDS or not isinstance(subject.get("id"), str) or not subject["id"]:
            err(f"subjects[{index}]", "a subject is {kind: participant|user|external, id: non-empty string}")
    references = [str(ref) for ref in data.references]
    if len(references) > MAX_REFERENCES:
        err("references", f"at most {MAX_REFERENCES} references")
    if errors:
        return None, errors

    # Scope: decided from the credential; the body may only narrow it.
    if data.project_id is UNSET:
        project_id = principal.project_id
    elif data.project_id is None:
        project_id = None
    else:
        project_id = principal.project_for(data.project_id)
    participant_id = data.participant_id
    if principal.participant_id is not None and participant_id is None:
        participant_id = principal.participant_id  # a bound key writes for its participant only
        if data.subjects is None:
            subjects = [{"kind": "participant", "id": participant_id}]
    if project_id is None and (participant_id is not None or data.conversation_id is not None):
        err(prefix + "scope", "a tenant-wide fact names no participant or conversation; give a projectId")
        return None, errors
    if data.conversation_id is not None:
        participant_id = _conversation_participant(project_id, data.conversation_id, participant_id)
        if data.subjects is None:
            subjects = [{"kind": "participant", "id": participant_id}] if participant_id else []
    reach = policy.reach_of(principal, project_id=project_id, participant_id=participant_id)
    if gated and reach is policy.Reach.TENANT:
        reach = policy.Reach.PROJECT  # pending until an admin approves it (approving takes what writing would)
    policy.require(principal, policy.Act.WRITE, reach)
    data.participant_id = participant_id
    return _Prepared(data, project_id, canonical, text, [dict(s) for s in subjects], references), {}


def _conversation_participant(project_id, conversation_id, participant_id: str | None) -> str | None:
    """A fact kept in a conversation is kept for the conversation's participant, so it is read,
    exported and erased with what they said: it takes theirs when it names none, and may not
    name another. A conversation id that names no conversation (a caller's own) changes nothing."""
    conversation = hooks.conversation(conversation_id)  # agent's conversations sit above facts
    if conversation is None:
        return participant_id
    if conversation["project_id"] != project_id:
        raise ValidationFailed("scope.conversationId names a conversation of another project.",
                               errors={"scope.conversationId": ["another project's conversation"]})
    kept_for = conversation["participant_id"]
    if kept_for is None:
        return participant_id
    if participant_id is not None and participant_id != kept_for:
        raise ParticipantNotAllowed("scope.conversationId names a conversation kept for another participant.")
    return kept_for


def _check_references(principal: Principal, items: list[_Prepared], prefix_of) -> None:
    wanted = {ref for item in items for ref in item.references}
    if not wanted:
        return
    found = {
        (str(row[0]), row[1])
        for row in Fact.objects.filter(id__in=list(wanted)).values_list("id", "project_id")
    }
    by_id = {fid: project for fid, project in found}
    errors: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        for ref in item.references:
            if ref not in by_id or by_id[ref] != item.project_id:
                errors.setdefault(prefix_of(index) + "references", []).append(
                    f"{ref} is not a fact of the same project"
                )
    if errors:
        raise ValidationFailed(next(iter(errors.items()))[1][0], errors=errors)


# --- writing --------------------------------------------------------------------------------


def _later(previous: datetime | None) -> datetime:
    """Now, but strictly after `previous`, so revision intervals never overlap or invert."""
    now = timezone.now()
    if previous is not None and now <= previous:
        now = previous + timedelta(microseconds=1)
    return now


def _apply(fact: Fact, item: _Prepared, provenance: Provenance) -> None:
    data = item.data
    fact.type = data.type
    fact.key = data.key
    fact.namespace = data.namespace
    fact.content = data.content
    fact.content_hash = content_hash(item.canonical)
    fact.size = len(item.canonical)
    fact.text = item.text
    fact.trust = provenance.trust
    fact.status = provenance.status
    fact.attributed_to = provenance.attributed_to
    fact.generated_by = provenance.generated_by
    fact.subjects = item.subjects
    fact.references = item.references
    fact.valid_from = data.valid_from
    fact.valid_until = data.valid_until
    fact.expires_at = data.expires_at
    fact.verified_by = None
    fact.verified_at = None
    fact.search_config = project_search_config(item.project_id)
    fact.embedding = item.embedding
    fact.embedding_model = item.embedding_model


def _snapshot(fact: Fact, *, recorded_at: datetime, recorded_by: dict) -> FactRevision:
    revision = FactRevision(
        fact_id=fact.id, tenant_id=fact.tenant_id, project_id=fact.project_id, participant_id=fact.participant_id,
        conversation_id=fact.conversation_id, version=fact.version, recorded_at=recorded_at, recorded_by=recorded_by,
    )
    for name in _VERSIONED_FIELDS:
        setattr(revision, name, getattr(fact, name))
    return revision


_VERSIONED_FIELDS = [f.name for f in FactFields._meta.fields]


def _close_current(fact: Fact, *, at: datetime, reason: str, by: dict | None) -> None:
    closed = FactRevision.objects.filter(fact_id=fact.id, superseded_at__isnull=True).update(
        superseded_at=at, invalidation_reason=reason, invalidated_by=by
    )
    if closed != 1:
        raise RuntimeError(f"fact {fact.id} had {closed} current revisions")


def _next_revision(fact: Fact, *, recorded_by: dict, reason: str = InvalidationReason.SUPERSEDED) -> Fact:
    """Close the current revision of a locked fact and record its new state as the next one."""
    now = _later(fact.updated_at)
    _close_current(fact, at=now, reason=reason, by=recorded_by)
    fact.version += 1
    fact.updated_at = now
    fact.save()
    _snapshot(fact, recorded_at=now, recorded_by=recorded_by).save()
    return fact


def _slot_filter(tenant_id, item: _Prepared, status: str) -> dict:
    data = item.data
    return slot_filter(
        tenant_id=tenant_id, project_id=item.project_id, participant_id=data.participant_id,
        conversation_id=data.conversation_id, namespace=data.namespace, type=data.type, key=data.key, status=status,
    )


def _write_one(principal: Principal, item: _Prepared, provenance: Provenance) -> tuple[Fact, str]:
    """Insert the fact, or supersede the fact that holds its key slot in the same status: an
    active write replaces the slot's value, a pending one the value awaiting approval (the
    active value stays until that is approved: `fact_approve`)."""
    for attempt in range(3):
        if item.data.key is not None:
            holder = Fact.objects.select_for_update().filter(**_slot_filter(principal.tenant_id, item, provenance.status)).first()
            if holder is not None:
                _apply(holder, item, provenance)
                return _next_revision(holder, recorded_by=provenance.attributed_to), "superseded"
        now = timezone.now()
        fact = Fact(
            tenant_id=principal.tenant_id, project_id=item.project_id, participant_id=item.data.participant_id,
            conversation_id=item.data.conversation_id, version=1, created_at=now, updated_at=now,
        )
        _apply(fact, item, provenance)
        try:
            with transaction.atomic():
                fact.save(force_insert=True)
                _snapshot(fact, recorded_at=now, recorded_by=provenance.attributed_to).save()
            return fact, "created"
        except IntegrityError:
            # Another writer took the slot between our look and our insert: supersede theirs.
            if item.data.key is None or attempt == 2:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def revision_deletes_allowed():
    """Within this block (inside a transaction), fact revisions may be deleted: the retention
    purge and erasure. The database refuses any other delete of a revision (trigger
    facts_revision_append_only, migration facts 0009)."""
    if not connection.in_atomic_block:
        raise RuntimeError("revision_deletes_allowed() needs a transaction (transaction.atomic())")
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('memoryhub.revision_deletes', 'allowed', true)")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('memoryhub.revision_deletes', '', true)")


def _embed_after_commit(facts: list[Fact]) -> None:
    """Embeddings the write did not make itself are made after commit by a task."""
    missing = [str(fact.id) for fact in facts if fact.embedding_model is None]
    if missing:
        hooks.embed_later(missing)


def _embedded_now(texts: list[str], *, inline: bool = True):
    """The texts' embeddings if the provider answers within the budget (retrieval.inline), else None."""
    if not inline:
        return None
    return hooks.embed_now(texts)


def _embed_inline(items: list[_Prepared], *, inline: bool = True, embedded=None) -> None:
    """Give the items their embeddings before the write's transaction, if the provider
    answers within the budget (or the caller already asked it: `embedded`, with `model` and
    one vector per item); the rest are embedded after commit."""
    embedded = embedded if embedded is not None else _embedded_now([item.text for item in items], inline=inline)
    if embedded is not None:
        for item, vector in zip(items, embedded.vectors):
            item.embedding, item.embedding_model = vector, embedded.model


def fact_write(
    *, principal: Principal, data: FactInput, provenance: Provenance | None = None, embed_inline: bool = True,
    embedded=None,
) -> tuple[Fact, str]:
    """Write one fact; a key names a slot, and writing it again supersedes the live fact there.
    `embed_inline`: embed it inside the request within the budget (bulk imports say False);
    `embedded`: that embedding, when the caller asked for it already (`remember`, whose gate reads it)."""
    principal.require(Role.WRITER)
    provenance = provenance or provenance_for(principal)
    item, errors = _prepare(principal, data, gated=provenance.status == Status.PENDING)
    if errors:
        raise ValidationFailed(next(iter(errors.items()))[0] + ": " + next(iter(errors.values()))[0], errors=errors)
    _check_references(principal, [item], lambda i: "")
    _embed_inline([item], inline=embed_inline, embedded=embedded)
    with transaction.atomic():
        fact, outcome = _write_one(principal, item, provenance)
        _embed_after_commit([fact])
        return fact, outcome


def fact_write_batch(*, principal: Principal, items: list[FactInput]) -> list[Fact]:
    """Write up to 1,000 facts, all or nothing."""
    principal.require(Role.WRITER)
    if not 1 <= len(items) <= MAX_BATCH:
        raise ValidationFailed(f"facts must hold 1 to {MAX_BATCH} facts", errors={"facts": [f"1 to {MAX_BATCH} facts"]})
    prepared: list[_Prepared] = []
    errors: dict[str, list[str]] = {}
    for index, data in enumerate(items):
        item, item_errors = _prepare(principal, data, prefix=f"facts[{index}].")
        errors.update(item_errors)
        if item is not None:
            prepared.append(item)
    if errors:
        name, messages = next(iter(errors.items()))
        raise ValidationFailed(f"{name}: {messages[0]}", errors=errors)
    _check_references(principal, prepared, lambda i: f"facts[{i}].")
    _embed_inline(prepared)  # up to MEMORYHUB_EMBEDDINGS_INLINE_MAX facts; larger batches after commit
    provenance = provenance_for(principal)
    with transaction.atomic():
        keyless = [item for item in prepared if item.data.key is None]
        now = timezone.now()
        facts_by_item: dict[int, Fact] = {}
        new_facts = []
        for item in keyless:
            fact = Fact(
                tenant_id=principal.tenant_id, project_id=item.project_id, participant_id=item.data.participant_id,
                conversation_id=item.data.conversation_id, version=1, created_at=now, updated_at=now,
            )
            _apply(fact, item, provenance)
            facts_by_item[id(item)] = fact
            new_facts.append(fact)
        Fact.objects.bulk_create(new_facts)
        FactRevision.objects.bulk_create(
            [_snapshot(fact, recorded_at=now, recorded_by=provenance.attributed_to) for fact in new_facts]
        )
        for item in prepared:
            if item.data.key is not None:
                facts_by_item[id(item)] = _write_one(principal, item, provenance)[0]
        written = [facts_by_item[id(item)] for item in prepared]
        _embed_after_commit(list({fact.id: fact for fact in written}.values()))
        return written


def fact_supersede(*, principal: Principal, fact_id, content: Any, expect_version: int, embed_inline: bool = True) -> Fact:
    """The next revision of a fact with new content, if the client saw the current version."""
    principal.require(Role.WRITER)
    problems, canonical, text = content_problems(content)
    if problems:
        raise ValidationFailed(f"content: {problems[0]}", errors={"content": problems})
    embedded = _embedded_now([text], inline=embed_inline)
    with transaction.atomic():
        fact = fact_for_change(principal=principal, fact_id=fact_id)
        if fact.status not in SLOT_HOLDING:
            raise FactNotActive(f"The fact is {fact.status}; only active or pending facts change.")
        if fact.version != expect_version:
            raise VersionConflict(
                f"The fact is at version {fact.version}, not {expect_version}; read it again and retry.",
                extra={"currentVersion": fact.version},
            )
        fact.content = content
        fact.content_hash = content_hash(canonical)
        fact.size = len(canonical)
        fact.text = text
        fact.embedding = embedded.vectors[0] if embedded else None
        fact.embedding_model = embedded.model if embedded else None
        _next_revision(fact, recorded_by=acting_user(principal))
        _embed_after_commit([fact])
        return fact


def fact_verify(*, principal: Principal, fact_id) -> Fact:
    """A person vouches for the fact: trust `verified`, no expiry, as the next revision."""
    principal.require(Role.REVIEWER)
    with transaction.atomic():
        fact = fact_for_change(principal=principal, fact_id=fact_id, act=policy.Act.REVIEW)
        if fact.status not in SLOT_HOLDING:
            raise FactNotActive(f"The fact is {fact.status}; only active or pending facts can be verified.")
        if fact.trust == Trust.VERIFIED and fact.expires_at is None:
            return fact
        now = _later(fact.updated_at)
        fact.trust = Trust.VERIFIED
        fact.verified_by = str(principal.user_id)
        fact.verified_at = now
        fact.expires_at = None
        return _next_revision(fact, recorded_by=acting_user(principal))


def fact_delete(*, principal: Principal, fact_id, reason: str = InvalidationReason.DELETED) -> Fact:
    """End the fact: status `deleted`; its revisions stay until retention purges them."""
    principal.require(Role.WRITER)
    with transaction.atomic():
        fact = fact_for_change(principal=principal, fact_id=fact_id)
        if fact.status == Status.DELETED:
            return fact
        return _end(fact, status=Status.DELETED, reason=reason, by=acting_user(principal))


def _end(fact: Fact, *, status: str, reason: str, by: dict) -> Fact:
    """Close a locked fact's current revision and give the fact its final status."""
    now = _later(fact.updated_at)
    _close_current(fact, at=now, reason=reason, by=by)
    fact.status = status
    fact.updated_at = now
    fact.save(update_fields=["status", "updated_at"])
    return fact


def _pending_for_decision(principal: Principal, fact_id, verb: str) -> Fact:
    """The pending fact a reviewer decides on, locked (the caller owns the transaction)."""
    principal.require(Role.REVIEWER)
    fact = fact_for_change(principal=principal, fact_id=fact_id, act=policy.Act.REVIEW)
    if fact.status != Status.PENDING:
        raise FactNotActive(f"The fact is {fact.status}; only pending facts are {verb}.")
    return fact


def fact_approve(*, principal: Principal, fact_id) -> Fact:
    """A pending fact becomes active, as its next revision (reviewer or admin).

    A keyed fact takes its slot: the active value there (if any) is ended as superseded —
    its last revision closes with reason `superseded`, invalidated by the approver, and the
    fact's status becomes `deleted` — so the slot keeps one live value and both histories
    stay readable (`slot_value` shows reviewers what approving would replace).
    """
    with transaction.atomic():
        fact = _pending_for_decision(principal, fact_id, "approved")
        replaced = slot_value(fact=fact, lock=True)
        if replaced is not None:
            _end(replaced, status=Status.DELETED, reason=InvalidationReason.SUPERSEDED, by=acting_user(principal))
        fact.status = Status.ACTIVE
        try:
            with transaction.atomic():
                return _next_revision(fact, recorded_by=acting_user(principal))
        except IntegrityError:  # a writer filled the empty slot meanwhile: nothing is changed
            raise SlotChanged("The key's value was written while approving; nothing changed. Approve again to replace it.") from None


def fact_reject(*, principal: Principal, fact_id) -> Fact:
    """A pending fact is rejected: no read ever sees it (reviewer or admin)."""
    with transaction.atomic():
        fact = _pending_for_decision(principal, fact_id, "rejected")
        return _end(fact, status=Status.REJECTED, reason=InvalidationReason.REJECTED, by=acting_user(principal))
