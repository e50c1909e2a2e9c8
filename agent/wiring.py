"""What the layers below ask of conversations, plugged in at startup (AgentConfig.ready).

- facts.hooks.conversation: a fact kept in a conversation takes its participant.
- retrieval.sources: messages are embedded and backfilled like facts.
"""

from __future__ import annotations

from agent.models import Conversation, Message, MessageRole
from facts import hooks
from retrieval import sources


def _conversation(conversation_id) -> dict | None:
    return Conversation.objects.filter(id=conversation_id).values("project_id", "participant_id").first()


hooks.plug(conversation=_conversation)
sources.register(sources.Source(
    name="messages", model=Message, embeddable=lambda: Message.objects.exclude(role=MessageRole.TOOL),
    pending=lambda now: Message.objects.exclude(role=MessageRole.TOOL).filter(
        created_at__lte=sources.settled_before(now), conversation__replay=False, conversation__unregistered_at__isnull=True),
))
