"""Export and erasure by person: everything memoryhub keeps for one participant.

A participant's data, within what the key sees (its project, or its whole tenant):

- the facts kept for them (`participantId`), every revision of those facts, their
  embeddings, the approvals and remember-call records of those facts;
- the facts kept for no participant that name them as a subject
  (`{"kind": "participant", "id": …}`) or belong to one of their conversations;
- their conversations and every message in them;
- the working memory a key bound to them kept besides its entries (which are facts kept
  for them): task lists and reported tool calls;
- stored idempotency responses that carry any of it: every response to a key bound to
  them, and any response that names one of the erased facts or conversations, or their
  participant id (responses are searched as bytes, in PostgreSQL);
- cached query embeddings (Redis when configured) of their texts.

Facts kept for another participant are that participant's and are never touched, even
when they mention this one. Erasure removes a fact under legal hold too (the hold stops
retention purges, not a person's erasure request). API keys bound to the participant
are credentials of the customer's app and stay; revoke them separately if wanted.

Both calls take an admin (the key's role capped by its access) and obey the participant
rule: a key bound to one participant may only name that one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import ApiKey, Role
from accounts.services import Principal, check_participant_id
from agent.models import Conversation, Message, MessageRole
from approvals.models import Approval
from core import policy
from core.models import IdempotencyRecord
from facts.models import Fact, FactRevision, ToolCall, Workspace
from privacy.deletion import conversations_hard_delete, facts_hard_delete
from retrieval.embeddings import get_embedder, query_cache_key

logger = logging.getLogger(__name__)

_UUID_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_CACHE_CHUNK = 500


def _authorize(principal: Principal, participant_id: str) -> None:
    check_participant_id(participant_id)
    principal.require(Role.ADMIN)
    principal.require_participant(participant_id, act=policy.Act.ADMIN)


def _conversations(participant_id: str) -> QuerySet[Conversation]:
    return Conversation.objects.filter(participant_id=participant_id)


def _facts(participant_id: str, conversation_ids: list) -> QuerySet[Fact]:
    about_them = Q(subjects__contains=[{"kind": "participant", "id": participant_id}])
    if conversation_ids:
        about_them |= Q(conversation_id__in=conversation_ids)
    return Fact.objects.filter(Q(participant_id=participant_id) | Q(participant_id__isnull=True) & about_them)


# --- export ----------------------------------------------------------------------------------


@dataclass
class ParticipantData:
    """Everything kept for one participant, as the export shows it."""

    exported_at: datetime
    facts: list[Fact]
    revisions: dict = field(default_factory=dict)  # fact id -> [FactRevision], oldest first
    conversations: list[Conversation] = field(default_factory=list)
    messages: dict = field(default_factory=dict)  # conversation id -> [Message], in order
    approvals: list[Approval] = field(default_factory=list)
    workspaces: list[Workspace] = field(default_factory=list)  # task lists, by namespace
    tool_calls: list[ToolCall] = field(default_factory=list)


def participant_data(*, principal: Principal, participant_id: str) -> ParticipantData:
    """Everything kept for the participant that the key can see (admins only)."""
    _authorize(principal, participant_id)
    conversations = list(_conversations(participant_id).order_by("created_at", "id"))
    conversation_ids = [c.id for c in conversations]
    facts = list(_facts(participant_id, conversation_ids).defer("embedding", "search_vector").order_by("created_at", "id"))
    fact_ids = [f.id for f in facts]
    revisions: dict = {fact_id: [] for fact_id in fact_ids}
    for revision in FactRevision.objects.filter(fact_id__in=fact_ids).order_by("fact_id", "version"):
        revisions[revision.fact_id].append(revision)
    messages: dict = {conversation_id: [] for conversation_id in conversation_ids}
    for message in Message.objects.filter(conversation_id__in=conversation_ids).defer("embedding", "search_vector").order_by("conversation_id", "sequence"):
        messages[message.conversation_id].append(message)
    approvals = list(
        Approval.objects.filter(fact_id__in=fact_ids).select_related("fact").defer("fact__embedding", "fact__search_vector")
        .order_by("created_at", "id")
    )
    return ParticipantData(
        exported_at=timezone.now(), facts=facts, revisions=revisions, conversations=conversations, messages=messages,
        approvals=approvals,
        workspaces=list(Workspace.objects.filter(participant_id=participant_id).order_by("namespace", "id")),
        tool_calls=list(ToolCall.objects.filter(participant_id=participant_id).order_by("namespace", "id")),
    )


# --- erasure ---------------------------------------------------------------------------------


@dataclass
class Erasure:
    erased_at: datetime
    counts: dict


def _idempotency_records(principal: Principal, participant_id: str, ids: list[str]) -> list[int]:
    """Stored responses that carry the participant's data (see the module's docstring)."""
    records, keys = IdempotencyRecord._meta.db_table, ApiKey._meta.db_table
    in_scope = "TRUE" if principal.project_id is None else "(k.project_id = %(project)s OR k.project_id IS NULL)"
    sql = f"""
        SELECT r.id FROM {records} r JOIN {keys} k ON k.id = r.api_key_id
        WHERE r.tenant_id = %(tenant)s AND (
            ({in_scope} AND (k.participant_id = %(participant)s OR position(%(needle)s IN r.response_body) > 0))
            OR EXISTS (
                SELECT 1 FROM regexp_matches(encode(r.response_body, 'escape'), %(uuid)s, 'g') AS m(found)
                WHERE m.found[1] = ANY(%(ids)s::text[])))"""
    params = {
        "tenant": principal.tenant_id, "project": principal.project_id, "participant": participant_id,
        # As the API renders it: a JSON string, UTF-8.
        "needle": json.dumps(participant_id, ensure_ascii=False).encode(), "uuid": _UUID_PATTERN, "ids": ids,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _forget_query_embeddings(texts: set[str], models: set[str]) -> int:
    """Drop cached query embeddings of these texts (any of these models); returns how many there were."""
    keys = [query_cache_key(model, text) for model in models for text in texts]
    found = 0
    for start in range(0, len(keys), _CACHE_CHUNK):
        chunk = keys[start:start + _CACHE_CHUNK]
        found += len(cache.get_many(chunk))
        cache.delete_many(chunk)
    return found


def participant_erase(*, principal: Principal, participant_id: str) -> Erasure:
    """Erase everything kept for the participant that the key can see, now; returns the counts."""
    _authorize(principal, participant_id)
    with transaction.atomic():
        conversation_ids = list(_conversations(participant_id).select_for_update().values_list("id", flat=True))
        facts = _facts(participant_id, conversation_ids)
        fact_rows = list(facts.select_for_update().values_list("id", "text", "embedding_model"))
        fact_ids = [row[0] for row in fact_rows]
        message_rows = list(
            Message.objects.filter(conversation_id__in=conversation_ids).exclude(role=MessageRole.TOOL)
            .values_list("text", "embedding_model")
        )
        texts = {row[1] for row in fact_rows} | {row[0] for row in message_rows}
        texts |= set(FactRevision.objects.filter(fact_id__in=fact_ids).values_list("text", flat=True))
        models = {row[2] for row in fact_rows if row[2]} | {row[1] for row in message_rows if row[1]}
        embeddings = (
            Fact.objects.filter(id__in=fact_ids, embedding__isnull=False).count()
            + Message.objects.filter(conversation_id__in=conversation_ids, embedding__isnull=False).count()
        )
        record_ids = _idempotency_records(principal, participant_id, [str(i) for i in fact_ids + conversation_ids])
        idempotency = IdempotencyRecord.objects.filter(id__in=record_ids).delete()[0]
        counts = facts_hard_delete(fact_ids) | conversations_hard_delete(conversation_ids)
        counts["workspaces"] = Workspace.objects.filter(participant_id=participant_id).delete()[0]
        counts["toolCalls"] = ToolCall.objects.filter(participant_id=participant_id).delete()[0]
    embedder = get_embedder()
    if embedder is not None:
        models.add(embedder.model)
    counts |= {"embeddings": embeddings, "idempotencyResponses": idempotency,
               "cachedQueryEmbeddings": _forget_query_embeddings(texts, models)}
    # The log keeps who erased how much, never whom: the participant id is personal data too.
    who = "sha256:" + hashlib.sha256(participant_id.encode()).hexdigest()[:16]
    logger.info(
        "erased participant %s in tenant %s project %s for user %s: %s",
        who, principal.tenant_id, principal.project_id or "*", principal.user_id, counts,
    )
    return Erasure(erased_at=timezone.now(), counts=counts)
