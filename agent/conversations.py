"""Conversations and their messages: services and selectors (views, the CLI and agents call these).

The participant rule is the facts' one: naming an end user takes a key bound to them or
write access; a participant-bound key sees and changes only its participant's
conversations; a read key sees only conversations kept for no participant. Another
project's or tenant's conversation is simply not there (404): the scoped manager puts
tenant and key project into every query's SQL.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Role
from accounts.selectors import project_search_config
from accounts.services import Principal
from agent.models import Agent, Conversation, Message, MessageRole
from core import policy
from core.errors import Conflict, NotFound, ValidationFailed
from core.policy import Act
from core.tasks import enqueue_on_commit
from core.times import parse_time

SEGMENT_PATTERN = re.compile(r"^[A-Za-z0-9._:@+-]+(/[A-Za-z0-9._:@+-]+)*$")
MAX_SEGMENT = 500
MAX_MESSAGES_PER_CALL = 1000
MAX_MESSAGE_TEXT = 100_000


class ConversationUnregistered(Conflict):
    code, title = "conversation-unregistered", "Conversation unregistered"


def validate_segment(segment: Any, field: str = "segment") -> str | None:
    """A segment path such as `acme/customers/c-42`: parts of letters, digits and . _ : @ + -."""
    if segment is None or segment == "":
        return None
    if not isinstance(segment, str) or len(segment) > MAX_SEGMENT or not SEGMENT_PATTERN.fullmatch(segment):
        raise ValidationFailed(
            f"{field} must be a path such as acme/customers/c-42: parts of letters, digits and . _ : @ + -, "
            f"separated by single slashes, at most {MAX_SEGMENT} characters",
            errors={field: ["e.g. acme/customers/c-42"]},
        )
    return segment


def conversations_visible(*, principal: Principal, act: Act = Act.READ) -> QuerySet[Conversation]:
    """The conversations the principal may `act` on (core.policy); tenant and key project
    come from the scoped manager. Their messages follow them."""
    return Conversation.objects.filter(policy.participant_q(principal, act=act, unattributed=True))


def conversation_get(*, principal: Principal, conversation_id) -> Conversation:
    conversation = conversations_visible(principal=principal).filter(id=conversation_id).first()
    if conversation is None:
        raise NotFound("No such conversation here.")
    return conversation


def conversation_find(*, principal: Principal, conversation_id) -> Conversation | None:
    """The run's conversation if the id names one the principal may see; None otherwise (a free id)."""
    if not conversation_id:
        return None
    try:
        conversation_id = uuid.UUID(str(conversation_id))
    except ValueError:
        return None
    return conversations_visible(principal=principal).filter(id=conversation_id).first()


@dataclass
class ConversationInput:
    agent: str
    participant_id: str | None = None
    segment: str | None = None
    replay: bool = False
    project_id: Any = None


def conversation_create(*, principal: Principal, data: ConversationInput) -> Conversation:
    principal.require(Role.WRITER)
    project_id = principal.project_for(data.project_id)
    if project_id is None:
        raise ValidationFailed("Conversations live in a project: this is a tenant key, so name the projectId.", errors={"projectId": ["required with a tenant key"]})
    participant_id = data.participant_id or principal.participant_id
    principal.require_participant(participant_id, act=Act.WRITE)
    segment = validate_segment(data.segment)
    if not Agent.objects.filter(project_id=project_id, slug=data.agent).exists():
        raise ValidationFailed("No such agent in this project; POST /v1/agents declares one.", errors={"agent": ["no such agent here"]})
    return Conversation.objects.create(
        tenant_id=principal.tenant_id, project_id=project_id, agent_slug=data.agent, participant_id=participant_id,
        segment=segment, replay=bool(data.replay), user_id=principal.user_id,
    )


def conversation_unregister(*, principal: Principal, conversation_id) -> Conversation:
    """Unregister: the conversation and its messages stay readable, and are never recalled again."""
    principal.require(Role.WRITER)
    with transaction.atomic():
        conversation = conversations_visible(principal=principal, act=Act.WRITE).select_for_update().filter(id=conversation_id).first()
        if conversation is None:
            raise NotFound("No such conversation here.")
        if conversation.unregistered_at is None:
            conversation.unregistered_at = timezone.now()
            conversation.save(update_fields=["unregistered_at"])
    return conversation


def _message_items(raw: Any) -> list[dict]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_MESSAGES_PER_CALL:
        raise ValidationFailed(f"messages must be a list of 1 to {MAX_MESSAGES_PER_CALL} messages", errors={"messages": [f"1 to {MAX_MESSAGES_PER_CALL} messages"]})
    items = []
    roles = [choice.value for choice in MessageRole]
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise ValidationFailed(f"{where} must be an object {{role, text, externalId?, createdAt?}}", errors={where: ["an object"]})
        if unknown := sorted(set(item) - {"role", "text", "externalId", "createdAt"}):
            raise ValidationFailed(f"{where}.{unknown[0]} is not a message field", errors={f"{where}.{name}": ["unknown field"] for name in unknown})
        role = item.get("role")
        if role not in roles:
            raise ValidationFailed(f"{where}.role must be user, agent or tool", errors={f"{where}.role": ["user, agent or tool"]})
        text = item.get("text")
        if not isinstance(text, str) or len(text) > MAX_MESSAGE_TEXT:
            raise ValidationFailed(f"{where}.text must be text of at most {MAX_MESSAGE_TEXT:,} characters", errors={f"{where}.text": ["text"]})
        external_id = item.get("externalId")
        if external_id is not None and (not isinstance(external_id, str) or not 1 <= len(external_id) <= 200):
            raise ValidationFailed(f"{where}.externalId must be 1 to 200 characters", errors={f"{where}.externalId": ["1 to 200 characters"]})
        created_at = item.get("createdAt")
        if created_at is not None:
            parsed = parse_time(created_at)
            if parsed is None:
                raise ValidationFailed(f"{where}.createdAt must be an ISO 8601 time with a zone", errors={f"{where}.createdAt": ["ISO 8601 with zone"]})
            created_at = parsed
        items.append({"role": role, "text": text, "external_id": external_id, "created_at": created_at})
    return items


def messages_append(*, principal: Principal, conversation_id, messages: Any) -> list[Message]:
    """Append messages in order, numbered on from the conversation's last; embedded after commit.

    The conversation row is locked while numbering, so concurrent appends interleave whole
    and never share a sequence number. An `Idempotency-Key` on the call makes a retry
    append nothing (the API's idempotency protocol replays the first answer).
    """
    principal.require(Role.WRITER)
    items = _message_items(messages)
    with transaction.atomic():
        conversation = conversations_visible(principal=principal, act=Act.WRITE).select_for_update().filter(id=conversation_id).first()
        if conversation is None:
            raise NotFound("No such conversation here.")
        if conversation.unregistered_at is not None:
            raise ConversationUnregistered("This conversation is unregistered: it takes no more messages.")
        now = timezone.now()
        config = project_search_config(conversation.project_id)
        start = conversation.next_sequence
        rows = [
            Message(
                tenant_id=conversation.tenant_id, project_id=conversation.project_id, conversation=conversation,
                sequence=start + offset, role=item["role"], text=item["text"], external_id=item["external_id"],
                user_id=principal.user_id, created_at=item["created_at"] or now, search_config=config,
            )
            for offset, item in enumerate(items)
        ]
        created = Message.objects.bulk_create(rows)
        conversation.next_sequence = start + len(rows)
        conversation.save(update_fields=["next_sequence"])
        indexed = [str(m.id) for m in created if m.role != MessageRole.TOOL]
        if indexed:
            from retrieval.tasks import embed_messages

            enqueue_on_commit(embed_messages, indexed)
    return created


def messages_list(*, principal: Principal, conversation_id) -> tuple[Conversation, QuerySet[Message]]:
    """The conversation's messages, oldest first (by sequence)."""
    conversation = conversation_get(principal=principal, conversation_id=conversation_id)
    return conversation, Message.objects.filter(conversation_id=conversation.id).order_by("sequence")
