"""The admin API (/v1/members, /v1/keys, /v1/retention) through the Python client against a
live server, the OpenAPI schema that describes it, and `manage.py member`.

Rights are those of the dashboard's settings pages; every caller × endpoint combination is
checked in test_isolation.py and test_policy.py, which enumerate the URL conf.
"""

from __future__ import annotations

import json
from io import StringIO

import httpx
import pytest
from django.core.management import CommandError, call_command

from accounts.models import Membership
from memoryhub.client import MemoryHub, MemoryHubError


def test_a_team_automates_members_keys_and_retention(live_server, tx_world):
    world, url = tx_world, live_server.url
    with MemoryHub(url, world.key()) as admin:  # alice: the tenant's admin
        members = admin.members_list()["data"]
        assert {(m["username"], m["role"], m["projectId"] is None) for m in members} == {("alice", "admin", True), ("bob", "writer", False)}
        assert all(isinstance(m["userId"], str) for m in members)

        # bob becomes a reviewer of acme/desk; an unknown account or role is a 400 that changes nothing
        assert admin.members_set("bob", "reviewer")["role"] == "reviewer"
        with pytest.raises(MemoryHubError) as bad_role:
            admin.members_set("bob", "owner")
        assert bad_role.value.status == 400 and "role" in bad_role.value.errors
        with pytest.raises(MemoryHubError) as nobody:
            admin.members_set("nobody", "viewer")
        assert nobody.value.status == 400 and "nobody" in nobody.value.detail
        assert {m["username"]: m["role"] for m in admin.members_list()["data"]}["bob"] == "reviewer"

        # a key for bob, bound to one end user: shown once, then listed without its secret
        created = admin.keys_create("write", user="bob", participant_id="end-7", name="end-7's app")
        assert created["apiKey"].startswith(f"mh_{created['prefix']}_") and created["participantId"] == "end-7"
        listed = admin.keys_list()["data"]
        assert created["id"] in [k["id"] for k in listed] and created["apiKey"] not in json.dumps(listed)
        with MemoryHub(url, created["apiKey"]) as app:
            me = app.me()
            assert (me["role"], me["participantId"], me["userId"]) == ("reviewer", "end-7", created["userId"])
            with pytest.raises(MemoryHubError) as not_admin:  # an end user's app manages nothing
                app.keys_list()
            assert not_admin.value.status == 403
        # raw HTTP: the created key is never cached
        raw = httpx.post(f"{url}/v1/keys", json={"access": "read"}, headers={"Authorization": f"Bearer {world.key()}"})
        assert raw.status_code == 201 and raw.headers["Cache-Control"] == "no-store" and raw.json()["username"] == "alice"

        admin.keys_revoke(created["id"])
        with MemoryHub(url, created["apiKey"]) as app, pytest.raises(MemoryHubError) as revoked:
            app.me()
        assert revoked.value.status == 401
        assert next(k for k in admin.keys_list()["data"] if k["id"] == created["id"])["revokedAt"] is not None
        with pytest.raises(MemoryHubError) as unknown_key:
            admin.keys_revoke("not-a-key")
        assert unknown_key.value.status == 404

        # retention: read by any member, set by admins; a negative number is a 400 that changes nothing
        before = admin.retention_get()
        assert admin.retention_set(deleted_facts_days=7, expired_facts_days=None, unregistered_conversations_days=30) == {
            "deletedFactsDays": 7, "expiredFactsDays": None, "unregisteredConversationsDays": 30}
        with pytest.raises(MemoryHubError) as negative:
            admin.retention_set(deleted_facts_days=-1, expired_facts_days=1, unregistered_conversations_days=1)
        assert negative.value.status == 400 and "deletedFactsDays" in negative.value.errors
        assert admin.retention_get()["deletedFactsDays"] == 7 and before != admin.retention_get()

        # bob (a reviewer now) reads members and retention but changes neither
        with MemoryHub(url, world.key(user=world.bob)) as bob:
            assert len(bob.members_list()["data"]) == 2 and bob.retention_get()["deletedFactsDays"] == 7
            for call in (lambda: bob.members_set("alice", "viewer"), bob.keys_list,
                         lambda: bob.retention_set(deleted_facts_days=1, expired_facts_days=1, unregistered_conversations_days=1)):
                with pytest.raises(MemoryHubError) as refused:
                    call()
                assert refused.value.status == 403

        # nobody removes their own role; bob's goes, and his keys lose their rights with it
        with pytest.raises(MemoryHubError):
            admin.members_remove("alice")
        admin.members_remove("bob")
        assert [m["username"] for m in admin.members_list()["data"]] == ["alice"]
        with pytest.raises(MemoryHubError) as gone:
            admin.members_remove("bob")
        assert gone.value.status == 404

    # a tenant-wide key names the project
    with MemoryHub(url, world.key(tenant_wide=True)) as tenant:
        with pytest.raises(MemoryHubError) as no_project:
            tenant.members_list()
        assert no_project.value.status == 400 and "projectId" in no_project.value.errors
        assert tenant.retention_get(project_id=str(world.desk.id))["deletedFactsDays"] == 7


@pytest.mark.django_db
def test_the_schema_describes_the_admin_api(client):
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/json").json()
    operations = {op["operationId"] for item in schema["paths"].values() for op in item.values() if isinstance(op, dict) and "operationId" in op}
    assert {"members_list", "members_set", "members_remove", "keys_list", "keys_create", "keys_revoke", "retention_get", "retention_set"} <= operations
    created = schema["paths"]["/v1/keys"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]["$ref"]
    assert "apiKey" in schema["components"]["schemas"][created.rsplit("/", 1)[1]]["properties"]


@pytest.mark.django_db
def test_manage_py_member(world):
    def member(*args) -> dict:
        out = StringIO()
        call_command("member", *args, stdout=out)
        return json.loads(out.getvalue())

    added = member("add", "--user", "charlie", "--project", "acme/desk", "--role", "writer")
    assert added["role"] == "writer" and added["project"] == "acme/desk"
    assert Membership.objects.get(user=world.charlie, project=world.desk).role == "writer"
    assert member("add", "--user", "charlie", "--project", "acme/desk", "--role", "reviewer")["role"] == "reviewer"
    listed = member("list", "--project", "acme/desk")["members"]
    assert {"user": "charlie", "role": "reviewer", "tenantWide": False} in listed
    assert member("remove", "--user", "charlie", "--project", "acme/desk")["removed"] is True
    assert not Membership.objects.filter(user=world.charlie, project=world.desk).exists()
    with pytest.raises(CommandError, match="no role of its own"):
        member("remove", "--user", "charlie", "--project", "acme/desk")
    with pytest.raises(CommandError, match="no user 'nobody'"):
        member("add", "--user", "nobody", "--project", "acme/desk", "--role", "writer")
    with pytest.raises(CommandError, match="No project"):
        member("add", "--user", "charlie", "--project", "acme/nowhere", "--role", "writer")


@pytest.mark.django_db
def test_a_key_does_not_revoke_itself(world):
    client = world.client()
    own = client.get("/v1/me").json()["apiKeyId"]
    refused = client.delete(f"/v1/keys/{own}")
    assert refused.status_code == 400 and refused["Content-Type"] == "application/problem+json"
    assert client.get("/v1/me").status_code == 200  # still works
    too_long = client.put("/v1/retention", {"deletedFactsDays": 36_501, "expiredFactsDays": 1, "unregisteredConversationsDays": 1}, format="json")
    assert too_long.status_code == 400 and "deletedFactsDays" in too_long.json()["errors"]
