"""Randomised retrieval probes: another tenant, project and participant hold identical text
and identical embeddings, and no read ever returns one of theirs.

One load: for every place (acme/desk, acme/ops, globex/main, and each tenant's tenant-wide
facts), every owner (kept for no one, for end-1, for end-2, in conversation A or B, the
same participant and conversation ids in every tenant) and every state (active, active
with a future expiry, pending, rejected, deleted, expired, past its validUntil), the same
24 texts with the same 384-dim vectors under one fake model. Rows are written in SQL
(like tests/test_retrieval_scale.py), so the only thing that can tell two tenants' rows
apart is the scoping under test.

Then many random reads: a random key (admin write, writer, read, bound to end-1 with write
or read, tenant-wide, and the same for globex), query (exact texts, word subsets, shuffled,
words no one wrote), participant and conversation (allowed ones), and intent: every scope
(same-user, same-conversation, same-project, tenant) × every mode (none, keyword, semantic,
both) × match (all, any) × fusion (rrf, score) × limit × types. Every hit must be the
caller's tenant, project (or tenant-wide), a participant the key may read and the scope
names, and active, unexpired and still valid. 1,200 probes go through the service
(retrieval.search.run_intent) and 150 through `POST /v1/retrieve`.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.services import apikey_authenticate
from core import scoping
from retrieval.search import Intent, Result, Run, run_intent

pytestmark = pytest.mark.django_db

MODEL = "probe-model"
DIMS = 384
SERVICE_PROBES = 1200
API_PROBES = 150
WORDS = ("washing machine leaks water order spare parts email phone contact prefers morning delivery invoice "
         "refund warranty kitchen garden train ticket french answer billing address password laptop screen").split()
CONV_A, CONV_B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
OWNERS = [(None, None), ("end-1", None), ("end-2", None), ("end-1", CONV_A), (None, CONV_A), ("end-2", CONV_B)]
STATES = ["active", "active-expiring", "pending", "rejected", "deleted", "expired", "invalid"]
SCOPES = ["same-user", "same-conversation", "same-project", "tenant"]
MODES = ["none", "keyword", "semantic", "both"]


@dataclass
class FakeEmbedder:
    """The fixed fake model: a text's vector is a function of the text alone, in every tenant."""

    model: str = MODEL
    dimensions: int = DIMS

    def embed_query(self, text: str) -> list[float]:
        return vector_of(text)

    def embed_documents(self, texts):
        return [vector_of(text) for text in texts]


def vector_of(text: str) -> list[float]:
    rng = random.Random(text)
    values = [rng.gauss(0, 1) for _ in range(DIMS)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def texts() -> list[str]:
    rng = random.Random(7)
    return [" ".join(rng.sample(WORDS, rng.randint(4, 9))) for _ in range(24)]


def load(world) -> dict[str, dict]:
    """Insert every place × owner × state × text; returns the rows by id."""
    now = timezone.now()
    places = [
        (world.acme.id, world.desk.id, OWNERS), (world.acme.id, world.ops.id, OWNERS), (world.globex.id, world.globex_main.id, OWNERS),
        (world.acme.id, None, [(None, None)]), (world.globex.id, None, [(None, None)]),
    ]
    rows = []
    for tenant, project, owners in places:
        for participant, conversation in owners:
            for state in STATES:
                for text in texts():
                    rows.append({
                        "id": uuid.uuid4(), "tenant": tenant, "project": project, "participant": participant,
                        "conversation": conversation, "text": text, "vector": str(vector_of(text)),
                        "status": {"pending": "pending", "rejected": "rejected", "deleted": "deleted"}.get(state, "active"),
                        "expires": now - timedelta(hours=1) if state == "expired" else now + timedelta(days=1) if state == "active-expiring" else None,
                        "valid_until": now - timedelta(hours=1) if state == "invalid" else None,
                        "content": json.dumps({"text": text}),
                    })
    with connection.cursor() as cursor:
        cursor.executemany(
            """
            INSERT INTO facts_fact (id, tenant_id, project_id, participant_id, conversation_id, type, content, content_hash,
                size, text, trust, status, attributed_to, subjects, "references", version, created_at, updated_at,
                search_config, embedding, embedding_model, expires_at, valid_until)
            VALUES (%(id)s, %(tenant)s, %(project)s, %(participant)s, %(conversation)s, 'acme.note', %(content)s, 'sha256:x',
                3, %(text)s, 'asserted', %(status)s, '{}', '[]', '[]', 1, now(), now(), 'english', %(vector)s::vector,
                'probe-model', %(expires)s, %(valid_until)s)
            """,
            rows,
        )
        cursor.execute("ANALYZE facts_fact")
    return {str(row["id"]): row for row in rows}


def keys(world) -> dict[str, str]:
    """Raw keys by kind; the globex ones mirror acme's."""
    return {
        "acme-admin": world.key(),
        "acme-writer": world.key(user=world.bob),
        "acme-read": world.key(access="read"),
        "acme-bound": world.key(participant="end-1"),
        "acme-bound-read": world.key(participant="end-1", access="read"),
        "acme-tenant": world.key(tenant_wide=True),
        "globex-admin": world.key(user=world.charlie, project=world.globex_main),
        "globex-read": world.key(user=world.charlie, project=world.globex_main, access="read"),
        "globex-bound": world.key(user=world.charlie, project=world.globex_main, participant="end-1"),
        "globex-tenant": world.key(user=world.charlie, project=world.globex_main, tenant_wide=True),
    }


def random_probe(rng: random.Random, principal, projects: dict) -> tuple[dict, Intent]:
    """A run (what the API would accept for this key) and an intent."""
    if principal.participant_id is not None:
        participant = principal.participant_id
    elif principal.can_write:
        participant = rng.choice([None, "end-1", "end-2", "end-9"])
    else:
        participant = None  # naming a participant takes a bound key or write access
    conversation = rng.choice([None, CONV_A, CONV_B, uuid.uuid4()])
    project = principal.project_id if principal.project_id is not None else rng.choice([None, *projects[principal.tenant_id]])
    pool = texts()
    query = rng.choice([
        rng.choice(pool),
        " ".join(rng.sample(rng.choice(pool).split(), 2)),
        " ".join(rng.sample(WORDS, 3)),
        "nothing anybody wrote",
        "",
    ])
    mode = rng.choice(MODES)
    intent = Intent(
        scope=rng.choice(SCOPES), mode=mode, limit=rng.choice([1, 5, 10, 50, 100]),
        types=rng.choice([(), ("acme.note",), ("other.type",)]),
        match=rng.choice(["all", "any"]) if mode in ("keyword", "both") else "all",
        fusion=rng.choice(["rrf", "score"]) if mode == "both" else "rrf",
    )
    return {"query": query, "participant_id": participant, "conversation_id": str(conversation) if conversation else None, "project_id": project}, intent


def leak(row: dict, principal, run: dict, scope: str) -> str | None:
    """Why `row` must not be read by this run, or None when it may."""
    now = timezone.now()
    if row["tenant"] != principal.tenant_id:
        return "another tenant's"
    if principal.project_id is not None and row["project"] not in (principal.project_id, None):
        return "another project's"
    if row["status"] != "active" or (row["expires"] and row["expires"] <= now) or (row["valid_until"] and row["valid_until"] <= now):
        return f"not readable ({row['status']}, expires {row['expires']}, valid until {row['valid_until']})"
    if principal.participant_id is not None and row["participant"] not in (None, principal.participant_id):
        return "another participant's (bound key)"
    if not principal.can_write and principal.participant_id is None and row["participant"] is not None:
        return "a participant's (read key)"
    conversation = uuid.UUID(run["conversation_id"]) if run["conversation_id"] else None
    project = run["project_id"]
    if scope == "same-user" and not (row["participant"] == run["participant_id"] is not None and row["project"] == project
                                     and row["conversation"] in (None, conversation)):
        return "outside same-user"
    if scope == "same-conversation" and not (row["conversation"] == conversation is not None and row["project"] == project
                                             and row["participant"] in (None, run["participant_id"])):
        return "outside same-conversation"
    if scope == "same-project" and not (row["project"] == project is not None and row["participant"] is None and row["conversation"] is None):
        return "outside same-project"
    if scope == "tenant" and not (row["participant"] is None and row["conversation"] is None):
        return "outside tenant scope"
    return None


def test_a_thousand_probes_through_the_service_leak_nothing(world):
    rows = load(world)
    raw_keys = keys(world)
    principals = {kind: apikey_authenticate(raw=raw) for kind, raw in raw_keys.items()}
    projects = {world.acme.id: [world.desk.id, world.ops.id], world.globex.id: [world.globex_main.id]}
    embedder = FakeEmbedder()
    rng = random.Random(20261129)
    leaks, answered, hits_seen, combos = [], 0, 0, set()
    began = time.monotonic()
    for _ in range(SERVICE_PROBES):
        kind = rng.choice(list(principals))
        principal = principals[kind]
        run_args, intent = random_probe(rng, principal, projects)
        combos.add((intent.scope, intent.mode, intent.match, intent.fusion, kind))
        run = Run(principal=principal, **run_args)
        with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
            hits = run_intent(run, intent, Result(), embedder=embedder, vector_cache={})
        assert len(hits) <= intent.limit
        answered += bool(hits)
        hits_seen += len(hits)
        for hit in hits:
            if reason := leak(rows[str(hit.fact.id)], principal, run_args, intent.scope):
                leaks.append((kind, run_args, intent, str(hit.fact.id), reason))
    elapsed = time.monotonic() - began
    print(f"\n{SERVICE_PROBES} service probes over {len(rows)} facts in {elapsed:.1f}s: {answered} answered, "
          f"{hits_seen} hits checked, {len(combos)} scope×mode×match×fusion×key combinations, {len(leaks)} leaks")
    assert not leaks, leaks[:5]
    # Not vacuous: most probes read something, and every scope and mode was tried.
    assert answered >= SERVICE_PROBES // 3
    assert {c[0] for c in combos} == set(SCOPES) and {c[1] for c in combos} == set(MODES)


def test_probes_through_the_api_leak_nothing(world, monkeypatch):
    rows = load(world)
    raw_keys = keys(world)
    principals = {kind: apikey_authenticate(raw=raw) for kind, raw in raw_keys.items()}
    projects = {world.acme.id: [world.desk.id, world.ops.id], world.globex.id: [world.globex_main.id]}
    monkeypatch.setattr("retrieval.search.get_embedder", lambda: FakeEmbedder())
    rng = random.Random(7)
    leaks, answered, hits_seen = [], 0, 0
    for _ in range(API_PROBES):
        kind = rng.choice(list(principals))
        principal = principals[kind]
        run_args, intent = random_probe(rng, principal, projects)
        body = {"query": run_args["query"], "intents": [{k: v for k, v in intent.as_dict().items() if k != "source"}]}
        if run_args["participant_id"] and principal.participant_id is None:
            body["participantId"] = run_args["participant_id"]
        if run_args["conversation_id"]:
            body["conversationId"] = run_args["conversation_id"]
        if principal.project_id is None and run_args["project_id"]:
            body["projectId"] = str(run_args["project_id"])
        response = world.client(raw_keys[kind]).post("/v1/retrieve", body, format="json")
        assert response.status_code == 200, (kind, body, response.content[:300])
        found = response.json()["facts"]
        answered += bool(found)
        hits_seen += len(found)
        for hit in found:
            if reason := leak(rows[hit["fact"]["id"]], principal, run_args, intent.scope):
                leaks.append((kind, body, hit["fact"]["id"], reason))
    print(f"\n{API_PROBES} API probes: {answered} answered, {hits_seen} hits checked, {len(leaks)} leaks")
    assert not leaks, leaks[:5]
    assert answered >= API_PROBES // 3
