"""retrieval.latency: the per-turn reads' durations, kept as daily histograms for the overview."""

from __future__ import annotations

import pytest

from core import scoping
from retrieval import latency
from retrieval.models import ReadLatency

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty(monkeypatch):
    """No flush on a background thread unless a test asks for one: 30 s after the suite's last
    flush, the first observe would start one, on its own connection, which cannot see this
    test's uncommitted project and so drops the figures it took (CI saw 6 reads of 7)."""
    monkeypatch.setattr(latency, "FLUSH_SECONDS", float("inf"))
    latency._counts.clear()
    yield
    latency._counts.clear()


def test_a_due_flush_runs_on_a_background_thread(tx_world, monkeypatch):
    import threading

    monkeypatch.setattr(latency, "FLUSH_SECONDS", 0.0)
    latency.observe(tenant_id=tx_world.acme.id, project_id=tx_world.desk.id, kind="retrieve", seconds=0.003)
    for thread in threading.enumerate():
        if thread.name == "memoryhub-latency":
            thread.join(timeout=10)
    with scoping.scopes_disabled():
        assert ReadLatency.objects.get(project_id=tx_world.desk.id, kind="retrieve").count == 1
    assert latency._counts == {} and latency._flushing is False


def test_reads_go_into_their_buckets_and_processes_add_up(world):
    for seconds in (0.0005, 0.003, 0.003, 0.04, 0.9, 7.0):
        latency.observe(tenant_id=world.acme.id, project_id=world.desk.id, kind="retrieve", seconds=seconds)
    assert latency.flush() == 1
    # Another process's figures for the same day are added, bucket by bucket.
    latency.observe(tenant_id=world.acme.id, project_id=world.desk.id, kind="retrieve", seconds=0.003)
    latency.flush()
    with scoping.scopes_disabled():
        row = ReadLatency.objects.get(project_id=world.desk.id, kind="retrieve")
    assert row.count == 7
    assert row.buckets[0] == 1 and row.buckets[2] == 3 and row.buckets[5] == 1 and row.buckets[9] == 1 and row.buckets[-1] == 1
    assert round(row.total_ms) == round(1000 * (0.0005 + 0.003 * 3 + 0.04 + 0.9 + 7.0))
    assert latency.quantile(row.buckets, 0.5) == 5 and latency.quantile(row.buckets, 0.95) == float("inf")


def test_a_failed_flush_keeps_the_figures_for_the_next(world, monkeypatch):
    latency.observe(tenant_id=world.acme.id, project_id=world.desk.id, kind="context", seconds=0.01)
    monkeypatch.setattr(latency, "_UPSERT", "INSERT INTO no_such_table VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")
    from django.db import transaction

    with pytest.raises(Exception), transaction.atomic():
        latency.flush()
    monkeypatch.undo()
    assert latency.flush() == 1
    with scoping.scopes_disabled():
        assert ReadLatency.objects.get(project_id=world.desk.id, kind="context").count == 1


def test_figures_of_a_deleted_project_go_with_it_and_block_nothing(world):
    """A project deleted between a read and the flush: its figures are dropped, the rest saved
    (an insert against the gone project would fail the whole flush, and every later one)."""
    from accounts.models import Project

    with scoping.scopes_disabled():
        gone = Project.objects.create(tenant=world.acme, slug="gone", name="Gone")
    latency.observe(tenant_id=world.acme.id, project_id=gone.id, kind="retrieve", seconds=0.01)
    latency.observe(tenant_id=world.acme.id, project_id=world.desk.id, kind="retrieve", seconds=0.01)
    with scoping.scopes_disabled():
        Project.objects.filter(id=gone.id).delete()
    latency.flush()
    with scoping.scopes_disabled():
        assert list(ReadLatency.objects.values_list("project_id", "count")) == [(world.desk.id, 1)]
    assert latency._counts == {}


def test_retrieve_and_context_calls_are_measured_and_charted(world, client):
    api = world.client()
    declared = api.post("/v1/agents", {"slug": "acme.desk", "instructions": "Help.",
                                       "retrieval": [{"scope": "same-project", "mode": "keyword"}]}, format="json")
    assert declared.status_code == 201, declared.content
    for _ in range(3):
        assert api.post("/v1/retrieve", {"query": "washing", "intents": [{"scope": "same-project", "mode": "keyword"}]},
                        format="json").status_code == 200
        assert api.post("/v1/agents/acme.desk/context", {"userMessage": "washing?"}, format="json").status_code == 200
    client.force_login(world.alice)
    page = client.get(f"/dashboard/{world.acme.slug}/{world.desk.slug}/").content.decode()
    with scoping.scopes_disabled():
        counts = dict(ReadLatency.objects.filter(project_id=world.desk.id).values_list("kind", "count"))
    assert counts == {"retrieve": 3, "context": 3}  # the overview flushed this process's figures first
    assert 'data-series="latency"' in page and "p95 ≤" in page and "6 reads" in page
