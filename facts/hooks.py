"""What a fact write asks of the apps above facts, which facts may not import.

A write embeds its texts (retrieval) and, when it is kept in a conversation, takes the
conversation's participant (agent). Those apps sit above facts, so they plug their answer
in here when Django starts (their AppConfig.ready); until one does, a write embeds nothing
and knows no conversations. One place says what is plugged in, and who plugs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _no_embedding(texts: list[str]) -> None:
    return None


def _nothing_later(fact_ids: list[str]) -> None:
    return None


def _no_conversation(conversation_id) -> dict | None:
    return None


# texts -> an object with .vectors and .model within the inline budget, or None (retrieval.inline)
embed_now: Callable[[list[str]], Any] = _no_embedding
# fact ids whose embedding the write did not make: made after commit (retrieval.tasks.embed_facts)
embed_later: Callable[[list[str]], None] = _nothing_later
# a conversation id -> {"project_id", "participant_id"} of that conversation, or None (agent.models)
conversation: Callable[[Any], dict | None] = _no_conversation


def plug(*, embed_now: Callable | None = None, embed_later: Callable | None = None, conversation: Callable | None = None) -> None:
    """Called by retrieval and agent at startup (their AppConfig.ready)."""
    module = globals()
    for name, value in (("embed_now", embed_now), ("embed_later", embed_later), ("conversation", conversation)):
        if value is not None:
            module[name] = value
