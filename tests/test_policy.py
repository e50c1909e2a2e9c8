"""The authorization policy, checked from outside against its one table.

core.policy.TABLE says what a caller may do (role × key access × binding) to an
object of a reach (tenant, project, a participant) for an act (read, write, review,
admin). This file generates callers and objects and checks every /v1 endpoint and every
MCP tool against the table, not against the code's own answer:

- callers: members with each role, tenant-wide and project-only; read and write keys;
  keys bound to the object's participant and to another; and callers that must get
  nothing: a removed member's key, a key whose user was deactivated, a revoked key, a key
  of another tenant;
- objects: facts of every reach, facts waiting for approval (and their approvals),
  conversations with and without a participant and their messages, working memory (entries,
  task lists, tool calls) kept by a bound key and by an unbound one, profiles and
  Markdown memory, a person's export and erasure, agents;
- each probe names the act it performs on its object. Allowed: a 2xx whose body shows the
  object (for reads) or whose effect is seen in the database (for writes). Denied: 401, 403
  or 404 — or, for lists and searches, a 2xx without it — and no effect.

Every URL of /v1 and every MCP tool must have a probe (`test_every_door_has_a_probe`).
POLICY_EXAMPLES sets how many generated cases each probe gets (default 15; `make reliability` runs 100).
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from hypothesis import HealthCheck, given, settings, strategies as st
from rest_framework.test import APIClient

from accounts.models import ApiKey, Membership
from accounts.services import apikey_create, apikey_revoke
from core import policy, scoping
from core.policy import Act
from tests.test_isolation import PUBLIC, _api_url_names

EXAMPLES = int(os.environ.get("POLICY_EXAMPLES", "15"))
OK = {200, 201, 204}
DENIED = {401, 403, 404}
NS = "policy-ws"
AGENT = {
    "slug": "pol.desk", "instructions": "Help.",
    "retrieval": [{"scope": "same-user", "mode": "keyword"}, {"scope": "same-project", "mode": "keyword"}],
    "memory": {"remember": {"types": ["acme.preference"], "scope": "same-user"}},
}


# --- objects ------------------------------------------------------------------------------------


@dataclass
class Obj:
    kind: str
    shape: str  # "tenant", "project" or "end-7": for whom it is kept
    secret: str
    project_id: object
    participant_id: str | None
    tenant_id: object = None
    id: str = ""
    extra: dict = field(default_factory=dict)


def _owner(world, participant=None) -> APIClient:
    return world.client(participant=participant)  # alice: the tenant's admin, write key on acme/desk


def _ok(response):
    assert response.status_code in OK, response.content[:400]
    return response.json() if response.get("Content-Type", "").startswith("application/json") else None


def _agent(world) -> None:
    if _owner(world).get(f"/v1/agents/{AGENT['slug']}").status_code == 404:
        _ok(_owner(world).post("/v1/agents", AGENT, format="json"))


def make_object(world, kind: str, shape: str) -> Obj:
    secret = f"zq{uuid.uuid4().hex[:14]}"
    participant = "end-7" if shape == "end-7" else None
    obj = Obj(kind, shape, secret, None if shape == "tenant" else world.desk.id, participant, world.acme.id)
    owner = _owner(world)
    if kind == "fact":
        scope = {"projectId": None} if shape == "tenant" else {"participantId": participant} if participant else {}
        body = {"type": "acme.note", "content": f"{secret} is noted", "scope": scope}
        obj.id = _ok(owner.post("/v1/facts", body, format="json"))["id"]
    elif kind == "pending":
        obj.id, obj.extra["fact"] = _pending(world, obj)
    elif kind == "conversation":
        _agent(world)
        body = {"agent": AGENT["slug"]} | ({"participantId": participant} if participant else {})
        obj.id = _ok(owner.post("/v1/conversations", body, format="json"))["id"]
        said = {"messages": [{"role": "user", "text": f"{secret} said hello"}]}
        _ok(owner.post(f"/v1/conversations/{obj.id}/messages", said, format="json"))
    elif kind == "workspace":  # kept by a key bound to end-7, or by an unbound one (the project's)
        keeper = _owner(world, participant)
        _ok(keeper.post(f"/v1/workspaces/{NS}/memory", {"key": f"note:{secret}", "value": f"{secret} value"}, format="json"))
        tasks = [{"id": "t1", "desc": f"{secret} task", "status": "open", "rounds": 0, "note": ""}]
        _ok(keeper.put(f"/v1/workspaces/{NS}/tasks", tasks, format="json"))
        turn = {"toolCalls": [{"name": "crm_lookup", "args": {"who": secret}, "result": f"{secret} result"}]}
        _ok(keeper.post(f"/v1/workspaces/{NS}/turns", turn, format="json"))
    elif kind == "profile":
        _ok(owner.put(f"/v1/profiles/{participant}/facts/{secret}", {"value": f"{secret} profile"}, format="json"))
        body = {"type": "memory.user", "content": f"{secret} markdown", "scope": {"participantId": participant}}
        _ok(owner.post("/v1/facts", body, format="json"))
    elif kind == "memfile":  # a topic file of end-7's MEMORY.md folder, through Claude's memory tool
        command = {"command": "create", "path": f"/memories/{secret}.md", "file_text": f"{secret} likes tea.\n"}
        _ok(owner.post(f"/v1/memory-tool/{participant}", command, format="json"))
    elif kind == "agent":
        _agent(world)
        _ok(owner.put(f"/v1/agents/{AGENT['slug']}", AGENT | {"instructions": f"{secret} instructions"}, format="json"))
        obj.id = AGENT["slug"]
    else:
        raise AssertionError(kind)
    return obj


def _pending(world, obj: Obj) -> tuple[str, str]:
    """A fact an agent remembered at the object's reach, waiting for a reviewer, and its approval."""
    from accounts.services import Principal
    from approvals.services import approval_request
    from facts.services import FactInput, Provenance, fact_write

    principal = Principal(
        api_key_id=None, tenant_id=world.acme.id, project_id=world.desk.id, user_id=world.alice.pk, access="write",
        role="admin", participant_id=None,
    )
    agent = {"id": AGENT["slug"], "kind": "agent", "agentVersion": "1.0.0"}
    with scoping.scope(tenant_id=world.acme.id, project_id=world.desk.id):
        fact, _ = fact_write(
            principal=principal,
            data=FactInput(type="acme.note", content=f"{obj.secret} pending", participant_id=obj.participant_id,
                           project_id=obj.project_id),
            provenance=Provenance(trust="unverified", attributed_to=agent, status="pending"),
        )
        approval = approval_request(fact=fact, reasons=[{"rule": "wide-scope", "match": "same-project"}], requested_by=agent)
    return str(approval.id), str(fact.id)


# --- effects seen in the database (for writes) ------------------------------------------------------


def _db(fn):
    with scoping.scopes_disabled():
        return fn()


def fact_status(obj) -> tuple:
    from facts.models import Fact

    return _db(lambda: Fact.objects.filter(id=obj.extra.get("fact", obj.id)).values_list("status", "version", "trust").first())


def changed_fact(before_version=1) -> Callable[[Obj], bool]:
    return lambda obj: fact_status(obj) != ("active", before_version, "asserted")


def approval_decided(obj) -> bool:
    from approvals.models import Approval

    return _db(lambda: Approval.objects.get(id=obj.id).status != "pending")


def state(obj) -> tuple:
    """Everything in the owner's tenant that holds the object's secret, as it is now: facts
    (their version and status), task lists, tool calls and messages. For working memory and a
    person's data, only the rows kept for the object's participant (another caller's own
    space is not the object)."""
    from django.db.models import Q

    from agent.models import Message
    from facts.models import Fact, ToolCall, Workspace

    own = {"participant_id": obj.participant_id} if obj.kind in ("workspace", "profile", "memfile") else {}

    def read():
        facts = Fact.objects.filter(Q(text__contains=obj.secret) | Q(key__contains=obj.secret), tenant_id=obj.tenant_id, **own)
        return (
            sorted(facts.values_list("id", "version", "status", "participant_id")),
            sorted(map(str, Workspace.objects.filter(tenant_id=obj.tenant_id, namespace=NS, **own).values_list("tasks", flat=True))),
            ToolCall.objects.filter(tenant_id=obj.tenant_id, result__contains=obj.secret, **own).count(),
            Message.objects.filter(tenant_id=obj.tenant_id, text__contains=obj.secret).count(),
        )
    return _db(read)


def changed_state(obj, before) -> bool:
    return state(obj) != before


def conversation_state(obj) -> tuple:
    from agent.models import Conversation

    return _db(lambda: Conversation.objects.filter(id=obj.id).values_list("unregistered_at", "next_sequence").first())


def agent_instructions(obj) -> str | None:
    from agent.models import Agent

    return _db(lambda: Agent.objects.filter(project_id=obj.project_id, slug=obj.id).values_list("instructions", flat=True).first())


# --- probes --------------------------------------------------------------------------------------------


def mcp(client, tool: str, arguments: dict, **query):
    """One tools/call on POST /mcp, answered as a response whose status is the tool's: 200, or
    the problem's status when the tool refused (isError)."""
    url = "/mcp?" + "&".join(f"{k}={v}" for k, v in query.items())
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    response = client.post(url, body, format="json", HTTP_ACCEPT="application/json, text/event-stream")
    if response.status_code != 200:
        return response
    result = response.json()["result"]
    status = result.get("structuredContent", {}).get("status", 400) if result.get("isError") else 200
    return SimpleNamespace(status_code=status, content=json.dumps(result).encode(), json=lambda: result)


@dataclass
class Probe:
    door: str  # the URL name, or "mcp:<tool>"
    kind: str
    act: Act
    call: Callable  # (client, obj) -> response
    shapes: tuple = ("project", "end-7")
    style: str = "item"  # item: the object itself; list: found among others; effect: a change to it;
    # status: allowed or denied, nothing of it shown; namesake: status, but another tenant reads its own
    effect: Callable | None = None  # (obj, before) -> did the object change?
    snapshot: Callable | None = None  # obj -> state before the call, for `effect`
    addressable: Callable = lambda binding, obj: True  # can this caller name the object at all?
    unattributed: bool = False  # an object with no participant is someone unknown's (conversations)
    bound_writes_own: bool = False  # a bound key that names no participant writes for its own


def same_space(binding, obj) -> bool:
    """Working memory is addressed by namespace: a caller reaches the space kept for its own binding."""
    return binding == obj.participant_id


def retrieve_body(obj, *, source="facts"):
    scope = {"tenant": "tenant", "project": "same-project", "end-7": "same-user"}[obj.shape]
    body = {"query": obj.secret, "intents": [{"source": source, "scope": scope, "mode": "keyword"}]}
    if source == "conversations":
        body["agent"] = AGENT["slug"]
        body["intents"][0]["roles"] = ["user"]
    if obj.participant_id:
        body["participantId"] = obj.participant_id
    return body


def fid(obj):
    return obj.extra.get("fact", obj.id)


WS = f"/v1/workspaces/{NS}"
ALL_FACT_SHAPES = ("tenant", "project", "end-7")
PROBES = [
    Probe("me", "fact", Act.READ, lambda c, o: c.get("/v1/me"), style="me"),
    # facts
    Probe("fact", "fact", Act.READ, lambda c, o: c.get(f"/v1/facts/{o.id}"), ALL_FACT_SHAPES),
    Probe("fact", "pending", Act.REVIEW, lambda c, o: c.get(f"/v1/facts/{fid(o)}"), ALL_FACT_SHAPES),
    Probe("facts", "fact", Act.READ, lambda c, o: c.get("/v1/facts", {"q": o.secret}), ALL_FACT_SHAPES, style="list"),
    Probe("fact-revisions", "fact", Act.READ, lambda c, o: c.get(f"/v1/facts/{o.id}/revisions"), ALL_FACT_SHAPES),
    Probe("fact-supersede", "fact", Act.WRITE,
          lambda c, o: c.post(f"/v1/facts/{o.id}/supersede", {"content": "changed", "expectVersion": 1}, format="json"),
          ALL_FACT_SHAPES, style="effect", effect=lambda o, _: changed_fact()(o)),
    Probe("fact-verify", "fact", Act.REVIEW, lambda c, o: c.post(f"/v1/facts/{o.id}/verify"),
          ALL_FACT_SHAPES, style="effect", effect=lambda o, _: changed_fact()(o)),
    Probe("fact", "fact", Act.WRITE, lambda c, o: c.delete(f"/v1/facts/{o.id}"),
          ALL_FACT_SHAPES, style="effect", effect=lambda o, _: changed_fact()(o)),
    Probe("facts", "fact", Act.WRITE,
          lambda c, o: c.post("/v1/facts", {"type": "acme.note", "content": f"new {o.secret}", "scope": _scope(o)}, format="json"),
          ALL_FACT_SHAPES, style="effect", snapshot=state, effect=changed_state, bound_writes_own=True),
    Probe("facts-batch", "fact", Act.WRITE,
          lambda c, o: c.post("/v1/facts/batch", {"facts": [{"type": "acme.note", "content": f"new {o.secret}", "scope": _scope(o)}]},
                              format="json"),
          ALL_FACT_SHAPES, style="effect", snapshot=state, effect=changed_state, bound_writes_own=True),
    Probe("retrieve", "fact", Act.READ, lambda c, o: c.post("/v1/retrieve", retrieve_body(o), format="json"),
          ALL_FACT_SHAPES, style="list"),
    Probe("mcp:memory_recall", "fact", Act.READ,
          lambda c, o: mcp(c, "memory_recall", {"query": o.secret}, agent=AGENT["slug"], **_mcp_participant(o)),
          ("project", "end-7"), style="list"),
    # approvals (of pending facts)
    Probe("approvals", "pending", Act.REVIEW, lambda c, o: c.get("/v1/approvals"), ALL_FACT_SHAPES, style="list"),
    Probe("approval", "pending", Act.REVIEW, lambda c, o: c.get(f"/v1/approvals/{o.id}"), ALL_FACT_SHAPES),
    Probe("approval-approve", "pending", Act.REVIEW, lambda c, o: c.post(f"/v1/approvals/{o.id}/approve", {}, format="json"),
          ALL_FACT_SHAPES, style="effect", effect=lambda o, _: approval_decided(o)),
    Probe("approval-reject", "pending", Act.REVIEW, lambda c, o: c.post(f"/v1/approvals/{o.id}/reject", {}, format="json"),
          ALL_FACT_SHAPES, style="effect", effect=lambda o, _: approval_decided(o)),
    # conversations and messages
    Probe("conversation", "conversation", Act.READ, lambda c, o: c.get(f"/v1/conversations/{o.id}"), unattributed=True, style="status"),
    Probe("conversation-messages", "conversation", Act.READ, lambda c, o: c.get(f"/v1/conversations/{o.id}/messages"),
          unattributed=True),
    Probe("conversation-messages", "conversation", Act.WRITE,
          lambda c, o: c.post(f"/v1/conversations/{o.id}/messages", {"messages": [{"role": "user", "text": "more"}]}, format="json"),
          unattributed=True, style="effect", snapshot=conversation_state, effect=lambda o, before: conversation_state(o) != before),
    Probe("conversation", "conversation", Act.WRITE, lambda c, o: c.delete(f"/v1/conversations/{o.id}"),
          unattributed=True, style="effect", snapshot=conversation_state, effect=lambda o, before: conversation_state(o) != before),
    Probe("retrieve", "conversation", Act.READ, lambda c, o: c.post("/v1/retrieve", retrieve_body(o, source="conversations"), format="json"),
          unattributed=True, style="list"),
    Probe("conversations", "agent", Act.WRITE,
          lambda c, o: c.post("/v1/conversations", {"agent": o.id, "participantId": "end-7", "segment": o.secret}, format="json"),
          ("end-7",), style="effect", snapshot=lambda o: _conversations_with(o.secret),
          effect=lambda o, before: _conversations_with(o.secret) > before),
    # working memory: entries, task lists, tool calls
    Probe("workspace-memory", "workspace", Act.READ, lambda c, o: c.get(f"{WS}/memory", {"q": o.secret}), style="list", addressable=same_space),
    Probe("workspace-memory-keys", "workspace", Act.READ, lambda c, o: c.get(f"{WS}/memory/keys"), style="list", addressable=same_space),
    Probe("workspace-query", "workspace", Act.READ, lambda c, o: c.post(f"{WS}/query", {"query": "tool_calls"}, format="json"),
          style="list", addressable=same_space),
    Probe("workspace-query", "workspace", Act.READ, lambda c, o: c.post(f"{WS}/query", {"query": "tasks"}, format="json"),
          style="list", addressable=same_space),
    Probe("workspace-tasks", "workspace", Act.READ, lambda c, o: c.get(f"{WS}/tasks"), style="list", addressable=same_space),
    Probe("workspace-block", "workspace", Act.READ, lambda c, o: c.get(f"{WS}/block"), style="list", addressable=same_space),
    Probe("workspace-tasks", "workspace", Act.WRITE, lambda c, o: c.put(f"{WS}/tasks", [], format="json"),
          style="effect", addressable=same_space, snapshot=state, effect=changed_state),
    Probe("workspace-memory-entry", "workspace", Act.WRITE, lambda c, o: c.delete(f"{WS}/memory/note:{o.secret}"),
          style="effect", addressable=same_space, snapshot=state, effect=changed_state),
    Probe("workspace-memory", "workspace", Act.WRITE,
          lambda c, o: c.post(f"{WS}/memory", {"key": f"note:{o.secret}", "value": "overwritten"}, format="json"),
          style="effect", addressable=same_space, snapshot=state, effect=changed_state),
    Probe("workspace-turns", "workspace", Act.WRITE,
          lambda c, o: c.post(f"{WS}/turns", {"assistantText": f"[MEMORY: {o.secret}-2] {o.secret} again"}, format="json"),
          style="effect", addressable=same_space, snapshot=state, effect=changed_state),
    Probe("workspace-compactions", "workspace", Act.WRITE,
          lambda c, o: c.post(f"{WS}/compactions", {"summary": f"## Key Decisions\n- {o.secret} decided"}, format="json"),
          style="effect", addressable=same_space, snapshot=state, effect=changed_state),
    Probe("mcp:memory_search", "workspace", Act.READ, lambda c, o: mcp(c, "memory_search", {"query": o.secret}, namespace=NS),
          style="list", addressable=same_space),
    Probe("mcp:memory_list", "workspace", Act.READ, lambda c, o: mcp(c, "memory_list", {}, namespace=NS),
          style="list", addressable=same_space),
    Probe("mcp:memory_query", "workspace", Act.READ, lambda c, o: mcp(c, "memory_query", {"query": "tool_calls"}, namespace=NS),
          style="list", addressable=same_space),
    Probe("mcp:memory_save", "workspace", Act.WRITE,
          lambda c, o: mcp(c, "memory_save", {"key": f"note:{o.secret}", "value": "overwritten"}, namespace=NS),
          style="effect", addressable=same_space, snapshot=state, effect=changed_state),
    Probe("mcp:memory_delete", "workspace", Act.WRITE, lambda c, o: mcp(c, "memory_delete", {"key": f"note:{o.secret}"}, namespace=NS),
          style="effect", addressable=same_space, snapshot=state, effect=changed_state),
    # a person's profile, Markdown memory, export and erasure
    Probe("profile", "profile", Act.READ, lambda c, o: c.get("/v1/profiles/end-7"), ("end-7",), style="list"),
    Probe("profile-keys", "profile", Act.READ, lambda c, o: c.get("/v1/profiles/end-7/keys"), ("end-7",), style="list"),
    Probe("profile-facts", "profile", Act.READ, lambda c, o: c.get("/v1/profiles/end-7/facts", {"keys": o.secret}), ("end-7",), style="list"),
    Probe("profile-relevant-keys", "profile", Act.READ,
          lambda c, o: c.post("/v1/profiles/end-7/relevant-keys", {"question": f"what about {o.secret}?"}, format="json"),
          ("end-7",), style="list"),
    Probe("profile-fact", "profile", Act.WRITE, lambda c, o: c.put(f"/v1/profiles/end-7/facts/{o.secret}", {"value": "overwritten"}, format="json"),
          ("end-7",), style="effect", snapshot=state, effect=changed_state),
    Probe("profile-import", "profile", Act.WRITE,
          lambda c, o: c.post("/v1/profiles/end-7/import", {"memory": {o.secret: "overwritten"}}, format="json"),
          ("end-7",), style="effect", snapshot=state, effect=changed_state),
    Probe("markdown", "profile", Act.READ, lambda c, o: c.get("/v1/markdown", {"participantId": "end-7"}), ("end-7",), style="list"),
    Probe("markdown-file", "profile", Act.READ, lambda c, o: c.get("/v1/markdown/MEMORY.md", {"participantId": "end-7"}),
          ("end-7",), style="list"),
    Probe("markdown-import", "profile", Act.WRITE,
          lambda c, o: c.post("/v1/markdown/import?participantId=end-7",
                              {"files": [{"name": "MEMORY.md", "text": f"## User\n- [user] {o.secret}-md imported\n"}]}, format="json"),
          ("end-7",), style="effect", snapshot=state, effect=changed_state),
    Probe("participant-export", "profile", Act.ADMIN, lambda c, o: c.get("/v1/participants/end-7/export"), ("end-7",), style="list"),
    Probe("participant", "profile", Act.ADMIN, lambda c, o: c.delete("/v1/participants/end-7"), ("end-7",),
          style="effect", snapshot=state, effect=changed_state),
    # Claude's memory tool over a person's MEMORY.md folder
    Probe("memory-tool", "memfile", Act.READ, lambda c, o: c.post("/v1/memory-tool/end-7", {"command": "view", "path": "/memories"}, format="json"),
          ("end-7",), style="list"),
    Probe("memory-tool", "memfile", Act.WRITE,
          lambda c, o: c.post("/v1/memory-tool/end-7", {"command": "create", "path": f"/memories/{o.secret}-2.md",
                                                        "file_text": f"{o.secret} likes coffee too.\n"}, format="json"),
          ("end-7",), style="effect", snapshot=state, effect=changed_state),
    # agents (the project's) and their turns
    Probe("agents", "agent", Act.READ, lambda c, o: c.get("/v1/agents"), ("project",), style="list"),
    Probe("agent", "agent", Act.READ, lambda c, o: c.get(f"/v1/agents/{o.id}"), ("project",)),
    Probe("agent-tools", "agent", Act.READ, lambda c, o: c.get(f"/v1/agents/{o.id}/tools"), ("project",), style="status"),
    Probe("agent-context", "agent", Act.READ, lambda c, o: c.post(f"/v1/agents/{o.id}/context", {"userMessage": "hi"}, format="json"),
          ("project",)),
    Probe("mcp:memory_context", "agent", Act.READ, lambda c, o: mcp(c, "memory_context", {"userMessage": "hi"}, agent=o.id),
          ("project",)),
    Probe("agent", "agent", Act.ADMIN, lambda c, o: c.put(f"/v1/agents/{o.id}", AGENT | {"instructions": "changed"}, format="json"),
          ("project",), style="effect", snapshot=agent_instructions, effect=lambda o, before: agent_instructions(o) != before),
    Probe("agent", "agent", Act.ADMIN, lambda c, o: c.delete(f"/v1/agents/{o.id}"),
          ("project",), style="effect", snapshot=agent_instructions, effect=lambda o, before: agent_instructions(o) != before),
    Probe("agents", "agent", Act.ADMIN, lambda c, o: c.post("/v1/agents", AGENT | {"slug": "pol.new"}, format="json"),
          ("project",), style="effect", effect=lambda o, _: agent_instructions(SimpleNamespace(project_id=o.project_id, id="pol.new")) is not None),
    Probe("agent-remember", "agent", Act.WRITE,
          lambda c, o: c.post(f"/v1/agents/{o.id}/remember",
                              {"participantId": "end-7", "arguments": {"type": "acme.preference", "content": f"Prefers {o.secret}"}}, format="json"),
          ("end-7",), style="effect", snapshot=state, effect=changed_state),
    Probe("mcp:memory_remember", "agent", Act.WRITE,
          lambda c, o: mcp(c, "memory_remember", {"type": "acme.preference", "content": f"Prefers {o.secret}"}, agent=o.id,
                           participantId="end-7"),
          ("end-7",), style="effect", snapshot=state, effect=changed_state),
    # the admin API: members and retention any member reads; members, keys and retention admins change
    Probe("members", "agent", Act.READ, lambda c, o: c.get("/v1/members"), ("project",), style="namesake"),
    Probe("members", "agent", Act.ADMIN, lambda c, o: c.post("/v1/members", {"user": _person(o), "role": "reviewer"}, format="json"),
          ("project",), style="effect", effect=lambda o, _: _role_here(o) == "reviewer"),
    Probe("member", "agent", Act.ADMIN, lambda c, o: c.delete(f"/v1/members/{_person(o, role='viewer')}"),
          ("project",), style="effect", effect=lambda o, _: _role_here(o) is None),
    Probe("keys", "agent", Act.ADMIN, lambda c, o: c.get("/v1/keys"), ("project",), style="namesake"),
    Probe("keys", "agent", Act.ADMIN, lambda c, o: c.post("/v1/keys", {"access": "read", "name": o.secret}, format="json"),
          ("project",), style="effect", effect=lambda o, _: _keys_named(o) == 1),
    Probe("key", "agent", Act.ADMIN, lambda c, o: c.delete(f"/v1/keys/{_spare_key(o)}"),
          ("project",), style="effect", effect=lambda o, _: _keys_named(o, revoked=True) == 1),
    Probe("retention", "agent", Act.READ, lambda c, o: c.get("/v1/retention"), ("project",), style="namesake"),
    Probe("retention", "agent", Act.ADMIN,
          lambda c, o: c.put("/v1/retention", {"deletedFactsDays": 3, "expiredFactsDays": 4, "unregisteredConversationsDays": 5},
                             format="json"),
          ("project",), style="effect", effect=lambda o, _: _retention_days(o) == 3),
]


def _person(obj, role: str | None = None) -> str:
    """Another person of the tenant, named after the object (with `role` in its project already)."""
    def make():
        user, _ = get_user_model().objects.get_or_create(username=f"person-{obj.secret}")
        if role:
            Membership.objects.get_or_create(user=user, tenant_id=obj.tenant_id, project_id=obj.project_id, defaults={"role": role})
        return user.username
    return _db(make)


def _role_here(obj) -> str | None:
    return _db(lambda: Membership.objects.filter(user__username=f"person-{obj.secret}", project_id=obj.project_id)
               .values_list("role", flat=True).first())


def _spare_key(obj) -> str:
    """A key of the object's project, named after it."""
    def make():
        from accounts.models import Project

        project = Project.objects.select_related("tenant").get(id=obj.project_id)
        alice = get_user_model().objects.get(username="alice")
        key, _ = apikey_create(user=alice, tenant=project.tenant, project=project, access="read", name=obj.secret)
        return str(key.id)
    return _db(make)


def _keys_named(obj, revoked: bool = False) -> int:
    return _db(lambda: ApiKey.objects.filter(project_id=obj.project_id, name=obj.secret, revoked_at__isnull=not revoked).count())


def _retention_days(obj) -> int | None:
    from accounts.models import RetentionPolicy

    return _db(lambda: RetentionPolicy.objects.filter(project_id=obj.project_id).values_list("deleted_facts_days", flat=True).first())


def _scope(obj) -> dict:
    return {"projectId": None} if obj.shape == "tenant" else {"participantId": obj.participant_id} if obj.participant_id else {}


def _mcp_participant(obj) -> dict:
    return {"participantId": obj.participant_id} if obj.participant_id else {}


def _conversations_with(segment: str) -> int:
    from agent.models import Conversation

    return _db(lambda: Conversation.objects.filter(segment=segment).count())


# --- callers --------------------------------------------------------------------------------------------

STANDINGS = ["tenant-member", "project-member", "removed", "deactivated", "revoked", "other-tenant"]
ROLES = ["viewer", "writer", "reviewer", "admin"]
_made = itertools.count()


@dataclass
class Caller:
    standing: str
    role: str
    access: str
    binding: str | None
    client: APIClient = None

    @property
    def table_role(self) -> str | None:
        """The role the table is read with: none for a removed member."""
        return None if self.standing == "removed" else self.role


def make_caller(world, standing: str, role: str, access: str, binding: str | None) -> Caller:
    user = get_user_model().objects.create_user(f"caller-{next(_made)}")
    tenant, project = (world.globex, world.globex_main) if standing == "other-tenant" else (world.acme, world.desk)
    Membership.objects.create(user=user, tenant=tenant, project=project if standing == "project-member" else None, role=role)
    key, raw = apikey_create(user=user, tenant=tenant, project=project, access=access, participant_id=binding)
    if standing == "removed":
        Membership.objects.filter(user=user).delete()
    elif standing == "deactivated":
        user.is_active = False
        user.save(update_fields=["is_active"])
    elif standing == "revoked":
        apikey_revoke(api_key=ApiKey.objects.get(id=key.id))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return Caller(standing, role, access, binding, client)


def reachable(probe: Probe, caller: Caller, obj: Obj) -> bool:
    """Can the caller name the object at all (its tenant; for working memory, its space)?"""
    return caller.standing != "other-tenant" and probe.addressable(caller.binding, obj)


def expected_allowed(probe: Probe, caller: Caller, obj: Obj) -> bool:
    if not reachable(probe, caller, obj):
        return False
    participant = obj.participant_id
    if probe.bound_writes_own and participant is None and obj.project_id is not None:
        participant = caller.binding
    reach = policy.reach_of(
        SimpleNamespace(participant_id=caller.binding), project_id=obj.project_id, participant_id=participant,
        unattributed=probe.unattributed,
    )
    return policy.decide(role=caller.table_role, access=caller.access, bound=caller.binding is not None, act=probe.act, reach=reach)


def check(probe: Probe, caller: Caller, obj: Obj) -> None:
    before = probe.snapshot(obj) if probe.snapshot else None
    response = probe.call(caller.client, obj)
    status, body = response.status_code, response.content.decode(errors="replace")
    shows = obj.secret in body
    where = f"{probe.door} {probe.act} on {obj.kind}/{obj.shape} by {caller}: {status} {body[:300]}"
    assert status < 500, where
    if caller.standing in {"revoked", "deactivated"}:
        assert status == 401, where
        return
    if probe.style == "me":
        assert status == 200 and response.json()["role"] == caller.table_role, where
        return
    if caller.standing == "removed":
        assert status == 403 and not shows, where  # no role: no rights at all, reads included
        return
    if probe.style == "namesake" and not reachable(probe, caller, obj):
        assert not shows and status in OK | DENIED, where  # another tenant's caller reads its own project's
        return
    allowed = expected_allowed(probe, caller, obj)
    if probe.style == "effect":
        changed = probe.effect(obj, before)
        if allowed:
            assert status in OK and changed, where
        else:
            assert not changed, where
            # refused, or done to the caller's own (another tenant's, another space's) namesake
            assert 400 <= status < 500 or status in OK and not reachable(probe, caller, obj), where
        return
    if allowed:
        assert status in OK, where
        if probe.style not in ("status", "namesake"):
            assert shows, where
    else:
        assert not shows, where
        if probe.style in ("item", "status", "namesake"):
            assert status in DENIED, where


# --- the tests ------------------------------------------------------------------------------------------


def test_every_door_has_a_probe():
    from workspaces.tools import working_memory_tools

    probed = {probe.door for probe in PROBES}
    missing = _api_url_names() - PUBLIC - probed
    assert not missing, f"add a probe for these endpoints: {sorted(missing)}"
    tools = {"memory_context", "memory_remember", "memory_recall"} | {tool["name"] for tool in working_memory_tools()}
    missing_tools = {f"mcp:{name}" for name in tools} - probed
    assert not missing_tools, f"add a probe for these MCP tools: {sorted(missing_tools)}"


@pytest.mark.django_db
@pytest.mark.parametrize("probe", PROBES, ids=[f"{p.door}-{p.act}-{p.kind}-{i}" for i, p in enumerate(PROBES)])
def test_every_door_answers_as_the_table_says(world, probe):
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(
        standing=st.sampled_from(STANDINGS), role=st.sampled_from(ROLES), access=st.sampled_from(["read", "write"]),
        binding=st.sampled_from([None, "end-7", "end-9"]), shape=st.sampled_from(probe.shapes),
    )
    def case(standing, role, access, binding, shape):
        with transaction.atomic():
            obj = make_object(world, probe.kind, shape)
            caller = make_caller(world, standing, role, access, binding)
            try:
                check(probe, caller, obj)
            finally:
                transaction.set_rollback(True)

    case()


def test_the_table_keeps_its_promises():
    """The table itself, over every combination: the rules the policy states in words."""
    reaches = list(policy.Reach)
    for role, access, bound, act, reach in itertools.product([None, *ROLES], ["read", "write"], [False, True], list(Act), reaches):
        allowed = policy.decide(role=role, access=access, bound=bound, act=act, reach=reach)
        if role is None or reach is policy.Reach.OTHER:
            assert not allowed, (role, access, bound, act, reach)  # no role: no rights; nobody reaches another person's
        if access == "read" and act is not Act.READ:
            assert not allowed  # a read key only reads
        if bound and reach in (policy.Reach.PARTICIPANT,):
            assert not allowed  # a bound key never reaches a participant as a stranger
        if bound and act is not Act.READ and reach in (policy.Reach.TENANT, policy.Reach.PROJECT):
            assert not allowed  # a bound key changes only its own participant's
        if reach is policy.Reach.TENANT and act is not Act.READ:
            assert allowed == (role == "admin" and access == "write" and not bound)  # changing it takes what creating it took
        # More rights never take a right away.
        for higher in ROLES[ROLES.index(role) + 1:] if role else ROLES:
            assert not allowed or policy.decide(role=higher, access=access, bound=bound, act=act, reach=reach)
        if access == "read" and allowed:
            assert policy.decide(role=role, access="write", bound=bound, act=act, reach=reach)
