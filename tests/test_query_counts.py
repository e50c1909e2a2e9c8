"""No list or context endpoint reads row by row: its number of statements is the same for
a few rows as for many (healthchecks asserts query counts the same way).

Each case seeds its rows with tests/factories at two sizes, asks the endpoint once to warm
caches, then counts the statements of a second call. The counts must be equal across sizes
and within the ceiling written beside each case (the key's own statement included): the
count measured, so a new statement shows up here. Every GET under /v1 has a case (the last
test holds that), and so do the reads an agent makes by POST (retrieve, context, query).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLResolver, get_resolver

from tests.factories import (
    AgentFactory,
    ApiKeyFactory,
    ConversationFactory,
    FactFactory,
    MemberFactory,
    PendingFactFactory,
    WorkspaceEntryFactory,
    WorkspaceTasksFactory,
)

pytestmark = pytest.mark.django_db

SMALL, LARGE = 2, 25


def seed_facts(world, n):
    FactFactory.create_batch(n, world=world)
    return FactFactory.create_batch(n, world=world, participant_id="end-7")


def seed_revisions(world, n):
    FactFactory.create_batch(n, world=world)
    return FactFactory(world=world, revisions=n)


def seed_agents(world, n):
    AgentFactory.create_batch(n, world=world)
    return AgentFactory(world=world, slug="acme.desk")


def seed_conversations(world, n):
    AgentFactory(world=world, slug="acme.desk")
    FactFactory.create_batch(n, world=world, participant_id="end-7")
    return ConversationFactory.create_batch(n, world=world, messages=3)


def seed_messages(world, n):
    AgentFactory(world=world, slug="acme.desk")
    ConversationFactory(world=world, messages=n)
    return ConversationFactory(world=world, messages=n)


def seed_approvals(world, n):
    return PendingFactFactory.create_batch(n, world=world)


def seed_workspace(world, n):
    WorkspaceTasksFactory(world=world, count=n)
    return WorkspaceEntryFactory.create_batch(n, world=world)


def seed_profile(world, n):
    keys = [f"k{i}" for i in range(n)]
    for i, key in enumerate(keys):
        FactFactory(world=world, type="memory.user", key=key, content=f"value {i}", participant_id="end-7")
    return keys


def seed_members(world, n):
    return MemberFactory.create_batch(n, world=world)


def seed_keys(world, n):
    ApiKeyFactory.create_batch(n, world=world, participant_id="end-7")
    return ApiKeyFactory.create_batch(n, world=world)


class Case(NamedTuple):
    route: str  # the URL name the call must resolve to (the guard below checks every /v1 GET has one)
    seed: Callable  # seed(world, n) -> state
    call: Callable  # call(client, state) -> response
    ceiling: int


CONTEXT = {"userMessage": "what about the washing machine?", "participantId": "end-7"}
END_7 = {"participantId": "end-7"}
CASES = {
    # Lists and searches.
    "facts list": Case("facts", seed_facts, lambda c, s: c.get("/v1/facts", {"limit": 100}), 2),
    "facts search": Case("facts", seed_facts, lambda c, s: c.get("/v1/facts", {"q": "washing", "limit": 100}), 2),
    "fact revisions": Case("fact-revisions", seed_revisions, lambda c, s: c.get(f"/v1/facts/{s.id}/revisions"), 3),
    "agents list": Case("agents", seed_agents, lambda c, s: c.get("/v1/agents"), 2),
    "conversation messages": Case("conversation-messages", seed_messages, lambda c, s: c.get(f"/v1/conversations/{s.id}/messages"), 3),
    "approvals list": Case("approvals", seed_approvals, lambda c, s: c.get("/v1/approvals", {"limit": 100}), 2),
    "members": Case("members", seed_members, lambda c, s: c.get("/v1/members"), 2),
    "keys": Case("keys", seed_keys, lambda c, s: c.get("/v1/keys"), 2),
    "workspace memory": Case("workspace-memory", seed_workspace, lambda c, s: c.get("/v1/workspaces/ws/memory"), 2),
    "workspace keys": Case("workspace-memory-keys", seed_workspace, lambda c, s: c.get("/v1/workspaces/ws/memory/keys"), 2),
    "workspace tasks": Case("workspace-tasks", seed_workspace, lambda c, s: c.get("/v1/workspaces/ws/tasks"), 2),
    "profile keys": Case("profile-keys", seed_profile, lambda c, s: c.get("/v1/profiles/end-7/keys"), 2),
    "profile facts": Case("profile-facts", seed_profile, lambda c, s: c.get("/v1/profiles/end-7/facts", {"keys": ",".join(s)}), 2),
    "participant export": Case("participant-export", seed_conversations, lambda c, s: c.get("/v1/participants/end-7/export"), 8),
    # What an agent loop reads into its context.
    "agent context": Case("agent-context", seed_conversations, lambda c, s: c.post("/v1/agents/acme.desk/context", CONTEXT, format="json"), 4),
    "agent tools": Case("agent-tools", seed_agents, lambda c, s: c.get("/v1/agents/acme.desk/tools", END_7), 2),
    "retrieve": Case("retrieve", seed_conversations, lambda c, s: c.post("/v1/retrieve", {
        "query": "washing machine", "participantId": "end-7", "agent": "acme.desk",
        "intents": [{"scope": "same-user", "mode": "keyword"}, {"source": "conversations", "scope": "same-user", "mode": "keyword"}],
    }, format="json"), 3),
    "workspace block": Case("workspace-block", seed_workspace, lambda c, s: c.get("/v1/workspaces/ws/block"), 2),
    "workspace query": Case("workspace-query", seed_workspace, lambda c, s: c.post("/v1/workspaces/ws/query", {"query": "memory"}, format="json"), 4),
    "profile": Case("profile", seed_profile, lambda c, s: c.get("/v1/profiles/end-7"), 2),
    "profile relevant keys": Case("profile-relevant-keys", seed_profile,
                                  lambda c, s: c.post("/v1/profiles/end-7/relevant-keys", {"question": "value?"}, format="json"), 2),
    "markdown": Case("markdown", seed_profile, lambda c, s: c.get("/v1/markdown", END_7), 2),
    "markdown file": Case("markdown-file", seed_profile, lambda c, s: c.get("/v1/markdown/MEMORY.md", END_7), 2),
    # Single reads, among many rows (and, for a fact, many revisions).
    "me": Case("me", seed_keys, lambda c, s: c.get("/v1/me"), 3),
    "fact": Case("fact", seed_revisions, lambda c, s: c.get(f"/v1/facts/{s.id}"), 2),
    "agent": Case("agent", seed_agents, lambda c, s: c.get("/v1/agents/acme.desk"), 2),
    "conversation": Case("conversation", seed_messages, lambda c, s: c.get(f"/v1/conversations/{s.id}"), 2),
    "approval": Case("approval", seed_approvals, lambda c, s: c.get(f"/v1/approvals/{s[0].id}"), 2),
    "retention": Case("retention", seed_members, lambda c, s: c.get("/v1/retention"), 2),
}
# GET routes under /v1 that read no rows of a tenant: nothing to count.
NOT_COUNTED = {"schema", "docs"}


def _count(world, case: Case, n) -> tuple[int, list[str]]:
    from django.db import transaction

    with transaction.atomic():
        state = case.seed(world, n)
        client = world.client()
        first = case.call(client, state)
        assert first.status_code == 200, first.content[:300]
        assert first.resolver_match.view_name == case.route, (case.route, first.resolver_match.view_name)
        with CaptureQueriesContext(connection) as captured:
            assert case.call(client, state).status_code == 200
        transaction.set_rollback(True)
    return len(captured.captured_queries), [q["sql"][:120] for q in captured.captured_queries]


@pytest.mark.parametrize("name", list(CASES))
def test_statements_do_not_grow_with_rows(world, name):
    case = CASES[name]
    few, few_sql = _count(world, case, SMALL)
    many, many_sql = _count(world, case, LARGE)
    assert few == many, (name, few_sql, many_sql)
    assert many <= case.ceiling, (name, many, many_sql)


def _v1_routes(patterns=None, prefix=""):
    """(URL name, view class) of every route under /v1/, includes followed."""
    if patterns is None:
        v1 = next(p for p in get_resolver().url_patterns if isinstance(p, URLResolver) and str(p.pattern) == "v1/")
        patterns = v1.url_patterns
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _v1_routes(pattern.url_patterns)
        else:
            yield pattern.name, getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)


def test_every_v1_read_has_a_case():
    """A new GET under /v1 (a list above all) fails here until CASES counts it or NOT_COUNTED says why not."""
    gets = {name for name, view in _v1_routes() if view is not None and hasattr(view, "get")}
    assert None not in gets, "every /v1 route has a name, so a case can name it"
    counted = {case.route for case in CASES.values()}
    missing = gets - counted - NOT_COUNTED
    assert not missing, f"GET routes with no query-count case: {sorted(missing)}"
    assert not (NOT_COUNTED - gets), f"NOT_COUNTED names routes that are gone: {sorted(NOT_COUNTED - gets)}"
