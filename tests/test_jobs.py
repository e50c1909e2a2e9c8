"""The scheduled jobs in-process: expiry, retention purge, embedding backfill, the beat.

Real PostgreSQL throughout (and a real loopback embeddings server for the backfill). The
same jobs under a real Celery worker and Redis are in test_worker.py.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connections
from django.utils import timezone

from accounts.models import RetentionPolicy
from accounts.retention import retention_policy_for, retention_policy_set
from accounts.services import Principal
from agent.models import Conversation, Message
from approvals.models import Approval
from core import scoping
from core.errors import Forbidden, ValidationFailed
from core.locks import job_lock
from core.models import IdempotencyRecord
from facts.expiry import facts_expire
from facts.models import Fact, FactRevision, Status
from memoryhub.beat import InProcessBeat
from memoryhub.celery import app
from privacy.retention import retention_purge
from retrieval.backfill import embeddings_backfill
from tests.embedding_server import provider  # noqa: F401  (a fixture)

DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)


def principal(world, project=None, user=None, role="admin") -> Principal:
    project = project or world.desk
    return Principal(
        api_key_id=None, tenant_id=project.tenant_id, project_id=project.id, user_id=(user or world.alice).pk,
        access="write", role=role, participant_id=None,
    )


def write(client, text: str, **body) -> str:
    response = client.post("/v1/facts", {"type": "acme.note", "content": text} | body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def pending_fact(world, text: str, project=None) -> str:
    """A fact an agent remembered that waits for a reviewer, with its approval."""
    from approvals.services import approval_request
    from facts.services import FactInput, Provenance, fact_write

    project = project or world.desk
    agent = {"id": "acme.desk", "kind": "agent", "agentVersion": "1.0.0"}
    with scoping.scope(tenant_id=project.tenant_id, project_id=project.id):
        fact, _ = fact_write(
            principal=principal(world, project), data=FactInput(type="acme.note", content=text),
            provenance=Provenance(trust="unverified", attributed_to=agent, status="pending"),
        )
        approval_request(fact=fact, reasons=[{"rule": "wide-scope", "match": "same-project"}], requested_by=agent)
    return str(fact.id)


def set_times(fact_id: str, **times) -> None:
    with scoping.scopes_disabled():
        Fact.objects.filter(id=fact_id).update(**times)


def exists(fact_id: str) -> bool:
    with scoping.scopes_disabled():
        return Fact.objects.filter(id=fact_id).exists()


# --- expiry --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_expire_marks_facts_past_expires_at_and_closes_their_revision(world, in_scope):
    client = world.client()
    soon = (timezone.now() + timedelta(hours=1)).isoformat()
    past = write(client, "the gate code was 1234", expiresAt=soon, key="gate-code")
    future = write(client, "still valid", expiresAt=soon)
    forever = write(client, "no expiry")
    waiting = pending_fact(world, "waits for a reviewer")
    now = timezone.now()
    set_times(past, expires_at=now - SECOND)
    set_times(waiting, expires_at=now - SECOND)

    assert facts_expire() == {"facts": 1, "batches": 1}

    fact = Fact.objects.get(id=past)
    assert fact.status == Status.EXPIRED and fact.updated_at >= now
    current = FactRevision.objects.get(fact_id=past)
    assert (current.invalidation_reason, current.invalidated_by) == ("expired", {"id": "memoryhub.jobs", "kind": "service"})
    assert current.superseded_at == fact.updated_at
    assert {Fact.objects.get(id=i).status for i in [future, forever]} == {"active"}
    assert Fact.objects.get(id=waiting).status == "pending"  # a reviewer decides on it
    assert client.get(f"/v1/facts/{past}").json()["status"] == "expired"
    revisions = client.get(f"/v1/facts/{past}/revisions").json()["data"]
    assert [r["invalidationReason"] for r in revisions] == ["expired"]
    # The key slot is free again: the same key now starts a new fact.
    assert write(client, "the gate code is 9876", key="gate-code") != past
    assert facts_expire() == {"facts": 0, "batches": 0}  # a second run finds nothing


@pytest.mark.django_db(transaction=True)
def test_expire_skips_rows_a_request_holds_and_a_second_run_waits_for_nothing(tx_world):
    client = tx_world.client()
    ids = [write(client, f"note {i}", expiresAt=(timezone.now() + timedelta(hours=1)).isoformat()) for i in range(5)]
    with scoping.scopes_disabled():
        Fact.objects.filter(id__in=ids).update(expires_at=timezone.now() - SECOND)
    held, release = threading.Event(), threading.Event()

    def hold_row():  # a request changing the first fact, in its own connection
        from django.db import transaction

        with transaction.atomic(), scoping.scopes_disabled():
            list(Fact.objects.select_for_update().filter(id=ids[0]))
            held.set()
            release.wait(10)
        connections.close_all()

    holder = threading.Thread(target=hold_row)
    holder.start()
    assert held.wait(10)
    try:
        started = time.monotonic()
        assert facts_expire(batch_size=2) == {"facts": 4, "batches": 2}  # never waited for the held row
        assert time.monotonic() - started < 5
    finally:
        release.set()
        holder.join(10)
    assert facts_expire() == {"facts": 1, "batches": 1}  # the next run takes it


@pytest.mark.django_db(transaction=True)
def test_a_run_while_another_holds_the_jobs_lock_does_nothing(tx_world):
    client = tx_world.client()
    fact_id = write(client, "expires", expiresAt=(timezone.now() + timedelta(hours=1)).isoformat())
    set_times(fact_id, expires_at=timezone.now() - SECOND)
    results = {}
    inside, leave = threading.Event(), threading.Event()

    def other_run():
        with job_lock("expire") as locked:
            results["other"] = locked
            inside.set()
            leave.wait(10)
        connections.close_all()

    thread = threading.Thread(target=other_run)
    thread.start()
    assert inside.wait(10) and results["other"] is True
    try:
        assert facts_expire() == {"skipped": "running"}
        assert retention_purge() != {"skipped": "running"}  # each job has its own lock
    finally:
        leave.set()
        thread.join(10)
    assert facts_expire() == {"facts": 1, "batches": 1}


# --- retention purge -----------------------------------------------------------------------------


@pytest.fixture
def defaults(settings):
    settings.MEMORYHUB_RETENTION_DELETED_DAYS = 30
    settings.MEMORYHUB_RETENTION_EXPIRED_DAYS = 30
    settings.MEMORYHUB_RETENTION_UNREGISTERED_DAYS = 30
    return settings


def deleted_fact(client, text: str, at, **body) -> str:
    fact_id = write(client, text, **body)
    assert client.delete(f"/v1/facts/{fact_id}").status_code == 204
    set_times(fact_id, updated_at=at)
    return fact_id


@pytest.mark.django_db
def test_purge_eligibility_is_exact_to_the_day_per_project_policy(world, defaults, in_scope):
    with scoping.scope(tenant_id=world.acme.id, project_id=world.desk.id):
        retention_policy_set(
            principal=principal(world), project_id=world.desk.id, deleted_facts_days=7, expired_facts_days=3,
            unregistered_conversations_days=10,
        )
    desk, ops = world.client(), world.client(project=world.ops)
    t0 = timezone.now().replace(microsecond=0)
    young = deleted_fact(desk, "deleted 7 days less a second ago", t0 - 7 * DAY + SECOND)
    due = deleted_fact(desk, "deleted exactly 7 days ago", t0 - 7 * DAY)
    old = deleted_fact(desk, "deleted 7 days and a second ago", t0 - 7 * DAY - SECOND)
    ops_young = deleted_fact(ops, "ops: no policy, the 30-day default", t0 - 29 * DAY)
    ops_old = deleted_fact(ops, "ops: past the 30-day default", t0 - 30 * DAY - SECOND)
    expiring = (t0 + DAY).isoformat()
    expired_young = write(desk, "expired 3 days less a second ago", expiresAt=expiring)
    expired_old = write(desk, "expired 3 days and a second ago", expiresAt=expiring)
    set_times(expired_young, expires_at=t0 - 3 * DAY + SECOND)
    set_times(expired_old, expires_at=t0 - 3 * DAY - SECOND)
    kept_live = write(desk, "live for ever")

    counts = retention_purge(now=t0)

    assert counts == {
        "deletedFacts": 3, "expiredFacts": 1, "revisions": 4, "approvals": 0, "rememberCalls": 0,
        "conversations": 0, "messages": 0, "idempotencyResponses": 0, "batches": 2,
    }
    assert {i for i in [young, due, old, ops_young, ops_old, expired_young, expired_old, kept_live] if exists(i)} == {
        young, ops_young, expired_young, kept_live,
    }
    assert not FactRevision.objects.filter(fact_id__in=[due, old, ops_old, expired_old]).exists()
    # A second later the young ones are due too; the default-policy one is not yet.
    later = retention_purge(now=t0 + SECOND)
    assert (later["deletedFacts"], later["expiredFacts"]) == (1, 1)
    assert exists(ops_young) and exists(kept_live)


@pytest.mark.django_db
def test_an_empty_policy_field_keeps_those_rows_for_ever(world, defaults, in_scope):
    with scoping.scope(tenant_id=world.acme.id, project_id=world.desk.id):
        retention_policy_set(
            principal=principal(world), project_id=world.desk.id, deleted_facts_days=None, expired_facts_days=None,
            unregistered_conversations_days=None,
        )
    ancient = deleted_fact(world.client(), "deleted ten years ago", timezone.now() - 3650 * DAY)
    assert retention_purge()["deletedFacts"] == 0 and exists(ancient)


@pytest.mark.django_db
def test_a_fact_under_legal_hold_is_never_purged(world, defaults, in_scope):
    client = world.client()
    long_ago = timezone.now() - 400 * DAY
    deleted = deleted_fact(client, "deleted, on hold", long_ago)
    expired = write(client, "expired, on hold", expiresAt=(timezone.now() + DAY).isoformat())
    set_times(expired, expires_at=long_ago)
    pending = pending_fact(world, "pending and expired, on hold")
    set_times(pending, expires_at=long_ago)
    Fact.objects.filter(id__in=[deleted, expired, pending]).update(legal_hold=True)

    held = retention_purge()
    assert held["deletedFacts"] == held["expiredFacts"] == 0
    assert all(exists(i) for i in [deleted, expired, pending])
    assert FactRevision.objects.filter(fact_id__in=[deleted, expired, pending]).count() == 3
    assert Approval.objects.filter(fact_id=pending).exists()

    Fact.objects.filter(id__in=[deleted, expired, pending]).update(legal_hold=False)  # the hold is lifted
    counts = retention_purge()
    assert (counts["deletedFacts"], counts["expiredFacts"], counts["revisions"], counts["approvals"]) == (1, 2, 3, 1)
    assert not any(exists(i) for i in [deleted, expired, pending])


@pytest.mark.django_db
def test_unregistered_conversations_go_with_their_messages_after_n_days(world, defaults, in_scope):
    client = world.client()
    assert client.post("/v1/agents", {"slug": "acme.desk", "instructions": "x"}, format="json").status_code == 201
    made = [client.post("/v1/conversations", {"agent": "acme.desk"}, format="json").json()["id"] for _ in range(3)]
    for conversation_id in made:
        said = {"messages": [{"role": "user", "text": "hello"}, {"role": "agent", "text": "hi"}]}
        assert client.post(f"/v1/conversations/{conversation_id}/messages", said, format="json").status_code == 201
    old, young, registered = made
    assert client.delete(f"/v1/conversations/{old}").status_code == 204
    assert client.delete(f"/v1/conversations/{young}").status_code == 204
    now = timezone.now()
    Conversation.objects.filter(id=old).update(unregistered_at=now - 30 * DAY - SECOND)
    Conversation.objects.filter(id=young).update(unregistered_at=now - 29 * DAY)
    Conversation.objects.filter(id=registered).update(created_at=now - 3650 * DAY)

    counts = retention_purge()
    assert (counts["conversations"], counts["messages"]) == (1, 2)
    assert {str(i) for i in Conversation.objects.values_list("id", flat=True)} == {young, registered}
    assert Message.objects.count() == 4


@pytest.mark.django_db
def test_stored_idempotency_responses_go_after_24_hours(world, defaults):
    client = world.client()
    for key in ["a", "b", "c"]:
        response = client.post("/v1/facts", {"type": "acme.note", "content": key}, format="json", HTTP_IDEMPOTENCY_KEY=key)
        assert response.status_code == 201
    IdempotencyRecord.objects.filter(key="a").update(created_at=timezone.now() - timedelta(hours=24, seconds=1))
    IdempotencyRecord.objects.filter(key="b").update(created_at=timezone.now() - timedelta(hours=23))
    assert retention_purge()["idempotencyResponses"] == 1
    assert sorted(IdempotencyRecord.objects.values_list("key", flat=True)) == ["b", "c"]


@pytest.mark.django_db
def test_purge_deletes_in_batches(world, defaults, in_scope):
    client = world.client()
    gone = [deleted_fact(client, f"old {i}", timezone.now() - 31 * DAY) for i in range(5)]
    counts = retention_purge(batch_size=2)
    assert (counts["deletedFacts"], counts["revisions"], counts["batches"]) == (5, 5, 3)
    assert not any(exists(i) for i in gone)


# --- the retention policy ------------------------------------------------------------------------


@pytest.mark.django_db
def test_only_project_admins_set_a_retention_policy(world, defaults):
    values = {"deleted_facts_days": 7, "expired_facts_days": 3, "unregistered_conversations_days": None}
    with scoping.scope(tenant_id=world.acme.id, project_id=world.desk.id):
        with pytest.raises(Forbidden):
            retention_policy_set(principal=principal(world, user=world.bob, role="writer"), project_id=world.desk.id, **values)
        with pytest.raises(ValidationFailed) as refused:
            retention_policy_set(principal=principal(world), project_id=world.desk.id, **(values | {"expired_facts_days": -1}))
        assert "expired_facts_days" in refused.value.errors
        retention_policy_set(principal=principal(world), project_id=world.desk.id, **values)
        retention_policy_set(principal=principal(world), project_id=world.desk.id, **(values | {"deleted_facts_days": 9}))
    assert retention_policy_for(project_id=world.desk.id) == values | {"deleted_facts_days": 9}
    assert retention_policy_for(project_id=world.ops.id) == {
        "deleted_facts_days": 30, "expired_facts_days": 30, "unregistered_conversations_days": 30,
    }
    with scoping.scopes_disabled():
        assert RetentionPolicy.objects.get().updated_by_id == world.alice.pk


@pytest.mark.django_db
def test_admin_edits_retention_through_the_service(world, defaults):
    from django.contrib.auth.models import Permission
    from django.test import Client

    from accounts.models import Membership

    url = "/admin/memoryhub/retentionpolicy/"
    # bob: staff with the model permissions, admin of acme/ops, writer of acme/desk.
    world.bob.is_staff = True
    world.bob.save()
    world.bob.user_permissions.add(*Permission.objects.filter(codename__endswith="retentionpolicy"))
    Membership.objects.create(user=world.bob, tenant=world.acme, project=world.ops, role="admin")
    bob = Client()
    bob.force_login(world.bob)
    form = bob.get(url + "add/")
    assert form.status_code == 200
    choices = {str(c[0].value) for c in form.context["adminform"].form.fields["project"].choices if c[0]}
    assert choices == {str(world.ops.id)}  # not desk (writer there), not globex
    refused = bob.post(url + "add/", {"project": world.desk.id, "deleted_facts_days": 1, "expired_facts_days": 1})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    with scoping.scopes_disabled():
        assert not RetentionPolicy.objects.exists()
    saved = bob.post(url + "add/", {"project": world.ops.id, "deleted_facts_days": 5, "expired_facts_days": "", "unregistered_conversations_days": 2})
    assert saved.status_code == 302, saved.content[:500]
    assert retention_policy_for(project_id=world.ops.id) == {
        "deleted_facts_days": 5, "expired_facts_days": None, "unregistered_conversations_days": 2,
    }
    with scoping.scopes_disabled():
        policy = RetentionPolicy.objects.get()
        assert (policy.updated_by_id, policy.tenant_id) == (world.bob.pk, world.acme.id)
    assert bob.get(url).status_code == 200


# --- embedding backfill --------------------------------------------------------------------------


def _conversation(client, texts: list[tuple[str, str]], replay: bool = False) -> str:
    conversation_id = client.post("/v1/conversations", {"agent": "acme.desk", "replay": replay}, format="json").json()["id"]
    said = {"messages": [{"role": role, "text": text} for role, text in texts]}
    assert client.post(f"/v1/conversations/{conversation_id}/messages", said, format="json").status_code == 201
    return conversation_id


@pytest.mark.django_db
def test_backfill_embeds_what_is_missing_resumes_and_rolls_in_a_new_model(world, provider, settings, in_scope):
    client = world.client()
    settings.MEMORYHUB_EMBEDDINGS = "none"  # written while no provider was configured
    missing = [write(client, f"missing {i}") for i in range(5)]
    deleted = write(client, "deleted: never read, never embedded")
    client.delete(f"/v1/facts/{deleted}")
    expired = write(client, "expired", expiresAt=(timezone.now() + DAY).isoformat())
    set_times(expired, expires_at=timezone.now() - SECOND)
    assert client.post("/v1/agents", {"slug": "acme.desk", "instructions": "x"}, format="json").status_code == 201
    _conversation(client, [("user", "message one"), ("agent", "message two"), ("tool", "tool output")])
    _conversation(client, [("user", "replayed message")], replay=True)
    settings.MEMORYHUB_EMBEDDINGS = "openai"

    # A run cut short by its time budget after its first batch keeps that batch ...
    provider.delay = 0.3
    first = embeddings_backfill(budget_seconds=0.1)
    assert (first["facts"], first["batches"], first["done"]) == (2, 1, False)
    provider.delay = 0
    # ... and the next run goes on from there.
    second = embeddings_backfill()
    assert (second["facts"], second["messages"], second["failed"], second["done"]) == (3, 2, 0, True)
    assert sorted(provider.sent) == sorted([f"missing {i}" for i in range(5)] + ["message one", "message two"])
    assert set(provider.sent.values()) == {1}  # each text sent once across both runs
    assert Fact.objects.filter(id__in=missing, embedding_model="model-a").count() == 5
    assert not Fact.objects.filter(id__in=[deleted, expired], embedding__isnull=False).exists()
    assert embeddings_backfill()["batches"] == 0  # nothing left

    # The operator changes the model: everything is re-embedded, and reads use only the new vectors.
    settings.MEMORYHUB_EMBEDDINGS_MODEL = "model-b"
    query = {"query": "missing 3", "intents": [{"scope": "same-project", "mode": "semantic"}]}
    assert client.post("/v1/retrieve", query, format="json").json()["facts"] == []  # no model-b vectors yet
    third = embeddings_backfill()
    assert (third["model"], third["facts"], third["messages"]) == ("model-b", 5, 2)
    assert Fact.objects.filter(embedding_model="model-b").count() == 5
    hits = client.post("/v1/retrieve", query, format="json").json()["facts"]
    assert hits and hits[0]["fact"]["id"] == missing[3]


@pytest.mark.django_db
def test_backfill_without_a_provider_does_nothing(world):
    assert embeddings_backfill() == {"skipped": "no-embeddings-provider"}


# --- the schedule, the tasks, the commands, the in-process beat --------------------------------------


def test_every_scheduled_job_is_a_task_and_a_command():
    commands = {"memoryhub.expire_facts": "expire", "memoryhub.retention_purge": "purge", "memoryhub.embeddings_backfill": "backfill"}
    schedule = app.conf.beat_schedule
    assert {entry["task"] for entry in schedule.values()} == set(commands)
    app.loader.import_default_modules()
    for name, entry in schedule.items():
        assert entry["task"] in app.tasks, name
        interval = entry["schedule"].total_seconds() if isinstance(entry["schedule"], timedelta) else 3600
        assert 0 < entry["options"]["expires"] <= interval  # a tick never outlives the next one
    from django.core.management import get_commands

    assert set(commands.values()) <= set(get_commands())


def test_celery_delivers_at_least_once_within_the_visibility_timeout():
    conf = app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost and conf.worker_prefetch_multiplier == 1
    assert conf.task_soft_time_limit < conf.task_time_limit < conf.broker_transport_options["visibility_timeout"]


@pytest.mark.django_db
def test_commands_print_their_counts(world, defaults, capsys):
    client = world.client()
    fact_id = write(client, "expires", expiresAt=(timezone.now() + DAY).isoformat())
    set_times(fact_id, expires_at=timezone.now() - 31 * DAY)
    call_command("expire")
    assert json.loads(capsys.readouterr().out) == {"facts": 1, "batches": 1}
    call_command("purge")
    assert json.loads(capsys.readouterr().out)["expiredFacts"] == 1
    call_command("backfill")
    assert json.loads(capsys.readouterr().out) == {"skipped": "no-embeddings-provider"}


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_schedule_runs_on_a_background_thread(tx_world):
    client = tx_world.client()
    fact_id = write(client, "expires", expiresAt=(timezone.now() + DAY).isoformat())
    set_times(fact_id, expires_at=timezone.now() - SECOND)
    beat = InProcessBeat({"expire-facts": {"task": "memoryhub.expire_facts", "schedule": 0.2}}).start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with scoping.scopes_disabled():
                if Fact.objects.get(id=fact_id).status == Status.EXPIRED:
                    break
            time.sleep(0.05)
    finally:
        beat.stop()
    with scoping.scopes_disabled():
        assert Fact.objects.get(id=fact_id).status == Status.EXPIRED
    assert beat.runs["expire-facts"] >= 1


class _Terminal:
    """A stderr that says it is a terminal, recording what was written."""

    def __init__(self):
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


@pytest.mark.django_db
def test_long_commands_show_progress_on_a_terminal_only(world, defaults, capsys, monkeypatch):
    """A progress line on a terminal (redrawn with \\r, cleared at the end); nothing in a pipe or
    in CI; stdout keeps its one JSON line either way."""
    from core import progress

    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0)
    monkeypatch.delenv("CI", raising=False)
    client = world.client()

    def old_deleted(n: int) -> None:
        for i in range(n):
            deleted_fact(client, f"old {i}", timezone.now() - 31 * DAY)

    old_deleted(3)
    terminal = _Terminal()
    call_command("purge", "--batch", "1", stderr=terminal)
    assert json.loads(capsys.readouterr().out)["deletedFacts"] == 3
    lines = [line for line in terminal.text.split("\r") if line.strip()]
    assert [line.split(",")[0] for line in lines] == ["purge: 1 facts and conversations purged (1 batches)",
                                                      "purge: 2 facts and conversations purged (2 batches)",
                                                      "purge: 3 facts and conversations purged (3 batches)"]
    assert terminal.text.endswith("\r") and "\n" not in terminal.text  # cleared: nothing left on the line

    old_deleted(2)
    monkeypatch.setenv("CI", "true")
    quiet = _Terminal()
    call_command("purge", "--batch", "1", stderr=quiet)
    assert json.loads(capsys.readouterr().out)["deletedFacts"] == 2 and quiet.text == ""

    monkeypatch.delenv("CI")
    old_deleted(1)
    call_command("purge", "--batch", "1")  # stderr not a terminal (pytest's capture)
    captured = capsys.readouterr()
    assert json.loads(captured.out)["deletedFacts"] == 1 and captured.err == ""


def test_the_cli_says_a_large_import_is_on_its_way(monkeypatch):
    from memoryhub import cli

    monkeypatch.delenv("CI", raising=False)
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with cli._sending("markdown import", 2, "files", {"MEMORY.md": "x" * 10, "a.md": "y"}):
        assert terminal.text == "\rmarkdown import: sending 2 files (0.0 MB), waiting for the server…"
    assert terminal.text.endswith("\r") and terminal.text.rstrip("\r").endswith(" ")
    monkeypatch.setenv("CI", "true")
    quiet = _Terminal()
    monkeypatch.setattr("sys.stderr", quiet)
    with cli._sending("profiles import", 1, "keys", {"k": "v"}):
        pass
    assert quiet.text == ""
