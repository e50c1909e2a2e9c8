"""The foundation: probes, auth errors, problem+json, pagination, limits, commands, schema, start-up checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.models import ApiKey

ROOT = Path(__file__).resolve().parent.parent


def problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert set(body) >= {"type", "title", "status", "detail", "code"}
    assert body["status"] == status and body["code"] == code
    assert body["detail"]
    return body


def test_the_home_page_links_the_admin_and_the_docs(client):
    page = client.get("/").content.decode()
    assert 'href="/admin/"' in page and 'href="/v1/docs"' in page


def test_healthz_answers_without_a_database(client):
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_checks_the_database(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"


@pytest.mark.django_db
def test_readyz_says_degraded_but_ready_when_the_broker_is_unreachable(client, settings):
    # The API keeps serving without Redis (tests/test_worker.py), so the process stays in rotation.
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "degraded", "checks": {"database": "ok", "broker": "unavailable"}}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Basic YWxpY2U6c2VjcmV0", "Bearer mh_nope_nope", "Bearer not-a-key", "Bearer mh_" + "a" * 40],
)
def test_missing_or_bad_keys_are_401(header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    body = problem(client.get("/v1/facts"), 401, "unauthenticated")
    assert body["type"].endswith("/unauthenticated")


@pytest.mark.django_db
def test_revoked_key_is_401(world):
    client = world.client()
    assert client.get("/v1/me").status_code == 200
    prefix = client.raw_key.split("_")[1]
    from accounts.services import apikey_revoke

    apikey_revoke(api_key=ApiKey.objects.get(prefix=prefix))
    problem(client.get("/v1/me"), 401, "unauthenticated")


@pytest.mark.django_db
def test_a_key_stores_only_a_hash_and_notes_its_use(world):
    client = world.client()
    prefix, secret = client.raw_key.removeprefix("mh_").split("_", 1)
    row = ApiKey.objects.get(prefix=prefix)
    assert secret not in row.secret_hash and len(row.secret_hash) == 64
    assert row.last_used_at is None
    me = client.get("/v1/me").json()
    row.refresh_from_db()
    assert row.last_used_at is not None
    assert me == {
        "apiKeyId": str(row.id), "tenantId": str(world.acme.id), "tenant": "acme", "projectId": str(world.desk.id),
        "project": "desk", "userId": str(world.alice.pk), "access": "write", "role": "admin", "participantId": None,
    }


@pytest.mark.django_db
def test_unknown_api_paths_and_ids_are_problem_404(world):
    client = world.client()
    problem(client.get("/v1/nothing-here"), 404, "not-found")
    problem(client.get("/v1/facts/00000000-0000-0000-0000-000000000000"), 404, "not-found")


@pytest.mark.django_db
def test_malformed_json_is_a_validation_error(world):
    client = world.client()
    response = client.generic("POST", "/v1/facts", "{not json", content_type="application/json")
    problem(response, 400, "validation-error")
    response = client.generic("POST", "/v1/facts", "type=x", content_type="application/x-www-form-urlencoded")
    problem(response, 415, "unsupported-media-type")


@pytest.mark.django_db
def test_body_over_the_limit_is_413_and_writes_nothing(world, settings, in_scope):
    from facts.models import Fact

    settings.MEMORYHUB_MAX_BODY_BYTES = 1000
    client = world.client()
    body = json.dumps({"type": "acme.note", "content": "x" * 2000})
    problem(client.generic("POST", "/v1/facts", body, content_type="application/json"), 413, "payload-too-large")
    assert Fact.objects.count() == 0


@pytest.mark.django_db
def test_throttling_is_per_key_with_retry_after(world, settings):
    from django.core.cache import cache

    cache.clear()
    settings.MEMORYHUB_RATE_LIMIT = "3/min"
    one, two = world.client(), world.client()
    for _ in range(3):
        assert one.get("/v1/me").status_code == 200
    limited = one.get("/v1/me")
    problem(limited, 429, "rate-limited")
    assert int(limited["Retry-After"]) >= 1
    assert two.get("/v1/me").status_code == 200  # another key has its own budget
    cache.clear()


@pytest.mark.django_db
def test_pagination_walks_every_row_once(world):
    client = world.client()
    written = client.post("/v1/facts/batch", {"facts": [{"type": "acme.note", "content": f"n{i}"} for i in range(7)]}, format="json")
    assert written.status_code == 201
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = client.get("/v1/facts", params).json()
        seen += [f["id"] for f in page["data"]]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == 3 and len(seen) == 7 == len(set(seen))
    default = client.get("/v1/facts").json()
    assert len(default["data"]) == 7 and default["nextCursor"] is None
    problem(client.get("/v1/facts", {"limit": 501}), 400, "validation-error")
    problem(client.get("/v1/facts", {"limit": 0}), 400, "validation-error")
    problem(client.get("/v1/facts", {"cursor": "garbage"}), 400, "validation-error")


@pytest.mark.django_db
def test_pagination_reads_are_a_fixed_number_of_queries(world, django_assert_max_num_queries):
    client = world.client()
    client.post("/v1/facts/batch", {"facts": [{"type": "acme.note", "content": f"n{i}"} for i in range(60)]}, format="json")
    with django_assert_max_num_queries(4):  # key, membership, last-used update at most, the page
        client.get("/v1/facts", {"limit": 50})


@pytest.mark.django_db
def test_bootstrap_prints_one_json_line_and_is_repeatable():
    out = StringIO()
    call_command("bootstrap", tenant="t1", project="p1", user="u1", stdout=out)
    first = json.loads(out.getvalue().strip())
    assert set(first) == {"tenantId", "projectId", "userId", "apiKey"}
    assert len(out.getvalue().strip().splitlines()) == 1
    out = StringIO()
    call_command("bootstrap", tenant="t1", project="p1", user="u1", stdout=out)
    second = json.loads(out.getvalue())
    assert (second["tenantId"], second["projectId"], second["userId"]) == (first["tenantId"], first["projectId"], first["userId"])
    assert second["apiKey"] != first["apiKey"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {second['apiKey']}")
    assert client.get("/v1/me").json()["role"] == "admin"


@pytest.mark.django_db
def test_apikey_create_prints_one_json_line(world):
    out = StringIO()
    call_command("apikey", "create", "--user", "bob", "--project", "acme/desk", "--access", "read", "--participant", "end-7", stdout=out)
    created = json.loads(out.getvalue())
    assert set(created) == {"apiKey", "id"}
    row = ApiKey.objects.get(id=created["id"])
    assert (row.access, row.participant_id, row.project_id, row.user_id) == ("read", "end-7", world.desk.id, world.bob.pk)


def test_openapi_schema_generates_without_warnings(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml")],
        cwd=ROOT, capture_output=True, text=True, env=os.environ | {"DJANGO_SETTINGS_MODULE": "memoryhub.settings"},
    )
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "schema.yml").read_text()
    for path in ["/v1/facts:", "/v1/facts/{fact_id}/supersede:", "/v1/me:"]:
        assert path in text


@pytest.mark.django_db
def test_schema_and_docs_are_served_without_a_key(client):
    assert client.get("/v1/schema").status_code == 200
    docs = client.get("/v1/docs").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in docs
    assert "cdn" not in docs.lower()


def test_check_deploy_passes_with_production_settings():
    env = os.environ | {
        "DEBUG": "0", "SECRET_KEY": "q8Vn2-Lz0pW7rT4yXc1bM9kJd6sFh3gE5aQ_uIo-Ny2Zt8Rw4Kv", "SECURE_SSL_REDIRECT": "1", "SECURE_COOKIES": "1",
        "SECURE_HSTS_SECONDS": "31536000", "ALLOWED_HOSTS": "memoryhub.example.com", "BEHIND_HTTPS_PROXY": "1",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _system_postgres_url() -> str | None:
    import psycopg

    url = os.environ.get("MEMORYHUB_NO_PGVECTOR_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
                return None
    except psycopg.OperationalError:
        return None
    return url


def test_a_postgres_without_pgvector_fails_at_start_with_a_clear_message():
    url = _system_postgres_url()
    if url is None:
        pytest.skip("no PostgreSQL without pgvector on 127.0.0.1:5432 to try")
    env = {k: v for k, v in os.environ.items() if k != "MEMORYHUB_DATA_DIR"} | {"DATABASE_URL": url}
    for command in (["manage.py", "migrate"], ["manage.py", "serve", "--no-serve"], ["-c", "import memoryhub.wsgi"]):
        result = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
        output = result.stdout + result.stderr
        assert result.returncode != 0, command
        assert "pgvector" in output and "Traceback" not in output, output
