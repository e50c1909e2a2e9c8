"""Agents and their conversations, messages included."""

from __future__ import annotations

import factory

from tests.factories.accounts import _ServiceFactory, owner


class AgentFactory(_ServiceFactory):
    slug = factory.Sequence(lambda n: f"acme.agent-{n}")
    instructions = "Help."
    retrieval = factory.LazyFunction(lambda: [{"scope": "same-user", "mode": "keyword"}, {"scope": "same-project", "mode": "keyword"}])
    remember = factory.LazyFunction(lambda: {"types": ["acme.preference"], "scope": "same-user"})

    @classmethod
    def _write(cls, world, **fields):
        from agent.services import AgentInput, agent_save

        return agent_save(principal=owner(world), project_id=None, data=AgentInput(**fields))[0]


class ConversationFactory(_ServiceFactory):
    agent = "acme.desk"
    participant_id = "end-7"
    messages = 2

    @classmethod
    def _write(cls, world, *, messages, **fields):
        from agent.conversations import ConversationInput, conversation_create, messages_append

        conversation = conversation_create(principal=owner(world), data=ConversationInput(**fields))
        said = [{"role": "user" if i % 2 == 0 else "agent", "text": f"message {i} about the washing machine"} for i in range(messages)]
        messages_append(principal=owner(world), conversation_id=conversation.id, messages=said)
        return conversation
