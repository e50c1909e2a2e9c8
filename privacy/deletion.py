"""Hard deletes of facts and conversations with everything hanging off them, with counts.

Used by the retention purge and by erasure. The rows that point at a fact (its
revisions, approvals and remember-call records) are deleted first, each in one
statement, so the fact rows themselves are deleted without being loaded.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from agent.models import Conversation, Message, RememberCall
from approvals.models import Approval
from facts.models import Fact, FactRevision
from facts.services import revision_deletes_allowed


def facts_hard_delete(ids: Sequence) -> dict:
    """Delete these facts, their revisions, approvals and remember calls (call with scopes set as needed)."""
    if not ids:
        return {"facts": 0, "revisions": 0, "approvals": 0, "rememberCalls": 0}
    # Revisions are append-only otherwise (enforced by the database).
    with transaction.atomic(), revision_deletes_allowed():
        revisions = FactRevision.objects.filter(fact_id__in=ids).delete()[0]
        approvals = Approval.objects.filter(fact_id__in=ids).delete()[0]
        remember_calls = RememberCall.objects.filter(fact_id__in=ids).delete()[0]
        facts = Fact.objects.filter(id__in=ids).only("id").delete()[0]
    return {"facts": facts, "revisions": revisions, "approvals": approvals, "rememberCalls": remember_calls}


def conversations_hard_delete(ids: Sequence) -> dict:
    """Delete these conversations and their messages."""
    if not ids:
        return {"conversations": 0, "messages": 0}
    messages = Message.objects.filter(conversation_id__in=ids).delete()[0]
    conversations = Conversation.objects.filter(id__in=ids).only("id").delete()[0]
    return {"conversations": conversations, "messages": messages}
