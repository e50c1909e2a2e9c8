"""factory_boy factories for the rows tests need in bulk, made through the services (so every
row is what the API would have written: hashes, revisions, search vectors, scopes).

    FactFactory.create_batch(20, world=world, participant_id="end-7")
"""

from __future__ import annotations

import factory

from accounts.services import Principal
from core import scoping


def owner(world, participant_id=None) -> Principal:
    """alice, the tenant's admin, as a write key on acme/desk (bound to `participant_id` if given)."""
    return Principal(
        api_key_id=None, tenant_id=world.acme.id, project_id=world.desk.id, user_id=world.alice.pk, access="write",
        role="admin", participant_id=participant_id,
    )


class _ServiceFactory(factory.Factory):
    """Builds the input as a dict and hands it to `_write(world, **fields)`, inside the world's scope."""

    class Meta:
        abstract = True
        model = dict

    @classmethod
    def _create(cls, model_class, *, world, **fields):
        with scoping.scope(tenant_id=world.acme.id, project_id=world.desk.id):
            return cls._write(world, **fields)


class FactFactory(_ServiceFactory):
    type = "acme.note"
    content = factory.Sequence(lambda n: f"note number {n} about the washing machine")
    participant_id = None

    @classmethod
    def _write(cls, world, **fields):
        from facts.services import FactInput, fact_write

        return fact_write(principal=owner(world), data=FactInput(**fields))[0]


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


class PendingFactFactory(_ServiceFactory):
    """A fact an agent remembered, waiting for a reviewer, with its approval."""

    content = factory.Sequence(lambda n: f"held note {n}")
    participant_id = None

    @classmethod
    def _write(cls, world, **fields):
        from approvals.services import approval_request
        from facts.services import FactInput, Provenance, fact_write

        agent = {"id": "acme.desk", "kind": "agent", "agentVersion": "1.0.0"}
        fact, _ = fact_write(
            principal=owner(world), data=FactInput(type="acme.note", **fields),
            provenance=Provenance(trust="unverified", attributed_to=agent, status="pending"),
        )
        return approval_request(fact=fact, reasons=[{"rule": "wide-scope", "match": "same-project"}], requested_by=agent)


class WorkspaceEntryFactory(_ServiceFactory):
    namespace = "ws"
    key = factory.Sequence(lambda n: f"note:{n}")
    value = factory.Sequence(lambda n: f"value {n}")

    @classmethod
    def _write(cls, world, *, namespace, **fields):
        from workspaces import services as workspaces

        return workspaces.memory_save(space=workspaces.workspace(principal=owner(world), namespace=namespace), **fields)
