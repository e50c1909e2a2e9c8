"""A pooled database connection the server closed is replaced before a request uses it,
without a SELECT 1 per request (core.connections)."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection


@pytest.mark.django_db(transaction=True)
def test_a_connection_killed_between_requests_costs_no_failed_request(tx_world, settings):
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is False
    client = tx_world.client()
    assert client.get("/v1/facts").status_code == 200
    assert connection.connection is not None  # kept between requests (CONN_MAX_AGE)
    pid = connection.connection.info.backend_pid
    db = settings.DATABASES["default"]
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=connection.settings_dict["NAME"], autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
    time.sleep(0.2)  # the server has closed it; the client has not noticed
    response = client.get("/v1/facts")
    assert response.status_code == 200, response.content
    assert connection.connection.info.backend_pid != pid


@pytest.mark.django_db(transaction=True)
def test_a_healthy_connection_is_kept(tx_world):
    client = tx_world.client()
    assert client.get("/v1/facts").status_code == 200
    pid = connection.connection.info.backend_pid
    for _ in range(3):
        assert client.get("/v1/facts").status_code == 200
    assert connection.connection.info.backend_pid == pid
