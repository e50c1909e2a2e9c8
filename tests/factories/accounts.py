"""The world's people as principals, the base every factory builds on, members and API keys."""

from __future__ import annotations

import factory

from accounts.services import Principal
from core import scoping


def owner(world, participant_id=None) -> Principal:
    """alice, the tenant's admin, as a write key on acme/desk (bound to `participant_id` if given)."""
    return Principal(
        api_key_id=None, tenant_id=world.acme.id, project_id=world.desk.id, user_id=world.alice.pk, access="write",
        role="admin", participant_id=participant_id,
    )


class _ServiceFactory(factory.Factory):
    """Builds the input as a dict and hands it to `_write(world, **fields)`, inside the world's scope."""

    class Meta:
        abstract = True
        model = dict

    @classmethod
    def _create(cls, model_class, *, world, **fields):
        with scoping.scope(tenant_id=world.acme.id, project_id=world.desk.id):
            return cls._write(world, **fields)


class MemberFactory(_ServiceFactory):
    """A new account given a role in acme/desk by alice, as POST /v1/members does."""

    username = factory.Sequence(lambda n: f"member-{n}")
    role = "viewer"

    @classmethod
    def _write(cls, world, *, username, role):
        from django.contrib.auth import get_user_model

        from accounts.services import membership_set

        # No service makes accounts (the admin and `createsuperuser` do): Django's own, as conftest does.
        get_user_model().objects.create_user(username, password=f"{username}-password-1")
        return membership_set(principal=owner(world), username=username, role=role)


class ApiKeyFactory(_ServiceFactory):
    """A key on acme/desk issued by alice (for herself unless `username`), as POST /v1/keys does.
    The row comes back with the key text as `.raw`."""

    username = None
    access = "read"
    participant_id = None
    name = factory.Sequence(lambda n: f"key {n}")

    @classmethod
    def _write(cls, world, **fields):
        from accounts.services import apikey_issue

        key, raw = apikey_issue(principal=owner(world), **fields)
        key.raw = raw
        return key
