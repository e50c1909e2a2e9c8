"""One visibility definition (facts.visibility), two renderings: the ORM's reads and retrieval's
raw SQL must select the same facts for every kind of key.

The facts span every combination of tenant, project (the key's, another, none), participant
(none, the bound one, another), status, expiry and validity (none, past, future): 1,620
rows. The keys span every role (and none), read and write access, project and tenant-wide
keys, bound and unbound. For each key the ORM read (scoped manager + facts_visible + live_q)
and the SQL read (visibility.read_sql) must return exactly the same ids.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.services import Principal
from core import scoping
from facts import visibility
from facts.models import Fact, Status
from facts.selectors import facts_visible
from tests.factories import FactFactory

pytestmark = pytest.mark.django_db

BOUND, OTHER = "end-1", "end-2"


@pytest.fixture
def matrix(world):
    template = FactFactory(world=world)
    with scoping.scopes_disabled():
        base = Fact.objects.filter(pk=template.pk).values().get()  # the template stays: one more live project fact
    now = timezone.now()
    times = (None, now - timedelta(days=1), now + timedelta(days=1))
    rows = []
    combos = itertools.product(
        (world.acme, world.globex), ("key", "other", None), (None, BOUND, OTHER), Status.values, times, times,
    )
    for tenant, project, participant, status, expires, valid_until in combos:
        if tenant == world.globex:
            project_id = world.globex_main.id if project else None
        else:
            project_id = {"key": world.desk.id, "other": world.ops.id, None: None}[project]
        rows.append(Fact(**(base | {
            "id": uuid.uuid4(), "tenant_id": tenant.id, "project_id": project_id, "participant_id": participant,
            "status": status, "expires_at": expires, "valid_until": valid_until,
            "key": None, "content_hash": uuid.uuid4().hex * 2,
        })))
    with scoping.scopes_disabled():
        Fact.objects.bulk_create(rows)
    return world


KEYS = list(itertools.product(("viewer", "writer", "reviewer", "admin", None), ("read", "write"), (True, False), (None, BOUND)))


def test_orm_and_sql_read_the_same_facts(matrix):
    world = matrix
    differences = {}
    for role, access, project_key, bound in KEYS:
        principal = Principal(
            api_key_id=None, tenant_id=world.acme.id, project_id=world.desk.id if project_key else None,
            user_id=world.alice.pk, access=access, role=role, participant_id=bound,
        )
        with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
            orm = set(facts_visible(principal=principal).filter(visibility.live_q()).values_list("id", flat=True))
        params: dict = {}
        where = " AND ".join(visibility.read_sql(principal, params))
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT f.id FROM facts_fact f WHERE {where}", params)
            sql = {row[0] for row in cursor.fetchall()}
        if orm != sql or (role is not None and not sql):
            differences[(role, access, project_key, bound)] = {"orm only": len(orm - sql), "sql only": len(sql - orm), "read": len(sql)}
    assert not differences, differences
