"""Fact revisions are append-only, and the database enforces it (trigger facts_revision_append_only).

Whatever runs as the application role, raw SQL included: a revision's recorded state
never changes, a closed revision never changes at all, and no revision is deleted except
by a transaction that says it purges (the retention purge, erasure).
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from core import scoping
from facts.models import FactRevision
from facts.services import revision_deletes_allowed

pytestmark = pytest.mark.django_db

NOTE = {"type": "acme.note", "content": "first words"}


def _write_and_supersede(world) -> str:
    client = world.client()
    fact = client.post("/v1/facts", NOTE, format="json").json()
    assert client.post(f"/v1/facts/{fact['id']}/supersede", {"content": "second words", "expectVersion": 1}, format="json").status_code == 200
    return fact["id"]


def _refused(sql: str, params: list) -> str:
    with pytest.raises(DatabaseError) as caught, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    return str(caught.value)


@pytest.mark.parametrize("assignment", [
    "content = '\"rewritten\"'::jsonb", "text = 'rewritten'", "trust = 'verified'", "status = 'deleted'",
    "recorded_at = now()", "version = 9", "attributed_to = '{}'::jsonb",
])
def test_no_recorded_field_of_any_revision_can_change(world, assignment):
    fact_id = _write_and_supersede(world)
    for version in (1, 2):  # the closed one and the open one
        message = _refused(f"UPDATE facts_factrevision SET {assignment} WHERE fact_id = %s AND version = %s", [fact_id, version])
        assert "append-only" in message
    with scoping.scopes_disabled():
        assert [r.content for r in FactRevision.objects.filter(fact_id=fact_id).order_by("version")] == ["first words", "second words"]


def test_a_closed_revision_cannot_be_reopened_or_reclosed(world):
    fact_id = _write_and_supersede(world)
    for assignment in ["superseded_at = NULL", "superseded_at = now()", "invalidation_reason = 'deleted'"]:
        assert "closed" in _refused(f"UPDATE facts_factrevision SET {assignment} WHERE fact_id = %s AND version = 1", [fact_id])


def test_closing_the_open_revision_is_what_the_application_may_do(world):
    fact_id = _write_and_supersede(world)
    assert world.client().delete(f"/v1/facts/{fact_id}").status_code == 204  # closes revision 2
    revisions = world.client().get(f"/v1/facts/{fact_id}/revisions").json()["data"]
    assert [r["invalidationReason"] for r in revisions] == ["superseded", "deleted"]


def test_revisions_are_deleted_only_by_a_purging_transaction(world):
    fact_id = _write_and_supersede(world)
    assert "append-only" in _refused("DELETE FROM facts_factrevision WHERE fact_id = %s", [fact_id])
    with scoping.scopes_disabled():
        with pytest.raises(DatabaseError), transaction.atomic():
            FactRevision.objects.filter(fact_id=fact_id).delete()  # through the ORM alike
        assert FactRevision.objects.filter(fact_id=fact_id).count() == 2
        with transaction.atomic(), revision_deletes_allowed():
            assert FactRevision.objects.filter(fact_id=fact_id).delete()[0] == 2
    world.client().post("/v1/facts", NOTE, format="json")
    assert "append-only" in _refused("DELETE FROM facts_factrevision", [])  # the permission ended with the block
