"""No list or context endpoint reads row by row: its number of statements is the same for
a few rows as for many (healthchecks asserts query counts the same way).

Each case seeds its rows with tests/factories.py at two sizes, asks the endpoint once to warm
caches, then counts the statements of a second call. The counts must be equal across sizes
and within the ceiling written beside each case (the key's own statement included).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import AgentFactory, ConversationFactory, FactFactory, PendingFactFactory, WorkspaceEntryFactory

pytestmark = pytest.mark.django_db

SMALL, LARGE = 2, 25


def seed_facts(world, n):
    FactFactory.create_batch(n, world=world)
    FactFactory.create_batch(n, world=world, participant_id="end-7")


def seed_agents(world, n):
    AgentFactory(world=world, slug="acme.desk")
    AgentFactory.create_batch(n, world=world)


def seed_conversations(world, n):
    AgentFactory(world=world, slug="acme.desk")
    ConversationFactory.create_batch(n, world=world, messages=3)
    FactFactory.create_batch(n, world=world, participant_id="end-7")


def seed_approvals(world, n):
    PendingFactFactory.create_batch(n, world=world)


def seed_workspace(world, n):
    WorkspaceEntryFactory.create_batch(n, world=world)


def seed_profile(world, n):
    for i in range(n):
        FactFactory(world=world, type="memory.user", key=f"k{i}", content=f"value {i}", participant_id="end-7")


CONTEXT = {"userMessage": "what about the washing machine?", "participantId": "end-7"}
CASES = {
    # name: (seed, call(client, state), ceiling)
    "facts list": (seed_facts, lambda c: c.get("/v1/facts", {"limit": 100}), 2),
    "facts search": (seed_facts, lambda c: c.get("/v1/facts", {"q": "washing", "limit": 100}), 2),
    "agents list": (seed_agents, lambda c: c.get("/v1/agents"), 2),
    "agent context": (seed_conversations, lambda c: c.post("/v1/agents/acme.desk/context", CONTEXT, format="json"), 4),
    "agent tools": (seed_agents, lambda c: c.get("/v1/agents/acme.desk/tools", {"participantId": "end-7"}), 2),
    "retrieve": (seed_conversations, lambda c: c.post("/v1/retrieve", {
        "query": "washing machine", "participantId": "end-7", "agent": "acme.desk",
        "intents": [{"scope": "same-user", "mode": "keyword"}, {"source": "conversations", "scope": "same-user", "mode": "keyword"}],
    }, format="json"), 3),
    "approvals list": (seed_approvals, lambda c: c.get("/v1/approvals", {"limit": 100}), 2),
    "workspace memory": (seed_workspace, lambda c: c.get("/v1/workspaces/ws/memory"), 2),
    "workspace keys": (seed_workspace, lambda c: c.get("/v1/workspaces/ws/memory/keys"), 2),
    "workspace block": (seed_workspace, lambda c: c.get("/v1/workspaces/ws/block"), 2),
    "workspace query": (seed_workspace, lambda c: c.post("/v1/workspaces/ws/query", {"query": "memory"}, format="json"), 4),
    "profile": (seed_profile, lambda c: c.get("/v1/profiles/end-7"), 2),
    "markdown": (seed_profile, lambda c: c.get("/v1/markdown", {"participantId": "end-7"}), 2),
    "participant export": (seed_conversations, lambda c: c.get("/v1/participants/end-7/export"), 8),
}


def _count(world, seed, call, n) -> tuple[int, list[str]]:
    from django.db import transaction

    with transaction.atomic():
        seed(world, n)
        client = world.client()
        first = call(client)
        assert first.status_code == 200, first.content[:300]
        with CaptureQueriesContext(connection) as captured:
            assert call(client).status_code == 200
        transaction.set_rollback(True)
    return len(captured.captured_queries), [q["sql"][:120] for q in captured.captured_queries]


@pytest.mark.parametrize("name", list(CASES))
def test_statements_do_not_grow_with_rows(world, name):
    seed, call, ceiling = CASES[name]
    few, few_sql = _count(world, seed, call, SMALL)
    many, many_sql = _count(world, seed, call, LARGE)
    assert few == many, (name, few_sql, many_sql)
    assert many <= ceiling, (name, many, many_sql)
