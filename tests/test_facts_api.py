"""Facts through the API: write, read, key slots, supersede, verify, delete, history."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

WASHING = {"type": "acme.note", "content": {"text": "end-7 orders spare parts for a washing machine."}, "scope": {"participantId": "end-7"}}


def test_write_returns_the_fact_as_the_seed_shows(world):
    client = world.client()
    body = dict(WASHING, scope={"projectId": str(world.desk.id), "participantId": "end-7"})
    response = client.post("/v1/facts", body, format="json")
    assert response.status_code == 201, response.content
    fact = response.json()
    assert fact["version"] == 1
    assert fact["contentHash"] == "sha256:f7de1d8940eba40c71e365c8e853f9cc631c6948e8b17e786417b116cdee69bc"
    assert fact["size"] == 58
    assert fact["trust"] == "asserted"
    assert fact["attributedTo"] == {"id": str(world.alice.pk), "kind": "user"}
    assert fact["scope"] == {"tenantId": str(world.acme.id), "projectId": str(world.desk.id), "participantId": "end-7", "conversationId": None}
    assert fact["subjects"] == [{"kind": "participant", "id": "end-7"}]
    assert fact["status"] == "active"
    got = client.get(f"/v1/facts/{fact['id']}").json()
    assert got == fact
    listed = client.get("/v1/facts?type=acme.note").json()
    assert [f["id"] for f in listed["data"]] == [fact["id"]]


@pytest.mark.parametrize("field", ["trust", "version", "attributedTo", "status", "tenantId", "contentHash", "id"])
def test_fields_the_server_sets_are_refused(world, in_scope, field):
    from facts.models import Fact

    client = world.client()
    response = client.post("/v1/facts", dict(WASHING, **{field: "x"}), format="json")
    assert response.status_code == 400
    problem = response.json()
    assert response["Content-Type"] == "application/problem+json"
    assert problem["code"] == "validation-error"
    assert field in problem["errors"]
    assert Fact.objects.count() == 0


def test_tenant_id_in_scope_is_refused(world):
    response = world.client().post("/v1/facts", dict(WASHING, scope={"tenantId": str(world.globex.id)}), format="json")
    assert response.status_code == 400
    assert "scope.tenantId" in response.json()["errors"]


@pytest.mark.parametrize(
    "change, field",
    [
        ({"type": "bad type!"}, "type"),
        ({"type": "x" * 201}, "type"),
        ({"key": "no spaces please"}, "key"),
        ({"content": None}, "content"),
        ({"content": {"text": "x" * (16 * 1024 + 1)}}, "content"),
        ({"content": {"blob": "x" * (64 * 1024)}}, "content"),
        ({"content": "bad \u0000 nul"}, "content"),
    ],
)
def test_limits_give_clear_errors(world, change, field):
    response = world.client().post("/v1/facts", dict(WASHING, **change), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_content_nesting_is_limited(world):
    deep = "x"
    for _ in range(40):
        deep = [deep]
    response = world.client().post("/v1/facts", dict(WASHING, content=deep), format="json")
    assert response.status_code == 400
    assert "32" in response.json()["detail"]


def test_same_key_in_same_scope_supersedes(world):
    client = world.client()
    first = client.post("/v1/facts", {"type": "acme.preference", "key": "contact", "content": "email", "scope": {"participantId": "end-7"}}, format="json").json()
    second = client.post("/v1/facts", {"type": "acme.preference", "key": "contact", "content": "phone", "scope": {"participantId": "end-7"}}, format="json").json()
    assert second["id"] == first["id"]
    assert second["version"] == 2
    assert second["content"] == "phone"
    other = client.post("/v1/facts", {"type": "acme.preference", "key": "contact", "content": "fax", "scope": {"participantId": "end-8"}}, format="json").json()
    assert other["id"] != first["id"]
    revisions = client.get(f"/v1/facts/{first['id']}/revisions").json()["data"]
    assert [(r["version"], r["invalidationReason"]) for r in revisions] == [(1, "superseded"), (2, None)]


def test_supersede_verify_delete_and_history(world):
    client = world.client()
    fact = client.post("/v1/facts", WASHING, format="json").json()
    url = f"/v1/facts/{fact['id']}"

    missing = client.post(url + "/supersede", {"content": "Prefers phone"}, format="json")
    assert missing.status_code == 428
    stale = client.post(url + "/supersede", {"content": "Prefers phone", "expectVersion": 7}, format="json")
    assert stale.status_code == 409
    assert stale.json()["code"] == "version-conflict"
    assert stale.json()["currentVersion"] == 1

    two = client.post(url + "/supersede", {"content": "Prefers phone", "expectVersion": 1}, format="json").json()
    assert two["version"] == 2 and two["content"] == "Prefers phone"
    three = client.post(url + "/supersede", {"content": "Prefers fax"}, format="json", HTTP_IF_MATCH='"2"').json()
    assert three["version"] == 3

    verified = client.post(url + "/verify").json()
    assert verified["version"] == 4
    assert verified["trust"] == "verified"
    assert verified["verifiedBy"] == str(world.alice.pk)
    assert verified["expiresAt"] is None

    before_delete = verified["updatedAt"]
    assert client.delete(url).status_code == 204
    deleted = client.get(url).json()
    assert deleted["status"] == "deleted"
    assert client.get("/v1/facts").json()["data"] == []

    first = client.get(url + "?revision=1").json()
    assert first["content"] == WASHING["content"]
    assert first["invalidationReason"] == "superseded"
    as_of = client.get(url, {"asOf": before_delete}).json()
    assert as_of["version"] == 4 and as_of["status"] == "active"
    revisions = client.get(url + "/revisions").json()["data"]
    assert [r["version"] for r in revisions] == [1, 2, 3, 4]
    assert revisions[-1]["invalidationReason"] == "deleted"
    assert client.get(url, {"asOf": "2000-01-01T00:00:00Z"}).status_code == 404
    after = client.post(url + "/supersede", {"content": "x", "expectVersion": 4}, format="json")
    assert after.status_code == 409


def test_verify_needs_a_reviewer(world):
    writer = world.client(user=world.bob)
    fact = writer.post("/v1/facts", {"type": "acme.note", "content": "hi"}, format="json").json()
    response = writer.post(f"/v1/facts/{fact['id']}/verify")
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


def test_expired_facts_are_in_no_list(world):
    client = world.client()
    client.post("/v1/facts", {"type": "acme.note", "content": "old", "expiresAt": "2001-01-01T00:00:00Z"}, format="json")
    client.post("/v1/facts", {"type": "acme.note", "content": "stale", "validUntil": "2001-01-01T00:00:00Z"}, format="json")
    fresh = client.post("/v1/facts", {"type": "acme.note", "content": "new", "expiresAt": "2999-01-01T00:00:00Z"}, format="json").json()
    assert [f["id"] for f in client.get("/v1/facts").json()["data"]] == [fresh["id"]]
    assert len(client.get("/v1/facts?status=expired").json()["data"]) == 2


def test_references_must_stay_in_the_project(world):
    client = world.client()
    ops_client = world.client(project=world.ops)
    other = ops_client.post("/v1/facts", {"type": "acme.note", "content": "ops"}, format="json").json()
    mine = client.post("/v1/facts", {"type": "acme.note", "content": "desk"}, format="json").json()
    ok = client.post("/v1/facts", {"type": "acme.note", "content": "child", "references": [mine["id"]]}, format="json")
    assert ok.status_code == 201 and ok.json()["references"] == [mine["id"]]
    bad = client.post("/v1/facts", {"type": "acme.note", "content": "child", "references": [other["id"]]}, format="json")
    assert bad.status_code == 400
    assert "references" in bad.json()["errors"]


def test_batch_is_all_or_nothing(world, in_scope):
    from facts.models import Fact, FactRevision

    client = world.client()
    good = [{"type": "acme.note", "content": f"note {i}"} for i in range(5)]
    response = client.post("/v1/facts/batch", {"facts": good + [{"type": "bad type", "content": "x"}]}, format="json")
    assert response.status_code == 400
    assert "facts[5].type" in response.json()["errors"]
    assert Fact.objects.count() == 0
    response = client.post("/v1/facts/batch", {"facts": good + [{"type": "acme.pref", "key": "k", "content": "a"}, {"type": "acme.pref", "key": "k", "content": "b"}]}, format="json")
    assert response.status_code == 201
    facts = response.json()["facts"]
    assert len(facts) == 7
    assert facts[5]["id"] == facts[6]["id"] and facts[6]["version"] == 2
    assert Fact.objects.count() == 6 and FactRevision.objects.count() == 7
    too_many = client.post("/v1/facts/batch", {"facts": [{"type": "a", "content": 1}] * 1001}, format="json")
    assert too_many.status_code == 400


def test_tenant_wide_facts_take_an_admin_tenant_key(world):
    writer = world.client(user=world.bob)
    assert writer.post("/v1/facts", {"type": "acme.policy", "content": "x", "scope": {"projectId": None}}, format="json").status_code == 403
    admin = world.client(tenant_wide=True)
    fact = admin.post("/v1/facts", {"type": "acme.policy", "content": "Refunds within 30 days"}, format="json")
    assert fact.status_code == 201
    assert fact.json()["scope"]["projectId"] is None
    # every project of the tenant sees it
    assert [f["content"] for f in world.client(project=world.ops).get("/v1/facts").json()["data"]] == ["Refunds within 30 days"]
    assert world.client(project=world.globex_main, user=world.charlie).get("/v1/facts").json()["data"] == []
