"""The isolation matrix: every /v1 endpoint × every kind of caller.

Endpoints come from the URL conf, so an endpoint added without an entry in ENDPOINTS
fails `test_every_endpoint_is_in_the_matrix`. Callers: the owner; a key of another
project of the same tenant; another tenant's admin; a read key; keys bound to the
fact's participant and to another participant; a revoked key; no key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from accounts.models import ApiKey, Membership
from accounts.services import apikey_revoke

PUBLIC = {"schema", "docs"}  # served without a key on purpose


@dataclass
class Endpoint:
    path: str  # with {fact} for the object under test
    methods: dict[str, dict | None] = field(default_factory=dict)  # method -> body
    writes: frozenset = frozenset({"post", "put", "patch", "delete"})
    target: str = "fact"  # what {fact} names: "fact", "approval" (of a pending fact), "agent", "conversation", "participant", "workspace" or "profile"
    expect: dict = field(default_factory=dict)  # caller -> statuses, where the general rule does not fit

    @property
    def is_object(self) -> bool:
        return "{fact}" in self.path


NOTE = {"type": "acme.note", "content": "isolation probe"}
WORKSPACE_ELSEWHERE = {"other-project": {200, 201}, "other-tenant": {200, 201}, "other-participant": {200, 201}}
PARTICIPANT_VIEW = {
    "target": "profile", "writes": frozenset({"get", "post", "put"}),
    "expect": {"other-project": {200, 201}, "other-tenant": {200, 201}, "other-participant": {403}},
}
ENDPOINTS = {
    "me": Endpoint("/v1/me", {"get": None}),
    "facts": Endpoint("/v1/facts", {"get": None, "post": NOTE}),
    "facts-batch": Endpoint("/v1/facts/batch", {"post": {"facts": [NOTE]}}),
    "fact": Endpoint("/v1/facts/{fact}", {"get": None, "delete": None}),
    "fact-supersede": Endpoint("/v1/facts/{fact}/supersede", {"post": {"content": "changed", "expectVersion": 1}}),
    "fact-verify": Endpoint("/v1/facts/{fact}/verify", {"post": None}),
    "fact-revisions": Endpoint("/v1/facts/{fact}/revisions", {"get": None}),
    "retrieve": Endpoint(
        "/v1/retrieve",
        {"post": {"query": "owner's secret text", "agent": "iso.desk", "intents": [
            {"scope": "same-project", "mode": "both"}, {"scope": "same-user", "mode": "keyword"}, {"scope": "tenant"},
            {"source": "conversations", "scope": "same-project", "mode": "keyword", "roles": ["user", "agent"]},
            {"source": "conversations", "scope": "same-user", "mode": "none"},
        ]}},
        writes=frozenset(),
        target="agent",  # the owner's agent, a fact and a conversation holding the secret
    ),
    # Approvals are for reviewers and admins: a read key is refused reading them too.
    "approvals": Endpoint("/v1/approvals", {"get": None}, writes=frozenset({"get"}), target="approval"),
    "approval": Endpoint("/v1/approvals/{fact}", {"get": None}, writes=frozenset({"get"}), target="approval"),
    "approval-approve": Endpoint("/v1/approvals/{fact}/approve", {"post": {"note": "fine"}}, target="approval"),
    "approval-reject": Endpoint("/v1/approvals/{fact}/reject", {"post": {}}, target="approval"),
    # Agents belong to a project, not to a participant: any key of the project may use them.
    "agents": Endpoint("/v1/agents", {"get": None, "post": {"slug": "iso.new", "instructions": "x"}}),
    "agent": Endpoint("/v1/agents/{fact}", {"get": None, "put": {"instructions": "changed"}, "delete": None}, target="agent"),
    "agent-context": Endpoint("/v1/agents/{fact}/context", {"post": {"userMessage": "secret"}}, writes=frozenset(), target="agent"),
    "agent-tools": Endpoint("/v1/agents/{fact}/tools", {"get": None}, target="agent"),
    "agent-remember": Endpoint(
        "/v1/agents/{fact}/remember", {"post": {"arguments": {"type": "acme.preference", "content": "prefers email"}}}, target="agent",
    ),
    # Conversations are a participant's when they name one, as facts are.
    "conversations": Endpoint(
        "/v1/conversations", {"post": {"agent": "iso.desk"}}, target="agent",
        # The agent is the owner project's: another project or tenant has no such agent (400, nothing of it shown).
        expect={"other-project": {400}, "other-tenant": {400}},
    ),
    "conversation": Endpoint("/v1/conversations/{fact}", {"get": None, "delete": None}, target="conversation"),
    "conversation-messages": Endpoint(
        "/v1/conversations/{fact}/messages", {"get": None, "post": {"messages": [{"role": "user", "text": "hello"}]}}, target="conversation",
    ),
    # A participant's data is for admins (a read key is refused reading it too). Another
    # project or tenant has none of the owner's end-7: an empty answer, nothing shown.
    "participant": Endpoint(
        "/v1/participants/{fact}", {"delete": None}, target="participant",
        expect={"other-project": {200}, "other-tenant": {200}, "other-participant": {403}},
    ),
    "participant-export": Endpoint(
        "/v1/participants/{fact}/export", {"get": None}, writes=frozenset({"get"}), target="participant",
        expect={"other-project": {200}, "other-tenant": {200}, "other-participant": {403}},
    ),
    # Working memory: a namespace is named by the caller, so another project, tenant or
    # participant reaches its own (empty) namespace of that name: never the owner's entries.
    "workspace-memory": Endpoint(
        "/v1/workspaces/{fact}/memory", {"get": None, "post": {"key": "note:probe", "value": "probe"}}, target="workspace",
        expect=WORKSPACE_ELSEWHERE,
    ),
    "workspace-memory-keys": Endpoint("/v1/workspaces/{fact}/memory/keys", {"get": None}, target="workspace", expect=WORKSPACE_ELSEWHERE),
    "workspace-memory-entry": Endpoint("/v1/workspaces/{fact}/memory/secret", {"delete": None}, target="workspace"),
    "workspace-query": Endpoint(
        "/v1/workspaces/{fact}/query", {"post": {"query": "map(memory, {k: .key, v: .value})"}}, writes=frozenset(),
        target="workspace", expect=WORKSPACE_ELSEWHERE,
    ),
    "workspace-turns": Endpoint(
        "/v1/workspaces/{fact}/turns", {"post": {"assistantText": "[MEMORY: probe] isolation probe"}}, target="workspace",
        expect=WORKSPACE_ELSEWHERE,
    ),
    "workspace-compactions": Endpoint(
        "/v1/workspaces/{fact}/compactions", {"post": {"summary": "## Key Decisions\n- probe"}}, target="workspace",
        expect=WORKSPACE_ELSEWHERE,
    ),
    "workspace-tasks": Endpoint(
        "/v1/workspaces/{fact}/tasks",
        {"get": None, "put": [{"id": "t1", "desc": "probe", "status": "open", "rounds": 0, "note": ""}]},
        target="workspace", expect=WORKSPACE_ELSEWHERE,
    ),
    "workspace-block": Endpoint("/v1/workspaces/{fact}/block", {"get": None}, target="workspace", expect=WORKSPACE_ELSEWHERE),
    # Profiles and markdown memory are a participant's facts: reading them takes the
    # participant rule too (a read key is refused); another project or tenant reaches its
    # own (empty) end-7, another participant's key is refused.
    "profile": Endpoint("/v1/profiles/{fact}", {"get": None}, **PARTICIPANT_VIEW),
    "profile-keys": Endpoint("/v1/profiles/{fact}/keys", {"get": None}, **PARTICIPANT_VIEW),
    "profile-facts": Endpoint("/v1/profiles/{fact}/facts?keys=secret,probe", {"get": None}, **PARTICIPANT_VIEW),
    "profile-fact": Endpoint("/v1/profiles/{fact}/facts/probe", {"put": {"value": "probe"}}, **PARTICIPANT_VIEW),
    "profile-relevant-keys": Endpoint("/v1/profiles/{fact}/relevant-keys", {"post": {"question": "What is the secret?"}}, **PARTICIPANT_VIEW),
    "profile-import": Endpoint("/v1/profiles/{fact}/import", {"post": {"memory": {"probe": "probe"}}}, **PARTICIPANT_VIEW),
    "markdown": Endpoint("/v1/markdown?participantId={fact}", {"get": None}, **PARTICIPANT_VIEW),
    "markdown-file": Endpoint("/v1/markdown/MEMORY.md?participantId={fact}", {"get": None}, **PARTICIPANT_VIEW),
    "markdown-import": Endpoint(
        "/v1/markdown/import?participantId={fact}", {"post": {"files": [{"name": "MEMORY.md", "text": "## User\n- [user] probe\n"}]}},
        **PARTICIPANT_VIEW,
    ),
    # Claude's memory tool over the same folder: `view` of the index that shows the secret to its owner.
    "memory-tool": Endpoint("/v1/memory-tool/{fact}", {"post": {"command": "view", "path": "/memories/MEMORY.md"}}, **PARTICIPANT_VIEW),
    # The admin API: the project's members and retention any member reads; members, keys and
    # retention only admins change (a read key and a key bound to one end user may not).
    # Another project or tenant reaches its own.
    "members": Endpoint("/v1/members", {"get": None, "post": {"user": "bob", "role": "reviewer"}}),
    "member": Endpoint("/v1/members/{fact}", {"delete": None}, target="membership"),
    "keys": Endpoint("/v1/keys", {"get": None, "post": {"access": "read", "name": "iso"}}, writes=frozenset({"get", "post"})),
    "key": Endpoint("/v1/keys/{fact}", {"delete": None}, target="apikey"),
    "retention": Endpoint("/v1/retention", {"get": None, "put": {
        "deletedFactsDays": 7, "expiredFactsDays": None, "unregisteredConversationsDays": 30}}),
}
ISO_AGENT = {
    "slug": "iso.desk",
    "retrieval": [
        {"scope": "same-user", "mode": "keyword"}, {"scope": "same-project", "mode": "keyword"},
        {"source": "conversations", "scope": "same-project", "mode": "keyword", "roles": ["user", "agent"]},
        {"source": "conversations", "scope": "same-user", "mode": "none"},
    ],
    "memory": {"remember": {"types": ["acme.preference"], "scope": "same-project"}},
}

# Endpoints whose writes administer the project (agents): not for a participant-bound key.
ADMINISTERS = {"agents", "agent", "members", "member", "keys", "key", "retention"}


def name_of(endpoint: Endpoint) -> str:
    return next(name for name, known in ENDPOINTS.items() if known is endpoint)


CALLERS = ["owner", "other-project", "other-tenant", "read-key", "same-participant", "other-participant", "revoked", "no-key"]


def _api_url_names(patterns=None, prefix="") -> set[str]:
    names = set()
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            names |= _api_url_names(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and (prefix + str(entry.pattern)).startswith("v1/"):
            names.add(entry.name)
    return names


def test_every_endpoint_is_in_the_matrix():
    missing = _api_url_names() - set(ENDPOINTS) - PUBLIC
    assert not missing, f"add these endpoints to the isolation matrix: {sorted(missing)}"


def _client(world, caller: str) -> APIClient:
    if caller == "no-key":
        return APIClient()
    if caller == "revoked":
        client = world.client()
        apikey_revoke(api_key=ApiKey.objects.get(prefix=client.raw_key.split("_")[1]))
        return client
    options = {
        "owner": {},
        "other-project": {"project": world.ops},
        "other-tenant": {"user": world.charlie, "project": world.globex_main},
        "read-key": {"access": "read"},
        "same-participant": {"participant": "end-7"},
        "other-participant": {"participant": "end-9"},
    }[caller]
    return world.client(**options)


def _target(world, caller: str, kind: str = "fact") -> str:
    """The owner's object each caller probes: a participant's fact for participant keys."""
    if kind == "approval":
        return _pending_approval(world, participant="end-7" if caller in {"same-participant", "other-participant"} else None)
    if kind == "workspace":  # the owner's namespace, with a secret entry (end-7's, for participant keys)
        writer = world.client(participant="end-7") if caller in {"same-participant", "other-participant"} else world.client()
        saved = writer.post("/v1/workspaces/iso-ws/memory", {"key": "secret", "value": "owner's secret text"}, format="json")
        assert saved.status_code == 201, saved.content
        return "iso-ws"
    if kind == "profile":  # the owner's end-7, with a secret in their profile and in their markdown memory
        owner = world.client()
        assert owner.put("/v1/profiles/end-7/facts/secret", {"value": "owner's secret text"}, format="json").status_code == 201
        body = {"type": "memory.user", "content": "owner's secret text", "scope": {"participantId": "end-7"}}
        assert owner.post("/v1/facts", body, format="json").status_code == 201
        return "end-7"
    if kind == "membership":  # bob's role in the owner's project, by his username
        return "bob"
    if kind == "apikey":  # a key of the owner's project
        from accounts.services import apikey_create

        key, _ = apikey_create(user=world.bob, tenant=world.acme, project=world.desk, access="read", name="owner's secret text")
        return str(key.id)
    if kind == "participant":  # the owner's end-7, with a secret fact kept for them
        body = dict(NOTE, content="owner's secret text", scope={"participantId": "end-7"})
        assert world.client().post("/v1/facts", body, format="json").status_code == 201
        return "end-7"
    owner = world.client()
    if kind in {"agent", "conversation"}:
        assert owner.post("/v1/agents", ISO_AGENT, format="json").status_code == 201
        _target(world, caller)  # and secrets the agent's reads must not leak: a fact,
        conversation = {"agent": ISO_AGENT["slug"]}  # and what was said in a conversation
        if caller in {"same-participant", "other-participant"}:
            conversation["participantId"] = "end-7"
        created = owner.post("/v1/conversations", conversation, format="json")
        assert created.status_code == 201, created.content
        said = [{"role": "user", "text": "owner's secret text"}, {"role": "agent", "text": "noted, owner's secret text"}]
        assert owner.post(f"/v1/conversations/{created.json()['id']}/messages", {"messages": said}, format="json").status_code == 201
        return ISO_AGENT["slug"] if kind == "agent" else created.json()["id"]
    body = dict(NOTE, content="owner's secret text")
    if caller in {"same-participant", "other-participant"}:
        body["scope"] = {"participantId": "end-7"}
    response = owner.post("/v1/facts", body, format="json")
    assert response.status_code == 201
    return response.json()["id"]


def _pending_approval(world, participant: str | None) -> str:
    """An approval of a fact an agent remembered for the owner's project, waiting for a reviewer."""
    from accounts.services import Principal
    from approvals.services import approval_request
    from core import scoping
    from facts.services import FactInput, Provenance, fact_write

    principal = Principal(
        api_key_id=None, tenant_id=world.acme.id, project_id=world.desk.id, user_id=world.alice.pk, access="write",
        role="admin", participant_id=None,
    )
    agent = {"id": "acme.desk", "kind": "agent", "agentVersion": "1.0.0"}
    with scoping.scope(tenant_id=world.acme.id, project_id=world.desk.id):
        fact, _ = fact_write(
            principal=principal,
            data=FactInput(type="acme.note", content="owner's secret text", participant_id=participant),
            provenance=Provenance(trust="unverified", attributed_to=agent, status="pending"),
        )
        approval = approval_request(fact=fact, reasons=[{"rule": "wide-scope", "match": "same-project"}], requested_by=agent)
    return str(approval.id)


def _expected(endpoint: Endpoint, method: str, caller: str) -> set[int]:
    if caller in {"revoked", "no-key"}:
        return {401}
    if caller in endpoint.expect:
        return endpoint.expect[caller]
    writes = method in endpoint.writes
    if name_of(endpoint) in ADMINISTERS and writes and caller in {"same-participant", "other-participant"}:
        return {403}  # a key handed to one end user's app declares no agents (core.policy)
    if endpoint.target == "agent" and caller == "other-participant":
        caller = "same-participant"  # agents are the project's, not a participant's
    if endpoint.is_object:
        if caller in {"other-project", "other-tenant", "other-participant"}:
            return {404}
        if caller == "read-key" and writes:
            return {403}
        return {200, 201, 204}
    if caller == "read-key" and writes:
        return {403}
    return {200, 201}


CASES = [
    (name, method, caller)
    for name, endpoint in ENDPOINTS.items()
    for method in endpoint.methods
    for caller in CALLERS
]


@pytest.mark.django_db
@pytest.mark.parametrize("name, method, caller", CASES, ids=[f"{n}-{m}-{c}" for n, m, c in CASES])
def test_isolation(world, name, method, caller):
    endpoint = ENDPOINTS[name]
    fact_id = _target(world, caller, endpoint.target)
    client = _client(world, caller)
    body = endpoint.methods[method]
    response = getattr(client, method)(endpoint.path.format(fact=fact_id), body, format="json")
    assert response.status_code in _expected(endpoint, method, caller), (response.status_code, response.content[:300])
    if response.status_code >= 400:
        assert response["Content-Type"] == "application/problem+json"
    if caller in {"other-project", "other-tenant", "other-participant"}:
        # Nothing of the owner's object reaches another project, tenant or participant
        # (an agent is the whole project's, so another participant may see it).
        # A workspace's name is the caller's own choice, not the owner's secret.
        if not (endpoint.target == "agent" and caller == "other-participant") and endpoint.target != "workspace":
            assert fact_id not in response.content.decode()
        assert "owner's secret text" not in response.content.decode()


@pytest.mark.django_db
def test_participant_bound_key_sees_only_its_participant(world):
    owner = world.client()
    for participant in ["end-7", "end-9", None]:
        scope = {"participantId": participant} if participant else {}
        owner.post("/v1/facts", dict(NOTE, content=f"about {participant}", scope=scope), format="json")
    bound = world.client(participant="end-7", access="read")
    listed = bound.get("/v1/facts").json()["data"]
    # its participant's facts and the project's (kept for no one), never another person's
    assert sorted(f["scope"]["participantId"] or "-" for f in listed) == ["-", "end-7"]
    denied = bound.get("/v1/facts", {"participantId": "end-9"})
    assert denied.status_code == 403 and denied.json()["code"] == "participant-not-allowed"
    writer_bound = world.client(participant="end-7")
    naming_other = writer_bound.post("/v1/facts", dict(NOTE, scope={"participantId": "end-9"}), format="json")
    assert naming_other.status_code == 403 and naming_other.json()["code"] == "participant-not-allowed"
    own = writer_bound.post("/v1/facts", NOTE, format="json").json()
    assert own["scope"]["participantId"] == "end-7"  # a bound key writes for its participant
    project_fact = next(f for f in listed if f["scope"]["participantId"] is None)
    # and changes only those: the project's facts it reads, but may not change
    refused = writer_bound.delete(f"/v1/facts/{project_fact['id']}")
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"


@pytest.mark.django_db
def test_read_key_reads_no_participant_facts(world):
    owner = world.client()
    owner.post("/v1/facts", dict(NOTE, scope={"participantId": "end-7"}), format="json")
    reader = world.client(access="read")
    assert reader.get("/v1/facts").json()["data"] == []
    refused = reader.get("/v1/facts", {"participantId": "end-7"})
    assert refused.status_code == 403 and refused.json()["code"] == "participant-not-allowed"


@pytest.mark.django_db
def test_naming_another_tenants_project_is_404(world):
    response = world.client().post("/v1/facts", dict(NOTE, scope={"projectId": str(world.globex_main.id)}), format="json")
    assert response.status_code == 404
    tenant_key = world.client(tenant_wide=True)
    assert tenant_key.post("/v1/facts", dict(NOTE, scope={"projectId": str(world.globex_main.id)}), format="json").status_code == 404
    assert tenant_key.post("/v1/facts", dict(NOTE, scope={"projectId": str(world.ops.id)}), format="json").status_code == 201


@pytest.mark.django_db
def test_a_member_without_a_role_in_the_project_is_forbidden(world):
    # bob is a writer of acme/desk only: no key of his is made for acme/ops, where he has no role,
    from core.errors import ValidationFailed

    with pytest.raises(ValidationFailed, match="no role"):
        world.key(user=world.bob, project=world.ops)
    # and a key of his whose role went away has no rights at all, reads included.
    bob = world.client(user=world.bob)
    assert bob.post("/v1/facts", NOTE, format="json").status_code == 201
    Membership.objects.filter(user=world.bob).delete()
    for response in [bob.get("/v1/facts"), bob.post("/v1/retrieve", {"query": "x", "intents": [{"scope": "same-project"}]}, format="json"),
                     bob.post("/v1/facts", NOTE, format="json")]:
        assert response.status_code == 403 and response.json()["code"] == "forbidden", response.content
    assert bob.get("/v1/me").json()["role"] is None  # it may still ask what it is
