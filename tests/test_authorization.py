"""Regression tests for the authorization holes found from outside (issue 17, items 1–6).

The generated check of every door against the policy table is tests/test_policy.py; these
are the exact cases that were reported, each as it was found.
"""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from accounts.models import ApiKey, Membership, Role
from core import scoping

pytestmark = pytest.mark.django_db

NOTE = {"type": "acme.note", "content": "the project's secret"}
AGENT = {
    "slug": "acme.desk", "instructions": "Help.",
    "retrieval": [{"scope": "same-conversation", "mode": "keyword"}],
    "memory": {"remember": {"types": ["acme.preference"], "scope": "same-user"}},
}


# --- 1. a key whose user has no role reads nothing ---------------------------------------------------


def test_a_removed_members_key_reads_nothing_anywhere(world):
    owner = world.client()
    assert owner.post("/v1/facts", NOTE, format="json").status_code == 201
    assert owner.post("/v1/agents", AGENT, format="json").status_code == 201
    bob = world.client(user=world.bob, access="read")
    assert "the project's secret" in bob.get("/v1/facts").content.decode()
    Membership.objects.filter(user=world.bob).delete()  # bob leaves the team; his key stays
    calls = [
        bob.get("/v1/facts"), bob.get("/v1/agents"), bob.get("/v1/approvals"),
        bob.post("/v1/retrieve", {"query": "secret", "intents": [{"scope": "same-project"}]}, format="json"),
        bob.post("/v1/agents/acme.desk/context", {"userMessage": "secret"}, format="json"),
        bob.get("/v1/workspaces/ws/memory"),
        bob.post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_list", "arguments": {}}},
                 format="json", HTTP_ACCEPT="application/json, text/event-stream"),
    ]
    for response in calls:
        assert response.status_code == 403, response.content
        assert response.json()["code"] == "forbidden"
        assert "secret" not in response.content.decode()
    me = bob.get("/v1/me")
    assert me.status_code == 200 and me.json()["role"] is None


def test_no_key_is_made_for_someone_without_a_role(world, capsys):
    with pytest.raises(CommandError, match="no role in globex/main"):
        call_command("apikey", "create", "--user", "bob", "--project", "globex/main", "--access", "read")
    assert not ApiKey.objects.filter(user=world.bob).exists()
    call_command("apikey", "create", "--user", "bob", "--project", "acme/desk", "--access", "read")
    assert ApiKey.objects.filter(user=world.bob).count() == 1


def test_a_deactivated_users_keys_stop_at_once(world):
    client = world.client(user=world.bob)
    assert client.get("/v1/facts").status_code == 200
    world.bob.is_active = False
    world.bob.save(update_fields=["is_active"])
    assert client.get("/v1/facts").status_code == 401


# --- 2. working memory's tasks and tool calls follow the participant ---------------------------------


def test_tasks_and_tool_calls_are_kept_per_participant(world):
    end_7, end_9, project = world.client(participant="end-7"), world.client(participant="end-9"), world.client()
    tasks = [{"id": "t1", "desc": "call end-7's bank", "status": "open", "rounds": 0, "note": ""}]
    assert end_7.put("/v1/workspaces/ws/tasks", tasks, format="json").status_code == 200
    turn = {"toolCalls": [{"name": "crm_lookup", "args": {"iban": "DE02 1203"}, "result": "end-7's balance: 4,210"}]}
    assert end_7.post("/v1/workspaces/ws/turns", turn, format="json").status_code in (200, 201)

    for other in (end_9, project):
        assert other.get("/v1/workspaces/ws/tasks").json() == []
        for relation in ("tasks", "tool_calls"):
            rows = other.post("/v1/workspaces/ws/query", {"query": relation}, format="json").json()["rows"]
            assert rows == [], relation
        assert "4,210" not in other.get("/v1/workspaces/ws/block").content.decode()
    # end-9 replaces only its own list
    assert end_9.put("/v1/workspaces/ws/tasks", [], format="json").status_code == 200
    assert end_7.get("/v1/workspaces/ws/tasks").json()[0]["desc"] == "call end-7's bank"
    [call] = end_7.post("/v1/workspaces/ws/query", {"query": "tool_calls"}, format="json").json()["rows"]
    assert call["args"] == {"iban": "DE02 1203"}


# --- 3. changing a tenant-wide fact takes an admin ----------------------------------------------------


def test_a_project_writer_cannot_change_a_tenant_wide_fact(world):
    admin = world.client()
    fact = admin.post("/v1/facts", dict(NOTE, scope={"projectId": None}), format="json").json()
    assert fact["scope"]["projectId"] is None
    bob = world.client(user=world.bob)  # writer of acme/desk
    assert bob.get(f"/v1/facts/{fact['id']}").status_code == 200  # he reads it: it reaches his project
    for response in (
        bob.post(f"/v1/facts/{fact['id']}/supersede", {"content": "changed", "expectVersion": 1}, format="json"),
        bob.delete(f"/v1/facts/{fact['id']}"),
    ):
        assert response.status_code == 403 and response.json()["code"] == "forbidden", response.content
    assert admin.get(f"/v1/facts/{fact['id']}").json()["version"] == 1
    Membership.objects.filter(user=world.bob).update(role=Role.REVIEWER)
    assert bob.post(f"/v1/facts/{fact['id']}/verify").status_code == 403  # nor may a project reviewer vouch for it
    assert admin.post(f"/v1/facts/{fact['id']}/supersede", {"content": "changed", "expectVersion": 1}, format="json").status_code == 200


# --- 4. a fact kept in a conversation is its participant's ----------------------------------------------


def test_a_conversation_fact_is_kept_for_the_conversations_participant(world):
    owner = world.client()
    assert owner.post("/v1/agents", AGENT, format="json").status_code == 201
    conversation = owner.post("/v1/conversations", {"agent": "acme.desk", "participantId": "end-7"}, format="json").json()["id"]
    fact = owner.post("/v1/facts", {"type": "acme.note", "content": "end-7 asked for a refund",
                                     "scope": {"conversationId": conversation}}, format="json").json()
    assert fact["scope"]["participantId"] == "end-7"
    assert fact["subjects"] == [{"kind": "participant", "id": "end-7"}]

    stranger = world.client(participant="end-9")
    found = stranger.post("/v1/retrieve", {"query": "refund", "conversationId": conversation,
                                            "intents": [{"scope": "same-conversation", "mode": "keyword"}]}, format="json")
    assert found.status_code in (200, 403) and "refund" not in found.content.decode()
    reader = world.client(access="read")
    assert "refund" not in reader.get("/v1/facts", {"q": "refund"}).content.decode()
    mine = world.client(participant="end-7").post(
        "/v1/retrieve", {"query": "refund", "conversationId": conversation,
                         "intents": [{"scope": "same-conversation", "mode": "keyword"}]}, format="json")
    assert [hit["fact"]["id"] for hit in mine.json()["facts"]] == [fact["id"]]
    naming_other = owner.post("/v1/facts", {"type": "acme.note", "content": "x",
                                            "scope": {"conversationId": conversation, "participantId": "end-9"}}, format="json")
    assert naming_other.status_code == 403 and naming_other.json()["code"] == "participant-not-allowed"

    erased = owner.delete("/v1/participants/end-7").json()["erased"]
    assert erased["facts"] == 1
    assert owner.get(f"/v1/facts/{fact['id']}").status_code == 404


def test_the_remember_tool_keeps_a_conversations_fact_for_its_participant(world):
    owner = world.client()
    agent = dict(AGENT, memory={"remember": {"types": ["acme.preference"], "scope": "same-conversation"}})
    assert owner.post("/v1/agents", agent, format="json").status_code == 201
    conversation = owner.post("/v1/conversations", {"agent": "acme.desk", "participantId": "end-7"}, format="json").json()["id"]
    result = owner.post("/v1/agents/acme.desk/remember", {
        "conversationId": conversation, "arguments": {"type": "acme.preference", "content": "Prefers the blue plan."},
    }, format="json").json()
    assert owner.get(f"/v1/facts/{result['factId']}").json()["scope"]["participantId"] == "end-7"


def test_migrated_conversation_facts_take_the_participant(world):
    """Facts written before the rule (conversation, no participant) take it in migration 0011."""
    from importlib import import_module

    owner = world.client()
    assert owner.post("/v1/agents", AGENT, format="json").status_code == 201
    conversation = owner.post("/v1/conversations", {"agent": "acme.desk", "participantId": "end-7"}, format="json").json()["id"]
    fact = owner.post("/v1/facts", {"type": "acme.note", "content": "old", "scope": {"conversationId": conversation}},
                      format="json").json()
    with connection.cursor() as cursor:  # as such a fact was stored before
        cursor.execute("UPDATE facts_fact SET participant_id = NULL, subjects = '[]' WHERE id = %s", [fact["id"]])
        cursor.execute(import_module("facts.migrations.0011_conversation_facts_participant").FORWARD)
    with scoping.scopes_disabled():
        from facts.models import Fact

        migrated = Fact.objects.get(id=fact["id"])
    assert migrated.participant_id == "end-7" and migrated.subjects == [{"kind": "participant", "id": "end-7"}]


# --- 5. a remember replay is the same caller's same call -------------------------------------------------


def test_a_replay_matches_agent_participant_run_call_and_arguments(world):
    owner = world.client()
    assert owner.post("/v1/agents", AGENT, format="json").status_code == 201
    call = {"runId": "run-1", "toolCallId": "call-1", "arguments": {"type": "acme.preference", "content": "Prefers tea."}}
    first = world.client(participant="end-7").post("/v1/agents/acme.desk/remember", call, format="json").json()
    assert first["outcome"] == "created"
    again = world.client(participant="end-7").post("/v1/agents/acme.desk/remember", call, format="json")
    assert again.status_code == 200 and again.json() == first | {"outcome": "replayed"}

    # Another person under the same ids is their own call: stored for them, not replayed.
    theirs = world.client(participant="end-9").post("/v1/agents/acme.desk/remember", call, format="json").json()
    assert theirs["outcome"] == "created" and theirs["factId"] != first["factId"]
    assert owner.get(f"/v1/facts/{theirs['factId']}").json()["scope"]["participantId"] == "end-9"

    changed = dict(call, arguments={"type": "acme.preference", "content": "Prefers coffee."})
    conflict = world.client(participant="end-7").post("/v1/agents/acme.desk/remember", changed, format="json")
    assert conflict.status_code == 409 and conflict.json()["code"] == "remember-replay-conflict"


# --- 6. revokes and role changes count from the next request -----------------------------------------


def test_a_revoke_or_a_role_change_counts_from_the_next_request(world):
    client = world.client(user=world.bob)
    assert client.post("/v1/facts", NOTE, format="json").status_code == 201
    Membership.objects.filter(user=world.bob).update(role=Role.VIEWER)  # demoted, elsewhere
    refused = client.post("/v1/facts", NOTE, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert client.get("/v1/facts").status_code == 200
    # revoked by another process (the CLI): only the database knows
    prefix = client.raw_key.split("_")[1]
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memoryhub_apikey SET revoked_at = now() WHERE prefix = %s", [prefix])
    assert client.get("/v1/facts").status_code == 401
