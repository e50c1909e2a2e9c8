"""Hardening: Django's deployment checks with production settings, security headers on the
API and on pages, and what reaches the browser from other origins.

- `manage.py check --deploy --fail-level WARNING` passes with the environment
  docs/deploy.md tells production to set (DEBUG off, a long SECRET_KEY, ALLOWED_HOSTS,
  HTTPS redirect, secure cookies, HSTS), run as a subprocess the way an operator runs it,
  against this session's database; and it fails without them (the test can fail).
- Every response, JSON, problem+json or HTML, carries X-Content-Type-Options: nosniff,
  X-Frame-Options: DENY, Referrer-Policy: same-origin, Cross-Origin-Opener-Policy:
  same-origin and a Content-Security-Policy that allows nothing from other origins.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.database_url import database_url

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "memory.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://memory.example.com",
    "BEHIND_HTTPS_PROXY": "1",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_COOKIES": "1",
    "SECURE_HSTS_SECONDS": "31536000",
}


def _check_deploy(extra: dict) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("SECURE_", "DEBUG", "ALLOWED_HOSTS"))}
    env.update(DATABASE_URL=database_url(), SECRET_KEY=secrets.token_urlsafe(50), **extra)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.django_db
def test_check_deploy_is_clean_with_production_settings():
    result = _check_deploy(PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.django_db
def test_check_deploy_fails_without_them():
    result = _check_deploy({"DEBUG": "0", "ALLOWED_HOSTS": "memory.example.com"})
    assert result.returncode != 0
    for warning in ["security.W004", "security.W008", "security.W012", "security.W016"]:  # HSTS, SSL redirect, cookies
        assert warning in result.stdout + result.stderr


HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def _assert_hardened(response):
    for name, value in HEADERS.items():
        if name == "Cross-Origin-Opener-Policy" and response.request["PATH_INFO"] == "/v1/docs":
            # drf-spectacular's Swagger UI page opts out (unsafe-none) for OAuth2 sign-in popups.
            continue
        assert response.get(name) == value, (response.request["PATH_INFO"], name, response.get(name))
    policy = response.get("Content-Security-Policy", "")
    for directive in ["default-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "base-uri 'self'", "form-action 'self'"]:
        assert directive in policy, (response.request["PATH_INFO"], policy)


@pytest.mark.django_db
def test_api_responses_carry_security_headers(world):
    client = world.client()
    me = client.get("/v1/me")
    assert me.status_code == 200
    _assert_hardened(me)
    missing = client.get("/v1/facts/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing["Content-Type"] == "application/problem+json"
    _assert_hardened(missing)
    _assert_hardened(client.get("/v1/schema"))
    from rest_framework.test import APIClient

    _assert_hardened(APIClient().get("/v1/me"))  # 401


@pytest.mark.django_db
def test_pages_carry_security_headers(client):
    for path in ["/admin/login/", "/v1/docs", "/healthz"]:
        response = client.get(path)
        assert response.status_code == 200, path
        _assert_hardened(response)
