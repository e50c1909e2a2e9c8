"""Schemathesis against the live OpenAPI schema, with two tenants' keys as peers.

A real HTTP server (pytest-django's live server, on this session's test database) serves
/v1/schema; `schemathesis run` (a subprocess, as a user runs it) reads the schema from it
and runs every check (`--checks all`: server errors, status codes, content types, response
schemas and headers, positive and negative data, unsupported methods, ignored auth,
use-after-free, resource availability, object-level authorization) in every phase
(examples, coverage, fuzzing, stateful), at a fixed seed and a bounded number of examples.

Two tenants, acme and globex, each hold the same kinds of things (facts carrying a marker
text of their own, an agent, a conversation with messages, a working-memory entry, a
pending approval). They are schemathesis's `peers` for its object-level authorization
check, and tests/schemathesis_hooks.py adds `cross_tenant_replay`: every request that
succeeded with one tenant's key is sent again with the other's, which must get `404` for
the first tenant's ids and never see its ids or marker. The run is made once with each
tenant's key doing the driving.

What schemathesis found and what was done about it: docs/reliability.md. Rules a JSON
schema cannot state (an agent that must exist, intent fields that depend on each other,
a version in the body or in If-Match, validUntil after validFrom, a parseable query) are
allowed their 400/428 in the positive-data check for those operations only (CONFIG below).

The larger run for a release: `make reliability` (SCHEMATHESIS_MAX_EXAMPLES=100 and other
seeds). CI runs the seed and size below (about a minute on 2 cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.test_facts_concurrency import fast_live_server  # noqa: F401  (the tuned live server fixture)

ROOT = Path(__file__).resolve().parent.parent
SEED = int(os.environ.get("SCHEMATHESIS_SEED", "20261129"))
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "8"))
PEERS = ("acme", "globex")

CONFIG = """
# A NUL character is refused anywhere in a request (core.api; PostgreSQL stores none),
# which no schema can say of every string: generated data leaves it out, and
# test_nul_characters_are_refused_before_the_database checks the refusal.
[generation]
allow-x00 = false

[auth.wfc]
path = "{auth}"
peers = ["acme", "globex"]
user = "{owner}"

# The expected version may come in the body or in If-Match: with neither, 428. Content
# has limits a schema cannot state (no NUL anywhere, 64 KiB, nesting 32): 400.
[[operations]]
include-path = "/v1/facts/{{fact_id}}/supersede"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "428", "429"]

# 400s for rules a JSON schema cannot state: an agent named in a body must exist in the
# project; intents, remember rules and recall depend on each other's fields; a
# conversation belongs to one agent; revision and asOf exclude each other; a
# memory_query must parse; a Markdown file must read as one; validUntil must follow
# validFrom; content holds no NUL, at most 64 KiB, nested at most 32 deep.
[[operations]]
include-path-regex = "^/v1/(retrieve|agents.*|conversations.*|workspaces/\\\\{{namespace\\\\}}/query|facts/\\\\{{fact_id\\\\}}|markdown/import)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429"]

# The admin API: a member named must have an account (and a role, for a key); nobody
# changes their own role or revokes the key they call with.
[[operations]]
include-path-regex = "^/v1/(members|keys)(/.*)?$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429"]

[[operations]]
include-path-regex = "^/v1/facts(/batch)?$"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429"]

"""


def _seed_tenant(world, user, project, name: str) -> tuple[str, str]:
    """A tenant's things, each holding its marker text; returns (write key, marker)."""
    from accounts.services import apikey_authenticate
    from approvals.services import approval_request
    from core import scoping
    from facts.services import FactInput, Provenance, fact_write

    marker = f"{name}-secret-{uuid.uuid4().hex[:8]}"
    key = world.key(user=user, project=project)
    client = world.client(key)
    for body in [
        {"type": "acme.note", "content": {"text": f"{marker} project note"}},
        {"type": "acme.preference", "key": "contact", "content": f"{marker} prefers email", "scope": {"participantId": "end-7"}},
    ]:
        assert client.post("/v1/facts", body, format="json").status_code == 201
    agent = {"slug": "st.desk", "instructions": "desk", "retrieval": [{"scope": "same-user", "mode": "keyword"}],
             "memory": {"remember": {"types": ["acme.preference"], "scope": "same-user"}}}
    assert client.post("/v1/agents", agent, format="json").status_code == 201
    conversation = client.post("/v1/conversations", {"agent": "st.desk", "participantId": "end-7"}, format="json").json()
    said = {"messages": [{"role": "user", "text": f"{marker} my washing machine leaks"}]}
    assert client.post(f"/v1/conversations/{conversation['id']}/messages", said, format="json").status_code == 201
    saved = client.post("/v1/workspaces/ws/memory", {"key": "note:secret", "value": marker}, format="json")
    assert saved.status_code == 201, saved.content
    principal = apikey_authenticate(raw=key)
    with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
        fact, _ = fact_write(
            principal=principal, data=FactInput(type="acme.note", content=f"{marker} always answer in French"),
            provenance=Provenance(trust="unverified", attributed_to={"id": "st.desk", "kind": "agent", "agentVersion": "1.0.0"}, status="pending"),
        )
        approval_request(fact=fact, reasons=[{"rule": "imperative", "match": "always"}], requested_by={"id": "st.desk", "kind": "agent"})
    return key, marker


@pytest.fixture
def peers(tx_world, settings, in_scope):
    # Thousands of requests in a minute: the per-key rate limit is not what is tested here.
    settings.MEMORYHUB_RATE_LIMIT = ""
    world = tx_world
    acme = _seed_tenant(world, world.alice, world.desk, "acme")
    globex = _seed_tenant(world, world.charlie, world.globex_main, "globex")
    return {"acme": acme, "globex": globex}


def _schemathesis(url: str, peers: dict, owner: str, folder: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    auth = folder / "auth.json"
    auth.write_text(json.dumps({"auth": [
        {"name": name, "fixedHeaders": [{"name": "Authorization", "value": f"Bearer {peers[name][0]}"}]} for name in PEERS
    ]}))
    config = folder / "schemathesis.toml"
    config.write_text(CONFIG.format(auth=auth, owner=owner))
    replays = folder / "replays.txt"
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
        "PYTHONPATH": str(ROOT),
        "MEMORYHUB_PEER_KEYS": ",".join(f"{name}={peers[name][0]}" for name in PEERS),
        "MEMORYHUB_PEER_MARKERS": ",".join(f"{name}={peers[name][1]}" for name in PEERS),
        "MEMORYHUB_PEER_FINDINGS": str(replays),
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run", f"{url}/v1/schema",
         "--checks", "all", "--seed", str(SEED), "--max-examples", str(MAX_EXAMPLES), "--workers", "1",
         "--report", "junit", "--report-dir", str(folder / "report"), "--request-timeout", "60"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900,
    )
    return result, replays.read_text().splitlines() if replays.exists() else []


@pytest.mark.parametrize("owner", PEERS)
def test_schemathesis_finds_nothing(peers, fast_live_server, tmp_path, owner):
    result, replays = _schemathesis(fast_live_server.url, peers, owner, tmp_path)
    summary = result.stdout[result.stdout.rfind("SUMMARY"):] if "SUMMARY" in result.stdout else result.stdout[-3000:]
    print(f"\nschemathesis as {owner}, seed {SEED}, max-examples {MAX_EXAMPLES}:\n{summary}\n"
          f"cross-tenant replays: {len(replays)}")
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-3000:]
    assert "Selected: " in result.stdout and "Tested: " in result.stdout
    # The peers' check ran: requests were replayed with the other tenant's key, every one refused or empty.
    assert len(replays) >= 50, replays
    assert all(line.split()[2] == f"{owner}->{next(p for p in PEERS if p != owner)}" for line in replays)


# --- What schemathesis found, as plain regression tests (no live server) ------------------------


@pytest.mark.django_db
def test_a_null_subject_is_a_400_not_a_500(world):
    response = world.client().post("/v1/facts", {"type": "acme.note", "content": 1, "subjects": [None]}, format="json")
    assert response.status_code == 400 and response.json()["errors"]


@pytest.mark.django_db
def test_as_of_with_a_far_offset_is_read_in_utc(world):
    client = world.client()
    fact = client.post("/v1/facts", {"type": "acme.note", "content": "x"}, format="json").json()
    far = client.get(f"/v1/facts/{fact['id']}", {"asOf": "0010-05-07T01:51:17-23:02"})
    assert far.status_code == 404  # before the fact existed; PostgreSQL refused the -23:02 offset (500)
    overflow = client.get(f"/v1/facts/{fact['id']}", {"asOf": "0001-01-01T00:00:00+23:59"})
    assert overflow.status_code == 400


@pytest.mark.django_db
def test_a_tenant_key_naming_a_malformed_project_gets_404(world):
    tenant_key = world.client(tenant_wide=True)
    assert tenant_key.get("/v1/agents", {"projectId": "not-a-uuid"}).status_code == 404
    assert tenant_key.post("/v1/workspaces/ws/memory", {"key": "a", "value": "b", "projectId": "x"}, format="json").status_code == 404


@pytest.mark.django_db
def test_problems_are_json_when_text_was_asked_for(world):
    client = world.client()
    for response in [
        client.delete("/v1/workspaces/ws/memory/missing?format=txt"),
        client.delete("/v1/workspaces/ws/memory/missing", HTTP_ACCEPT="text/plain"),
    ]:
        assert response.status_code == 404
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["code"] == "not-found"


@pytest.mark.django_db
def test_numbers_are_not_strings(world):
    response = world.client().post("/v1/facts", {"type": "acme.note", "content": "x", "key": 7}, format="json")
    assert response.status_code == 400 and "key" in response.json()["errors"]


@pytest.mark.django_db
def test_workspace_inputs_schemathesis_found_lenient(world):
    client = world.client()
    assert client.get("/v1/workspaces/ws/block", {"standingRule": "null"}).status_code == 400
    assert client.get("/v1/workspaces/ws/block", {"standingRule": "true"}).status_code == 200
    empty_project = client.post("/v1/workspaces/ws/memory", {"key": "a", "value": "b", "projectId": ""}, format="json")
    assert empty_project.status_code == 404


def test_the_schema_documents_problems_and_strict_bodies():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert {"400", "401", "403", "404"} <= set(operation["responses"]), (method, path)
            assert "application/problem+json" in operation["responses"]["404"]["content"]
    components = schema["components"]["schemas"]
    assert components["FactInRequest"]["additionalProperties"] is False
    assert "null" not in json.dumps(components["FactInRequest"]["properties"]["content"])


@pytest.mark.django_db
def test_nul_characters_are_refused_before_the_database(world):
    """PostgreSQL stores no NUL in text or jsonb: each of these was a 500."""
    client = world.client()
    assert client.post("/v1/agents", {"slug": "nul.desk"}, format="json").status_code == 201
    conversation = client.post("/v1/conversations", {"agent": "nul.desk"}, format="json").json()["id"]
    for response, where in [
        (client.put("/v1/workspaces/ws/tasks", [{"id": "t1", "status": "a\u0000"}], format="json"), "[0].status"),
        (client.post(f"/v1/conversations/{conversation}/messages", {"messages": [{"role": "user", "text": "a\u0000b"}]}, format="json"),
         "messages[0].text"),
        (client.post(f"/v1/conversations/{conversation}/messages",
                     {"messages": [{"role": "user", "text": "ab", "externalId": "x\u0000"}]}, format="json"), "messages[0].externalId"),
        (client.post("/v1/facts", {"type": "acme.note", "content": "bad \u0000 nul"}, format="json"), "content"),
        (client.get("/v1/agents/a%00"), "path"),
        (client.get("/v1/participants/p%00/export"), "path"),
        (client.get("/v1/profiles/p%00"), "path"),
        (client.delete("/v1/workspaces/ws/memory/a%00"), "path"),
        (client.get("/v1/workspaces/ws/memory", {"q": "a\u0000"}), "query.q"),
    ]:
        assert response.status_code == 400, (where, response.status_code, response.content[:200])
        assert where in response.json()["errors"], (where, response.json())
