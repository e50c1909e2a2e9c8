"""Schemathesis extensions for tests/test_schemathesis.py (loaded with SCHEMATHESIS_HOOKS).

- `cross_tenant_replay`, a check: every request that succeeded for one tenant's key is
  sent again with the other tenant's key (MEMORYHUB_PEER_KEYS, "name=key,name=key").
  An id of the first tenant named in the path must then be `404` (never 403, never 2xx:
  existence is not revealed), and no server-given id the first answer held (`id`,
  `factId`, `tenantId`, `projectId`, `approvalId`), nor the first tenant's marker text
  (MEMORYHUB_PEER_MARKERS), may appear in the second answer.
  Schemathesis's own `object_level_authorization` covers reads of created objects; this
  covers every operation, writes included, and every id in a body.
- `map_query`: `cursor` is an opaque token the API gave out; a generated one can only be
  refused (400), so generated cursors are dropped.
- `map_body`: a generated fact whose `validUntil` is not after its `validFrom` loses its
  `validUntil` (a rule between two fields, which JSON Schema cannot state).
"""

from __future__ import annotations

import os
import re
from datetime import datetime

import requests
import schemathesis

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
WRITES_AND_READS = {"GET", "POST", "PUT", "PATCH", "DELETE"}  # OPTIONS only describes the endpoint
# Path parameters that name one tenant's object by a globally unique id.
ID_PARAMETERS = {"fact_id", "approval_id", "conversation_id"}


def _peers() -> dict[str, str]:
    pairs = (item.split("=", 1) for item in os.environ.get("MEMORYHUB_PEER_KEYS", "").split(",") if "=" in item)
    return {name: key for name, key in pairs}


def _markers() -> dict[str, str]:
    pairs = (item.split("=", 1) for item in os.environ.get("MEMORYHUB_PEER_MARKERS", "").split(",") if "=" in item)
    return {name: marker for name, marker in pairs}


FINDINGS = os.environ.get("MEMORYHUB_PEER_FINDINGS")  # a file the test reads: one line per replay


def _log(line: str) -> None:
    if FINDINGS:
        with open(FINDINGS, "a", encoding="utf-8") as out:
            out.write(line + "\n")


# Ids the server gives out; other uuids in a body (references, conversationId) may be ones
# the generator made up and sent to both tenants.
SERVER_IDS = {"id", "factId", "tenantId", "projectId", "approvalId"}


def _server_ids(response) -> set[str]:
    found: set[str] = set()

    def walk(value, key=None):
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)
        elif isinstance(value, str) and key in SERVER_IDS and UUID.fullmatch(value):
            found.add(value)

    try:
        walk(response.json())
    except ValueError:
        pass
    return found


@schemathesis.hook
def map_query(ctx, query):
    if query and "cursor" in query:
        query = {name: value for name, value in query.items() if name != "cursor"}
    return query


def _time(value):
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def _one_fact(fact):
    if isinstance(fact, dict) and (start := _time(fact.get("validFrom"))) and (end := _time(fact.get("validUntil"))):
        try:
            backwards = end <= start
        except TypeError:  # one with a zone, one without: the server refuses that anyway
            backwards = False
        if backwards:
            fact = {name: value for name, value in fact.items() if name != "validUntil"}
    return fact


@schemathesis.hook
def map_body(ctx, body):
    # validUntil must come after validFrom: a rule between two fields that a schema cannot state.
    if isinstance(body, dict) and isinstance(body.get("facts"), list):
        return {**body, "facts": [_one_fact(fact) for fact in body["facts"]]}
    return _one_fact(body)


@schemathesis.check
def cross_tenant_replay(ctx, response, case):
    """The same request with the other tenant's key reaches nothing of the first tenant."""
    peers = _peers()
    if case.method.upper() not in WRITES_AND_READS or not 200 <= response.status_code < 300 or len(peers) < 2:
        return None
    sent = response.request
    auth = sent.headers.get("Authorization", "")
    owner = next((name for name, key in peers.items() if auth == f"Bearer {key}"), None)
    if owner is None:
        return None  # sent without a peer's key (e.g. schemathesis's own auth probes)
    other = next(name for name in peers if name != owner)
    replay = sent.copy()
    replay.headers["Authorization"] = f"Bearer {peers[other]}"
    replay.headers.pop("Idempotency-Key", None)
    answer = requests.Session().send(replay, timeout=30, allow_redirects=False)
    path_ids = {str(value) for name, value in (case.path_parameters or {}).items() if name in ID_PARAMETERS}
    _log(f"{case.method} {case.operation.path} {owner}->{other} {response.status_code}->{answer.status_code}")
    if path_ids and answer.status_code != 404:
        raise AssertionError(
            f"{other}'s key got {answer.status_code} (not 404) for {owner}'s object {sorted(path_ids)} "
            f"at {case.method} {sent.url}: {answer.text[:300]}"
        )
    if answer.status_code >= 500:
        raise AssertionError(f"{other}'s replay of {case.method} {sent.url} got {answer.status_code}: {answer.text[:300]}")
    echoed = set(UUID.findall(sent.url or "")) | set(UUID.findall((sent.body or b"").decode("utf-8", "replace") if isinstance(sent.body, bytes) else (sent.body or "")))
    owner_ids = _server_ids(response) - echoed
    leaked = owner_ids & set(UUID.findall(answer.text))
    if leaked:
        raise AssertionError(f"{other}'s replay of {case.method} {sent.url} answered {owner}'s ids {sorted(leaked)[:5]}: {answer.text[:300]}")
    marker = _markers().get(owner)
    if marker and marker in answer.text:
        raise AssertionError(f"{other}'s replay of {case.method} {sent.url} answered {owner}'s text {marker!r}: {answer.text[:300]}")
    return None
