"""Why a fact did not reach a turn's context: what the dashboard's retrieval playground shows.

`context_left_out` looks at the facts the caller may see in the agent's project (and the
tenant-wide ones), in any status, and gives each one that the turn's context left out a
reason a person can act on: it waits for approval, was rejected or deleted, has expired,
is kept for another participant or conversation, has a type no intent reads, was ranked
past an intent's limit, or does not match the message.

The rankings come from the same SQL as the context itself (`retrieval.search.run_intent`),
run again with the largest limit an intent may have. The scope checks restate the
conditions of `retrieval.search._conditions` in Python to *explain* a miss; no read
uses them, so they can never widen what a read returns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from agent.services import Context, Turn, turn_run
from facts.models import Fact, Status
from facts.selectors import effective_status, facts_visible
from retrieval.embeddings import get_embedder
from retrieval.search import MAX_LIMIT, Intent, Result, Run, parse_intent, run_intent

CANDIDATES = 200  # the newest facts looked at, besides every fact a deeper ranking found


@dataclass
class LeftOut:
    """A fact the context did not include, and why (`reason` is a short code, `detail` a sentence)."""

    fact: Fact
    reason: str  # pending, rejected, deleted, expired, past-limit, type, scope, no-match, no-intent
    detail: str
    rank: int | None = None  # past-limit: its place in the intent's deeper ranking
    intent: int | None = None  # past-limit: which facts intent (1-based)


def _scope_miss(run: Run, intent: Intent, fact: Fact) -> tuple[str, str] | None:
    """Why `intent` cannot read `fact` in this run, or None when it can."""
    if intent.types and fact.type not in intent.types:
        return "type", f"its type {fact.type} is not one the intent reads ({', '.join(intent.types)})"
    participant, conversation = fact.participant_id, str(fact.conversation_id) if fact.conversation_id else None
    if intent.scope in ("same-user", "same-conversation", "same-project") and fact.project_id is None:
        return "scope", f"it is kept tenant-wide, and the {intent.scope} intent reads this project's facts"
    if intent.scope == "same-user":
        if run.participant_id is None:
            return "scope", "the same-user intent reads one person's facts, and this turn names no participant"
        if participant is None:
            return "scope", "it is kept for no one in particular, and the same-user intent reads the participant's own facts"
        if participant != run.participant_id:
            return "scope", f"it is kept for another participant ({participant})"
        if conversation is not None and conversation != run.conversation_id:
            return "scope", "it is kept for another conversation of this participant"
    elif intent.scope == "same-conversation":
        if run.conversation_id is None:
            return "scope", "the same-conversation intent reads one conversation's facts, and this turn names none"
        if conversation != run.conversation_id:
            return "scope", "it is not kept for this turn's conversation"
        if participant is not None and participant != run.participant_id:
            return "scope", f"it is kept for another participant ({participant})"
    else:  # same-project, tenant: what is kept for no one in particular
        if participant is not None:
            return "scope", f"it is kept for participant {participant}, and the {intent.scope} intent reads facts kept for no one in particular"
        if conversation is not None:
            return "scope", f"it is kept for one conversation, and the {intent.scope} intent reads facts kept for no one in particular"
    return None


def _no_match(intent: Intent, fact: Fact, query: str) -> str:
    if intent.mode == "none" or not query.strip():
        return f"it is not among the {MAX_LIMIT} newest facts the intent reads"
    if intent.mode == "semantic" and fact.embedding_model is None:
        return "it has no embedding yet, so search by meaning cannot find it"
    if intent.mode == "keyword":
        return "the message shares no searchable word with it (none that it does not exclude with -word)"
    return f"it is not among the {MAX_LIMIT} best matches of the message (by {intent.mode})"


def context_left_out(*, turn: Turn, context: Context, user_message: str, limit: int = CANDIDATES) -> list[LeftOut]:
    """The facts the caller may see that `context` (from `agent_context`) left out, each with why.

    Facts ranked past an intent's limit come first, best first; then the rest, newest
    first. The caller's visibility is the one reads use (`facts_visible`), so the list
    never names a fact the caller could not open.
    """
    run = turn_run(turn, user_message)
    intents = [parse_intent(raw, index) for index, raw in enumerate(turn.agent.retrieval)]
    fact_intents = [intent for intent in intents if intent.source == "facts"]
    included = {hit.fact.id for hit in context.hits}

    deeper: dict = {}  # fact id -> (intent number, place, intent, fact)
    embedder = get_embedder() if any(i.mode in ("semantic", "both") for i in fact_intents) else None
    vectors: dict = {}
    for number, intent in enumerate(fact_intents, start=1):
        wider = dataclasses.replace(intent, limit=MAX_LIMIT)
        for place, hit in enumerate(run_intent(run, wider, Result(), embedder=embedder, vector_cache=vectors), start=1):
            if hit.fact.id not in included and hit.fact.id not in deeper:
                deeper[hit.fact.id] = (number, place, intent, hit.fact)

    left: list[LeftOut] = []
    for fact_id, (number, place, intent, fact) in sorted(deeper.items(), key=lambda item: item[1][:2]):
        left.append(LeftOut(
            fact=fact, reason="past-limit", rank=place, intent=number,
            detail=f"ranked {place} by intent {number} ({intent.scope}, {intent.mode}), which keeps its best {intent.limit}",
        ))

    project = turn.agent.project_id
    candidates = (
        facts_visible(principal=turn.principal)
        .filter(Q(project_id=project) | Q(project_id__isnull=True))
        .exclude(id__in=included | set(deeper))
        .defer("embedding", "search_vector")
        .order_by("-updated_at", "-id")[:limit]
    )
    now = timezone.now()
    for fact in candidates:
        status = effective_status(fact, now)
        if status == Status.PENDING:
            left.append(LeftOut(fact, "pending", "it waits for a reviewer's approval; no read sees it until then"))
        elif status == Status.REJECTED:
            left.append(LeftOut(fact, "rejected", "a reviewer rejected it; no read ever sees it"))
        elif status == Status.DELETED:
            left.append(LeftOut(fact, "deleted", "it was deleted"))
        elif status == Status.EXPIRED:
            left.append(LeftOut(fact, "expired", "it has expired (expiresAt or validUntil has passed)"))
        elif not fact_intents:
            left.append(LeftOut(fact, "no-intent", "the agent declares no facts intent, so it reads no facts"))
        else:
            misses = [_scope_miss(run, intent, fact) for intent in fact_intents]
            readable = [intent for intent, miss in zip(fact_intents, misses) if miss is None]
            if readable:
                left.append(LeftOut(fact, "no-match", _no_match(readable[0], fact, user_message)))
            else:
                reason = "type" if all(miss[0] == "type" for miss in misses) else "scope"
                detail = misses[0][1] if len(misses) == 1 else "; ".join(f"intent {n}: {miss[1]}" for n, miss in enumerate(misses, start=1))
                left.append(LeftOut(fact, reason, detail))
    return left
