"""The wire's shapes are its output serializers': the OpenAPI schema is made from them, and each
response is built by a `*_to_dict` function. Here every such dict is checked against its
serializer for every value the model's enums can take, so a status, reason or trust the
schema does not list fails the suite (the first round's `invalidationReason` omitted
`rejected`), and so does a field the dict has and the serializer does not, or the reverse.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.admin_views import KeySerializer, MemberSerializer, key_to_dict, member_to_dict
from accounts.models import Access, ApiKey, Membership, Role
from agent.conversation_views import ConversationOutSerializer, MessageOutSerializer, conversation_to_dict, message_to_dict
from agent.models import Conversation, Message, MessageRole
from approvals.models import Approval, ApprovalKind, ApprovalStatus
from approvals.serializers import ApprovalOutSerializer, approval_to_dict
from facts.models import Fact, FactRevision, InvalidationReason, Status, Trust
from facts.serializers import FactOrRevisionOutSerializer, FactOutSerializer, RevisionOutSerializer, fact_to_dict, revision_to_dict

NOW = timezone.now()
USER = {"id": "7", "kind": "user"}
AGENT = {"id": "acme.desk", "kind": "agent", "agentVersion": "3"}


def _fields(**values) -> dict:
    return {
        "tenant_id": uuid.uuid4(), "project_id": uuid.uuid4(), "type": "acme.note", "key": "k", "namespace": None,
        "participant_id": "end-7", "conversation_id": None, "version": 2, "content": {"text": "x"},
        "content_hash": "0" * 64, "size": 1, "embedding_model": None, "verified_by": None, "verified_at": None,
        "attributed_to": AGENT, "generated_by": {"runId": "r", "stepId": None, "toolCallId": "t"},
        "subjects": [{"kind": "participant", "id": "end-7"}], "references": [str(uuid.uuid4())],
        "valid_from": None, "valid_until": None, "expires_at": None,
    } | values


def _fact(status: str, trust: str, **values) -> Fact:
    return Fact(id=uuid.uuid4(), status=status, trust=trust, created_at=NOW, updated_at=NOW, **_fields(**values))


def _check(serializer_class, body: dict) -> None:
    serializer = serializer_class(data=body)
    assert serializer.is_valid(), (serializer.errors, body)
    declared = set(serializer_class().fields)
    assert set(body) <= declared, f"on the wire but not in the schema: {set(body) - declared}"
    required = {name for name, field in serializer_class().fields.items() if field.required}
    assert required <= set(body), f"in the schema but not on the wire: {required - set(body)}"


@pytest.mark.parametrize(("status", "trust"), list(itertools.product(Status.values, Trust.values)))
def test_every_fact_status_and_trust_is_on_the_schema(status, trust):
    expired = {"expires_at": NOW - timedelta(days=1)} if status == Status.EXPIRED else {}
    body = fact_to_dict(_fact(status, trust, **expired))
    _check(FactOutSerializer, body)
    _check(FactOrRevisionOutSerializer, body)


@pytest.mark.parametrize("reason", [*InvalidationReason.values, None])
def test_every_revision_invalidation_reason_is_on_the_schema(reason):
    fact = _fact(Status.ACTIVE, Trust.UNVERIFIED)
    revision = FactRevision(
        fact_id=fact.id, status=Status.DELETED if reason else Status.ACTIVE, trust=Trust.ASSERTED, recorded_at=NOW,
        superseded_at=NOW if reason else None, invalidation_reason=reason, invalidated_by=USER if reason else None,
        **_fields(),
    )
    body = revision_to_dict(revision, fact)
    _check(RevisionOutSerializer, body)
    _check(FactOrRevisionOutSerializer, body)


@pytest.mark.parametrize(("status", "kind"), list(itertools.product(ApprovalStatus.values, ApprovalKind.values)))
def test_every_approval_status_is_on_the_schema(status, kind):
    decided = status != ApprovalStatus.PENDING
    approval = Approval(
        id=uuid.uuid4(), kind=kind, status=status, fact=_fact(Status.PENDING, Trust.UNVERIFIED),
        reasons=[{"rule": "intent", "match": "never email", "start": 0, "end": 11}, {"rule": "wide-scope", "match": "tenant"}],
        requested_by=AGENT, origin={"conversationId": str(uuid.uuid4()), "runId": "r", "stepId": None, "toolCallId": "t"} if decided else None,
        decided_by=USER if decided else None, decided_at=NOW if decided else None,
        note="ok" if decided else None, created_at=NOW,
    )
    _check(ApprovalOutSerializer, approval_to_dict(approval))


@pytest.mark.parametrize(("role", "registered"), list(itertools.product(MessageRole.values, (True, False))))
def test_every_conversation_and_message_shape_is_on_the_schema(role, registered):
    conversation = Conversation(
        id=uuid.uuid4(), agent_slug="acme.desk", participant_id="end-7", segment=None, replay=False,
        unregistered_at=None if registered else NOW, project_id=uuid.uuid4(), created_at=NOW,
    )
    _check(ConversationOutSerializer, conversation_to_dict(conversation))
    message = Message(conversation_id=conversation.id, sequence=3, role=role, text="hello", external_id=None, user_id=7, created_at=NOW)
    _check(MessageOutSerializer, message_to_dict(message))


@pytest.mark.parametrize(("role", "access"), list(itertools.product(Role.values, Access.values)))
def test_every_member_and_key_shape_is_on_the_schema(role, access):
    user = get_user_model()(id=7, username="bob")
    membership = Membership(id=1, user=user, role=role, project_id=None, created_at=NOW)
    _check(MemberSerializer, member_to_dict(membership))
    key = ApiKey(id=uuid.uuid4(), prefix="abc", name="bot", user=user, access=access, participant_id=None,
                 project_id=uuid.uuid4(), created_at=NOW, last_used_at=None, revoked_at=None)
    _check(KeySerializer, key_to_dict(key))
