"""No API key is ever logged.

The whole run is checked by the tests.no_secrets_logged plugin (every record of the session
searched for every key secret the session made or presented; its line closes the run:
"no secret logged: N API key secrets …, 0 found"). These tests drive the paths most likely
to log a key, at DEBUG, and look at what was logged: a server error while a key was
presented, refused, malformed and revoked keys, and the key's own creation and use.
"""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from accounts.models import ApiKey
from accounts.services import apikey_revoke
from tests import no_secrets_logged


def _logged(caplog) -> str:
    return "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)


@pytest.mark.django_db
def test_keys_are_not_logged_on_errors_refusals_or_revocation(world, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    raw = world.key()
    secret = raw.split("_", 2)[2]  # mh_<prefix>_<secret>; the secret itself may hold "_"
    assert len(secret) == 43
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/v1/me").status_code == 200

    def boom(*args, **kwargs):
        raise RuntimeError("a bug in a view")

    monkeypatch.setattr("facts.views.FactListView.get", boom)
    assert client.get("/v1/facts").status_code == 500  # logged with its traceback
    monkeypatch.undo()
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}x")
    assert bad.get("/v1/me").status_code == 401
    bad.credentials(HTTP_AUTHORIZATION="Bearer " + raw.replace("mh_", "xx_"))
    assert bad.get("/v1/me").status_code == 401
    apikey_revoke(api_key=ApiKey.objects.get(prefix=raw.split("_")[1]))
    assert client.get("/v1/me").status_code == 401
    logged = _logged(caplog)
    assert "a bug in a view" in logged and "Unauthorized" in logged  # the paths were taken and logged
    assert secret not in logged and raw not in logged


def test_the_plugin_finds_a_logged_secret(tmp_path):
    log = tmp_path / "run.log"
    fake = "S3cr3t-only-in-this-test-0123456789abcdef"
    log.write_text(f"2026-01-01 INFO x fine\n2026-01-01 INFO y Authorization: Bearer mh_abc_{fake}\n")
    no_secrets_logged.SECRETS.add(fake)
    try:
        assert [number for number, _ in no_secrets_logged.scan(str(log))] == [2]
    finally:
        no_secrets_logged.SECRETS.discard(fake)
