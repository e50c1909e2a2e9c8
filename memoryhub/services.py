"""Tenancy services: provisioning, API keys and what a key may do."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memoryhub.errors import Forbidden, NotFound, ParticipantNotAllowed, ValidationFailed
from memoryhub.models import ROLE_RANK, Access, ApiKey, Membership, Project, Role, Tenant

KEY_PREFIX = "mh_"
LAST_USED_RESOLUTION = timedelta(minutes=1)  # write last_used_at at most once a minute per key


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


MAX_PARTICIPANT_ID = 200


def check_participant_id(participant_id: object) -> str:
    """A participantId a request names: a string of 1 to MAX_PARTICIPANT_ID characters."""
    if not isinstance(participant_id, str) or not 1 <= len(participant_id) <= MAX_PARTICIPANT_ID:
        rule = f"1 to {MAX_PARTICIPANT_ID} characters"
        raise ValidationFailed(f"participantId must be {rule}", errors={"participantId": [rule]})
    return participant_id


@dataclass(frozen=True)
class Principal:
    """Who is calling and what they may do: an API key resolved to its user's role."""

    api_key_id: object
    tenant_id: object
    project_id: object | None  # None: a tenant-wide key
    user_id: int
    access: str
    role: str | None  # the user's role where the key points; None: no membership
    participant_id: str | None  # a participant-bound key names only this one

    @property
    def can_write(self) -> bool:
        return self.access == Access.WRITE and self.rank >= ROLE_RANK[Role.WRITER]

    @property
    def rank(self) -> int:
        if self.role is None:
            return 0
        rank = ROLE_RANK[Role(self.role)]
        # A read key reads, whatever its user's role.
        return min(rank, ROLE_RANK[Role.VIEWER]) if self.access == Access.READ else rank

    def require(self, role: str) -> None:
        """Raise 403 unless the key's rights (role capped by access) reach `role`."""
        if self.rank < ROLE_RANK[Role(role)]:
            if self.access == Access.READ and role != Role.VIEWER:
                raise Forbidden("This is a read key; writing needs a write key.")
            raise Forbidden(f"This needs the {role} role; the key's user does not have it here.")

    def require_participant(self, participant_id: str | None) -> None:
        """The participant rule: naming an end user takes being them or write access."""
        if participant_id is None:
            return
        if self.participant_id is not None:
            if participant_id != self.participant_id:
                raise ParticipantNotAllowed("This key is bound to another participant.")
            return
        if not self.can_write:
            raise ParticipantNotAllowed("Naming a participant takes a key bound to them or write access to the project.")

    def project_for(self, project_id) -> object:
        """The project a call acts on: the key's own, or (tenant key) the one it names."""
        if self.project_id is not None:
            if project_id is not None and str(project_id) != str(self.project_id):
                raise NotFound("No such project here.")
            return self.project_id
        if project_id is None:
            return None
        try:
            uuid.UUID(str(project_id))
        except ValueError:  # not an id at all: the query below would fail with a 500
            raise NotFound("No such project here.") from None
        if not Project.objects.filter(tenant_id=self.tenant_id, id=project_id).exists():
            raise NotFound("No such project here.")
        return project_id

    def project_required(self, project_id, what: str) -> object:
        """`project_for`, for something that lives in a project (`what`, e.g. "Working memory"):
        a tenant-wide key that names none is a 400 saying to pass projectId."""
        project = self.project_for(project_id)
        if project is None:
            message = f"{what} lives in a project: this key is tenant-wide, so pass projectId."
            raise ValidationFailed(message, errors={"projectId": [message]})
        return project


def role_for(*, user_id: int, tenant_id, project_id) -> str | None:
    """The user's highest role in the project (tenant-wide memberships count everywhere)."""
    condition = Q(project__isnull=True)
    if project_id is not None:
        condition |= Q(project_id=project_id)
    roles = Membership.objects.filter(condition, user_id=user_id, tenant_id=tenant_id).values_list("role", flat=True)
    best = None
    for role in roles:
        if best is None or ROLE_RANK[Role(role)] > ROLE_RANK[Role(best)]:
            best = role
    return best


def person_principal(*, user, tenant_id, project_id) -> Principal | None:
    """The principal a person signed in to the dashboard acts as in a project; None without a role there.

    Their membership role, with write access and no participant binding, as a write key of
    theirs would be: the services then allow exactly what the role allows. Unlike the
    admin's `admin_principal`, being a superuser gives no role: the dashboard is for members.
    """
    role = role_for(user_id=user.pk, tenant_id=tenant_id, project_id=project_id)
    if role is None:
        return None
    return Principal(
        api_key_id=None, tenant_id=tenant_id, project_id=project_id, user_id=user.pk, access=Access.WRITE,
        role=role, participant_id=None,
    )


def membership_set(*, principal: Principal, username: str, role: str) -> Membership:
    """Give a person a role in the principal's project (project admins); their highest role counts.

    A tenant-wide membership is left alone (it is changed where tenants are managed, the
    admin); nobody changes their own role here, so an admin cannot lock themselves out.
    """
    principal.require(Role.ADMIN)
    if principal.project_id is None:
        raise ValidationFailed("A project membership needs a project.", errors={"project": ["required"]})
    if role not in Role.values:
        raise ValidationFailed(f"role must be one of {', '.join(Role.values)}.", errors={"role": [f"one of {', '.join(Role.values)}"]})
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValidationFailed(f"There is no user {username!r}; create the account first.", errors={"username": ["no such user"]})
    if user.pk == principal.user_id:
        raise ValidationFailed("You cannot change your own role.", errors={"username": ["that is you"]})
    membership, _ = Membership.objects.update_or_create(
        user=user, tenant_id=principal.tenant_id, project_id=principal.project_id, defaults={"role": role},
    )
    return membership


def membership_remove(*, principal: Principal, membership_id: int) -> None:
    """Remove a person's role in the principal's project (project admins); never one's own."""
    principal.require(Role.ADMIN)
    membership = Membership.objects.filter(id=membership_id, tenant_id=principal.tenant_id, project_id=principal.project_id).first()
    if membership is None or principal.project_id is None:
        raise NotFound("No such membership in this project.")
    if membership.user_id == principal.user_id:
        raise ValidationFailed("You cannot remove your own role.", errors={"membership": ["that is you"]})
    membership.delete()


def apikey_create(*, user, tenant: Tenant, project: Project | None, access: str, participant_id: str | None = None, name: str = "") -> tuple[ApiKey, str]:
    """Create a key; returns the row and the key text, which is never shown again."""
    if access not in Access.values:
        raise ValidationFailed("access must be read or write", errors={"access": ["must be read or write"]})
    if project is not None and project.tenant_id != tenant.id:
        raise ValidationFailed("project belongs to another tenant")
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        tenant=tenant, project=project, user=user, access=access, participant_id=participant_id or None,
        prefix=prefix, secret_hash=_hash_secret(secret), name=name,
    )
    return key, f"{KEY_PREFIX}{prefix}_{secret}"


def apikey_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    cache.delete(_KEY_CACHE + api_key.prefix)
    return api_key


# A resolved key is kept this long in the cache (Redis when configured, else per process):
# authentication is two queries that cost more than a whole keyword retrieval. A revoke
# clears it at once in the shared cache; a role change takes effect within this time.
KEY_CACHE_SECONDS = 10
_KEY_CACHE = "apikey:"


def apikey_authenticate(*, raw: str) -> Principal | None:
    """The principal for a presented key, or None when it is unknown, malformed or revoked."""
    if not raw.startswith(KEY_PREFIX):
        return None
    prefix, _, secret = raw[len(KEY_PREFIX):].partition("_")
    if not prefix or not secret or len(prefix) > 16:
        return None
    entry = cache.get(_KEY_CACHE + prefix)
    if entry is None:
        key = ApiKey.objects.filter(prefix=prefix).first()
        if key is None or key.revoked_at is not None:
            entry = {"secret_hash": key.secret_hash if key else "0" * 64, "principal": None, "last_used_at": None}
        else:
            entry = {
                "secret_hash": key.secret_hash,
                "last_used_at": key.last_used_at,
                "principal": Principal(
                    api_key_id=key.id, tenant_id=key.tenant_id, project_id=key.project_id, user_id=key.user_id,
                    access=key.access,
                    role=role_for(user_id=key.user_id, tenant_id=key.tenant_id, project_id=key.project_id),
                    participant_id=key.participant_id,
                ),
            }
        cache.set(_KEY_CACHE + prefix, entry, KEY_CACHE_SECONDS)
    # Compare even when no key matched, so timing does not reveal which prefixes exist.
    if not hmac.compare_digest(entry["secret_hash"], _hash_secret(secret)) or entry["principal"] is None:
        return None
    principal = entry["principal"]
    now = timezone.now()
    if entry["last_used_at"] is None or now - entry["last_used_at"] > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=principal.api_key_id).update(last_used_at=now)
        cache.set(_KEY_CACHE + prefix, entry | {"last_used_at": now}, KEY_CACHE_SECONDS)
    return principal


@transaction.atomic
def tenant_bootstrap(*, tenant: str, project: str, username: str, password: str | None = None) -> dict:
    """Create what is missing (tenant, project, user as tenant admin) and a new write key."""
    User = get_user_model()
    tenant_row, _ = Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant})
    project_row, _ = Project.objects.get_or_create(tenant=tenant_row, slug=project, defaults={"name": project})
    user, created = User.objects.get_or_create(username=username)
    if password is not None:
        user.set_password(password)
        user.is_staff = True
        user.save()
    elif created:
        user.set_unusable_password()
        user.save()
    Membership.objects.update_or_create(user=user, tenant=tenant_row, project=None, defaults={"role": Role.ADMIN})
    _, raw = apikey_create(user=user, tenant=tenant_row, project=project_row, access=Access.WRITE, name="bootstrap")
    return {"tenantId": str(tenant_row.id), "projectId": str(project_row.id), "userId": str(user.pk), "apiKey": raw}


def project_resolve(*, ref: str) -> Project:
    """`tenant/project` (slugs) or a project id → the project."""
    if "/" in ref:
        tenant_slug, _, project_slug = ref.partition("/")
        project = Project.objects.filter(tenant__slug=tenant_slug, slug=project_slug).select_related("tenant").first()
    else:
        project = Project.objects.filter(id=ref).select_related("tenant").first() if _is_uuid(ref) else None
    if project is None:
        raise NotFound(f"No project {ref!r}.")
    return project


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
