"""`POST /v1/retrieve`: the intents of one read, over facts and (with an agent) its conversations.

The one service behind the HTTP route (agent.views.RetrieveView) and the MCP tool
memory_recall (memoryhub.mcp_http). It lives with the agent because a conversations
intent reads one agent's conversations, and a conversationId gives the read its agent,
participant, project and segment; the searching itself is retrieval's.
"""

from __future__ import annotations

import time

from accounts.services import Principal
from agent.conversations import conversation_find, validate_segment
from agent.services import check_participant
from core.errors import ValidationFailed
from facts.serializers import fact_to_dict
from retrieval import latency
from retrieval.recall import recall, recalled_to_dict
from retrieval.search import Run, facts_retrieve, parse_intent


def retrieve(*, principal: Principal, data: dict) -> dict:
    """`POST /v1/retrieve` for validated input (also the MCP tool memory_recall's door); its
    duration goes to the overview's latency chart (retrieval.latency)."""
    started = time.perf_counter()
    intents = [parse_intent(raw, index) for index, raw in enumerate(data["intents"])]
    conversation_id = str(data["conversationId"]) if data.get("conversationId") else None
    participant_id = data.get("participantId") or principal.participant_id
    project_id = principal.project_for(data.get("projectId"))
    agent_slug = data.get("agent")
    segment = validate_segment(data.get("segment"))
    recall_intents = [intent for intent in intents if intent.source == "conversations"]
    # The run's conversation, when the id names one the caller may see, gives the run its
    # agent, participant, project and segment (recall reads only that agent's conversations).
    conversation = conversation_find(principal=principal, conversation_id=conversation_id) if recall_intents else None
    if conversation is not None:
        if agent_slug is not None and agent_slug != conversation.agent_slug:
            raise ValidationFailed("agent differs from the conversation's agent", errors={"agent": ["not the conversation's agent"]})
        if project_id is not None and str(project_id) != str(conversation.project_id):
            raise ValidationFailed("projectId differs from the conversation's project", errors={"projectId": ["not the conversation's project"]})
        check_participant(participant_id, conversation.participant_id)
        participant_id = participant_id or conversation.participant_id
        agent_slug, project_id = conversation.agent_slug, conversation.project_id
        segment = conversation.segment or segment
    if recall_intents and not agent_slug:
        raise ValidationFailed(
            "A conversations intent recalls one agent's conversations: name the `agent`, or a `conversationId` of its.",
            errors={"agent": ["required for source conversations"]},
        )
    principal.require_participant(participant_id)
    run = Run(
        principal=principal, query=data["query"], participant_id=participant_id, conversation_id=conversation_id,
        project_id=project_id, agent_slug=agent_slug, segment=segment,
    )
    result = facts_retrieve(run=run, intents=[intent for intent in intents if intent.source == "facts"])
    recall(run=run, intents=recall_intents, result=result)
    latency.observe(tenant_id=principal.tenant_id, project_id=project_id, kind="retrieve", seconds=time.perf_counter() - started)
    return {
        "facts": [
            {"fact": fact_to_dict(hit.fact), "ranks": hit.ranks, "score": hit.score, "intent": hit.intent.as_dict()}
            for hit in result.hits
        ],
        "recalled": [recalled_to_dict(hit) for hit in result.recalled],
        "warnings": result.warnings,
    }
