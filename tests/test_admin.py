"""The admin: facts read-only with verify and delete through the services; API keys shown once.

`root` is a superuser with no membership anywhere (acts as an admin of every tenant);
bob, from the shared world, is staff here only where a test makes him so.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.models import Access, ApiKey, Membership
from accounts.services import Principal, apikey_authenticate, apikey_create, role_for
from core import scoping
from facts.models import Fact, FactRevision, Status, Trust
from facts.services import FactInput, fact_delete, fact_write

pytestmark = pytest.mark.django_db

FACTS = "/admin/facts/fact/"
KEYS = "/admin/memoryhub/apikey/"
RAW_KEY = re.compile(r"mh_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


@pytest.fixture
def admin(admin_client) -> Client:
    return admin_client


def principal(user, project) -> Principal:
    return Principal(
        api_key_id=None, tenant_id=project.tenant_id, project_id=project.id, user_id=user.pk, access=Access.WRITE,
        role=role_for(user_id=user.pk, tenant_id=project.tenant_id, project_id=project.id), participant_id=None,
    )


def write(user, project, **fields) -> Fact:
    fields.setdefault("type", "acme.note")
    with scoping.scope(tenant_id=project.tenant_id, project_id=project.id):
        fact, _ = fact_write(principal=principal(user, project), data=FactInput(**fields))
    return fact


def shown(response) -> set[str]:
    return {str(fact.id) for fact in response.context["cl"].result_list}


def notes(response) -> list[str]:
    return [message.message for message in get_messages(response.wsgi_request)]


def run_action(client: Client, action: str, objects, url: str = FACTS):
    return client.post(url, {"action": action, "_selected_action": [str(o.pk) for o in objects]}, follow=True)


@pytest.fixture
def facts(world):
    """Three facts in three places: acme/desk (for participant end-7), acme/ops and globex/main."""
    return {
        "washing": write(world.alice, world.desk, content={"text": "end-7 orders spare parts for a washing machine."}, participant_id="end-7", key="wm-ticket"),
        "printer": write(world.alice, world.ops, content={"text": "The ops printer jams on Mondays."}, type="acme.incident"),
        "globex": write(world.charlie, world.globex_main, content={"text": "Globex launches in spring."}),
    }


# --- facts: reading ------------------------------------------------------------------------


def test_fact_changelist_lists_every_tenant_for_a_superuser(admin, facts):
    response = admin.get(FACTS)
    assert response.status_code == 200
    assert shown(response) == {str(f.id) for f in facts.values()}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("type=acme.incident", {"printer"}),
        ("participant=end-7", {"washing"}),
        ("trust__exact=asserted&status__exact=active", {"washing", "printer", "globex"}),
        ("status__exact=deleted", set()),
        ("q=washing", {"washing"}),
        ("q=wm-ticket", {"washing"}),  # the key
        ("q=end-7&type=acme.note", {"washing"}),
    ],
)
def test_fact_changelist_filters_and_searches(admin, facts, query, expected):
    response = admin.get(f"{FACTS}?{query}")
    assert response.status_code == 200
    assert shown(response) == {str(facts[name].id) for name in expected}


def test_fact_changelist_filters_by_project_and_finds_a_fact_by_its_id(admin, world, facts):
    assert shown(admin.get(f"{FACTS}?project={world.ops.id}")) == {str(facts["printer"].id)}
    assert shown(admin.get(f"{FACTS}?project=none")) == set()
    assert shown(admin.get(f"{FACTS}?q={facts['globex'].id}")) == {str(facts["globex"].id)}


def test_fact_changelist_queries_do_not_grow_with_rows(admin, world, facts):
    with CaptureQueriesContext(connection) as few:
        assert admin.get(FACTS).status_code == 200
    for n in range(5):
        write(world.alice, world.ops, content={"text": f"note {n}"})
    with CaptureQueriesContext(connection) as many:
        assert admin.get(FACTS).status_code == 200
    assert len(many) == len(few)


def test_fact_change_page_shows_its_revisions_read_only(admin, world):
    write(world.alice, world.desk, key="colour", content={"text": "The van is red."})
    fact = write(world.alice, world.desk, key="colour", content={"text": "The van is blue now."})
    assert fact.version == 2
    response = admin.get(f"{FACTS}{fact.id}/change/")
    assert response.status_code == 200
    (revisions,) = response.context["inline_admin_formsets"]
    assert [form.original.version for form in revisions] == [1, 2]
    body = response.content.decode()
    assert "The van is red." in body and "The van is blue now." in body
    assert 'name="_save"' not in body  # nothing to save: facts change through the services


def test_facts_are_not_added_or_hard_deleted_in_the_admin(admin, facts):
    assert admin.get(f"{FACTS}add/").status_code == 403
    assert admin.get(f"{FACTS}{facts['washing'].id}/delete/").status_code == 403
    choices = dict(admin.get(FACTS).context["action_form"].fields["action"].choices)
    assert choices["delete_selected"] == "Delete selected facts"  # ours, not Django's bulk delete
    assert choices["verify_selected"] == "Verify selected facts"


# --- facts: actions --------------------------------------------------------------------------


def test_verify_action_verifies_as_the_next_revision(admin, root, facts):
    chosen = [facts["washing"], facts["globex"]]
    response = run_action(admin, "verify_selected", chosen)
    assert response.status_code == 200
    assert notes(response) == ["Verified 2 facts."]
    with scoping.scopes_disabled():
        for fact in chosen:
            fact.refresh_from_db()
            assert (fact.trust, fact.version, fact.verified_by) == (Trust.VERIFIED, 2, str(root.pk))
            assert FactRevision.objects.filter(fact=fact).count() == 2
        assert Fact.objects.get(id=facts["printer"].id).trust == Trust.ASSERTED
    assert LogEntry.objects.filter(user=root, object_id=str(facts["washing"].id)).get().change_message == "Verified (version 2)."
    assert "Verified (version 2)." in admin.get(f"{FACTS}{facts['washing'].id}/history/").content.decode()


def test_verify_action_skips_facts_already_verified_or_ended(admin, world, facts):
    run_action(admin, "verify_selected", [facts["washing"]])
    with scoping.scope(tenant_id=world.acme.id, project_id=world.ops.id):
        fact_delete(principal=principal(world.alice, world.ops), fact_id=facts["printer"].id)
    response = run_action(admin, "verify_selected", [facts["washing"], facts["printer"], facts["globex"]])
    (message,) = notes(response)
    assert message.startswith("Verified 1 fact; 2 skipped: ")
    assert f"{facts['washing'].id} (already verified)" in message
    assert f"{facts['printer'].id} (The fact is deleted; only active or pending facts can be verified.)" in message


def test_delete_action_ends_facts_and_keeps_their_revisions(admin, facts):
    response = run_action(admin, "delete_selected", [facts["washing"], facts["printer"]])
    assert notes(response) == ["Deleted 2 facts."]
    with scoping.scopes_disabled():
        assert Fact.objects.get(id=facts["washing"].id).status == Status.DELETED
        assert Fact.objects.get(id=facts["printer"].id).status == Status.DELETED
        assert Fact.objects.get(id=facts["globex"].id).status == Status.ACTIVE
        revision = FactRevision.objects.get(fact_id=facts["washing"].id)
        assert revision.invalidation_reason == "deleted" and revision.superseded_at is not None


def test_delete_action_reports_an_already_deleted_fact_as_skipped(admin, facts):
    run_action(admin, "delete_selected", [facts["washing"]])
    response = run_action(admin, "delete_selected", [facts["washing"], facts["printer"]])
    assert notes(response) == [f"Deleted 1 fact; 1 skipped: {facts['washing'].id} (already deleted)."]


def test_verify_from_the_fact_page(admin, facts):
    fact = facts["printer"]
    url = f"{FACTS}{fact.id}/change/"
    response = admin.post(url, {"CHANGE_FORM-action": "verify_selected", "_selected_action": [str(fact.id)]})
    assert response.status_code == 302 and response["Location"] == url
    with scoping.scopes_disabled():
        assert Fact.objects.get(id=fact.id).trust == Trust.VERIFIED


@pytest.fixture
def bob_staff(world) -> Client:
    """bob (a writer in acme/desk only) with the Django permissions to open facts and run actions."""
    world.bob.is_staff = True
    world.bob.save()
    world.bob.user_permissions.add(*Permission.objects.filter(codename__in=["view_fact", "change_fact", "view_factrevision"]))
    client = Client()
    client.force_login(world.bob)
    return client


def test_staff_see_only_facts_where_they_are_members(bob_staff, facts):
    response = bob_staff.get(FACTS)
    assert response.status_code == 200
    assert shown(response) == {str(facts["washing"].id)}
    assert bob_staff.get(f"{FACTS}{facts['globex'].id}/change/").status_code == 302  # "no such fact" redirect


def test_staff_act_with_their_own_role(bob_staff, facts):
    fact = facts["washing"]
    response = run_action(bob_staff, "verify_selected", [fact])
    assert notes(response) == [f"Verified 0 facts; 1 skipped: {fact.id} (not allowed: your role in acme/desk is writer)."]
    response = run_action(bob_staff, "delete_selected", [fact])  # a writer may end a fact
    assert notes(response) == ["Deleted 1 fact."]
    with scoping.scopes_disabled():
        assert Fact.objects.get(id=fact.id).status == Status.DELETED


# --- API keys --------------------------------------------------------------------------------


def test_creating_a_key_shows_it_once_and_stores_only_its_hash(admin, world):
    response = admin.post(
        f"{KEYS}add/",
        {"name": "support bot", "user": world.alice.pk, "tenant": world.acme.pk, "project": world.desk.pk, "access": "write", "participant_id": ""},
        follow=True,
    )
    assert response.status_code == 200
    (raw,) = {match for note in notes(response) for match in RAW_KEY.findall(note)}
    assert raw in response.content.decode()
    prefix, secret = raw.removeprefix("mh_").split("_", 1)

    key = ApiKey.objects.get()
    assert (key.prefix, key.name, key.user, key.project, key.access, key.participant_id) == (prefix, "support bot", world.alice, world.desk, "write", None)
    assert key.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    row = ApiKey.objects.filter(pk=key.pk).values().get()
    assert not any(secret in str(value) for value in row.values())

    for page in (KEYS, f"{KEYS}{key.pk}/change/"):
        body = admin.get(page).content.decode()
        assert secret not in body and key.secret_hash not in body
    principal = apikey_authenticate(raw=raw)
    assert principal is not None and principal.user_id == world.alice.pk and principal.project_id == world.desk.id


@pytest.mark.parametrize(
    "who, where, field",
    [
        ("charlie", "desk", "user"),  # charlie has no role in acme
        ("alice", "globex_main", "project"),  # a globex project on an acme key
    ],
)
def test_a_key_that_could_not_work_is_refused(admin, world, who, where, field):
    response = admin.post(
        f"{KEYS}add/",
        {"user": getattr(world, who).pk, "tenant": world.acme.pk, "project": getattr(world, where).pk, "access": "read"},
    )
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert not ApiKey.objects.exists()


def test_revoke_action_revokes_and_skips_revoked_keys(admin, world):
    live, raw = apikey_create(user=world.alice, tenant=world.acme, project=world.desk, access="write")
    gone, _ = apikey_create(user=world.bob, tenant=world.acme, project=world.desk, access="read")
    run_action(admin, "revoke_selected", [gone], url=KEYS)
    response = run_action(admin, "revoke_selected", [live, gone], url=KEYS)
    assert notes(response) == [f"Revoked 1 key; 1 skipped: mh_{gone.prefix}_… (already revoked)."]
    live.refresh_from_db()
    assert live.revoked_at is not None
    assert apikey_authenticate(raw=raw) is None


def test_keys_are_not_edited_or_deleted_in_the_admin(admin, world):
    key, _ = apikey_create(user=world.alice, tenant=world.acme, project=world.desk, access="write")
    response = admin.get(f"{KEYS}{key.pk}/change/")
    assert response.status_code == 200 and 'name="_save"' not in response.content.decode()
    assert admin.post(f"{KEYS}{key.pk}/change/", {"name": "renamed"}).status_code == 403
    assert admin.get(f"{KEYS}{key.pk}/delete/").status_code == 403


# --- tenancy ----------------------------------------------------------------------------------


def test_tenancy_pages_load(admin, world):
    for url in [
        "/admin/",
        "/admin/memoryhub/tenant/",
        f"/admin/memoryhub/tenant/{world.acme.pk}/change/",
        "/admin/memoryhub/project/",
        f"/admin/memoryhub/project/{world.desk.pk}/change/",
        "/admin/memoryhub/membership/",
        "/admin/memoryhub/membership/add/",
        KEYS,
        f"{KEYS}add/",
    ]:
        assert admin.get(url).status_code == 200, url
    assert admin.get("/admin/memoryhub/idempotencyrecord/").status_code == 404
    assert admin.get(f"/admin/memoryhub/tenant/{world.acme.pk}/delete/").status_code == 403


def test_a_membership_in_another_tenants_project_is_refused(admin, world):
    response = admin.post(
        "/admin/memoryhub/membership/add/",
        {"user": world.charlie.pk, "tenant": world.acme.pk, "project": world.globex_main.pk, "role": "viewer"},
    )
    assert response.status_code == 200
    assert "project" in response.context["adminform"].form.errors
    assert not Membership.objects.filter(user=world.charlie, tenant=world.acme).exists()
