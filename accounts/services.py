"""Tenancy services: provisioning, API keys and what a key may do."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import ROLE_RANK, Access, ApiKey, Membership, Project, Role, Tenant
from core import connections, policy
from core.errors import Forbidden, NotFound, ValidationFailed

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
    """Who is calling and what they may do: an API key resolved to its user's current role.

    What it may do to what is decided by core.policy (one table); the methods here
    are the shorthand the services use.
    """

    api_key_id: object
    tenant_id: object
    project_id: object | None  # None: a tenant-wide key
    user_id: int
    access: str
    role: str | None  # the user's role where the key points; None: no membership, so no rights
    participant_id: str | None  # a participant-bound key names only this one

    @property
    def rank(self) -> int:
        """The key's rights: its user's role capped by its access (0 without a role)."""
        return policy.rights(role=self.role, access=self.access)

    @property
    def can_write(self) -> bool:
        return self.rank >= ROLE_RANK[Role.WRITER]

    def require(self, role: str) -> None:
        """Raise 403 unless the key's rights (role capped by access) reach `role` at all."""
        if self.role is None:
            raise Forbidden("The key's user has no role here (a removed member?): the key has no rights.")
        if self.rank < ROLE_RANK[Role(role)]:
            if self.access == Access.READ and role != Role.VIEWER:
                raise Forbidden("This is a read key; writing needs a write key.")
            raise Forbidden(f"This needs the {role} role; the key's user does not have it here.")

    def require_participant(self, participant_id: str | None, act: policy.Act = policy.Act.READ) -> None:
        """The participant rule (core.policy): naming an end user takes being them or write access."""
        if participant_id is None:
            return
        policy.require(self, act, policy.reach_of(self, project_id=self.project_id, participant_id=participant_id))

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
    policy.require(principal, policy.Act.ADMIN, policy.Reach.PROJECT)
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
    policy.require(principal, policy.Act.ADMIN, policy.Reach.PROJECT)
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
    if role_for(user_id=user.pk, tenant_id=tenant.id, project_id=project.id if project else None) is None:
        where = f"{tenant.slug}/{project.slug}" if project else tenant.slug
        message = f"{user} has no role in {where}: a key acts with its user's role, so give them one first."
        raise ValidationFailed(message, errors={"user": ["no role here"]})
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        tenant=tenant, project=project, user=user, access=access, participant_id=participant_id or None,
        prefix=prefix, secret_hash=_hash_secret(secret), name=name,
    )
    return key, f"{KEY_PREFIX}{prefix}_{secret}"


def apikey_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke a key: the next request made with it, in any process, is refused."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


# One statement per request resolves a key to its row and its user's current role, so a
# revoke, a removed membership, a changed role or a deactivated user counts from the very
# next request in every process (no cache can outlive them). The role is the highest of the
# user's memberships in the key's tenant (tenant-wide) and in its project.
@functools.cache
def _authenticate_sql() -> str:
    return f"""
    SELECT k.id, k.tenant_id, k.project_id, k.user_id, k.access, k.participant_id, k.secret_hash,
           k.revoked_at IS NULL AND u.is_active, k.last_used_at,
           (SELECT m.role FROM {Membership._meta.db_table} m
             WHERE m.user_id = k.user_id AND m.tenant_id = k.tenant_id
               AND (m.project_id IS NULL OR m.project_id = k.project_id)
             ORDER BY CASE m.role {" ".join(f"WHEN '{role}' THEN {rank}" for role, rank in ROLE_RANK.items())} END DESC
             LIMIT 1)
    FROM {ApiKey._meta.db_table} k JOIN {get_user_model()._meta.db_table} u ON u.id = k.user_id
    WHERE k.prefix = %s
    """


_NO_SECRET = "0" * 64


def apikey_authenticate(*, raw: str) -> Principal | None:
    """The principal for a presented key, or None when it is unknown, malformed, revoked or its
    user is deactivated. The role is read now: a user without one gets a principal with no rights."""
    if not raw.startswith(KEY_PREFIX):
        return None
    prefix, _, secret = raw[len(KEY_PREFIX):].partition("_")
    if not prefix or not secret or len(prefix) > 16:
        return None
    with connections.cursor(prepared=True) as cursor:  # prepared once per connection: planned once
        cursor.execute(_authenticate_sql(), [prefix])
        row = cursor.fetchone()
    # Compare even when no key matched, so timing does not reveal which prefixes exist.
    matches = hmac.compare_digest(row[6] if row else _NO_SECRET, _hash_secret(secret))
    if row is None or not matches or not row[7]:
        return None
    key_id, tenant_id, project_id, user_id, access, participant_id, _, _, last_used_at, role = row
    now = timezone.now()
    if last_used_at is None or now - last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key_id).update(last_used_at=now)
    return Principal(
        api_key_id=key_id, tenant_id=tenant_id, project_id=project_id, user_id=user_id, access=access, role=role,
        participant_id=participant_id,
    )


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


# --- the admin API's doors (/v1/members, /v1/keys): the rights of the dashboard's settings pages ---


def in_project(principal: Principal, project_id) -> Principal:
    """The principal acting in one project: a project key as it is; a tenant-wide key in the
    project it names (its tenant-wide role counts in every project of the tenant)."""
    if principal.project_id is not None:
        principal.project_for(project_id)
        return principal
    project = principal.project_required(project_id, "Members, keys and retention")
    return dataclasses.replace(principal, project_id=uuid.UUID(str(project)))


def members_read(*, principal: Principal) -> list[Membership]:
    """The memberships that give someone a role in the principal's project (any member may see them)."""
    policy.require(principal, policy.Act.READ, policy.Reach.PROJECT)
    return list(
        Membership.objects.filter(Q(project__isnull=True) | Q(project_id=principal.project_id), tenant_id=principal.tenant_id)
        .select_related("user").order_by("user__username", "project_id")
    )


def member_remove(*, principal: Principal, username: str) -> None:
    """Remove a person's role in the principal's project, by their username (project admins)."""
    policy.require(principal, policy.Act.ADMIN, policy.Reach.PROJECT)
    membership = Membership.objects.filter(
        user__username=username, tenant_id=principal.tenant_id, project_id=principal.project_id,
    ).first() if principal.project_id is not None else None
    if membership is None:
        raise NotFound("No such membership in this project (a tenant-wide role is changed in the admin).")
    membership_remove(principal=principal, membership_id=membership.id)


def apikeys_read(*, principal: Principal):
    """The project's API keys, newest first, revoked ones too (project admins; hashes never read out)."""
    policy.require(principal, policy.Act.ADMIN, policy.Reach.PROJECT)
    return ApiKey.objects.filter(tenant_id=principal.tenant_id, project_id=principal.project_id).select_related("user").order_by("-created_at")


def apikey_issue(
    *, principal: Principal, username: str | None, access: str, participant_id: str | None = None, name: str = "",
) -> tuple[ApiKey, str]:
    """A new key on the principal's project for a member (default: the caller), as the dashboard makes one."""
    policy.require(principal, policy.Act.ADMIN, policy.Reach.PROJECT)
    User = get_user_model()
    user = User.objects.filter(pk=principal.user_id).first() if username is None else User.objects.filter(username=username).first()
    if user is None:
        raise ValidationFailed(f"There is no user {username!r}.", errors={"user": ["no such user"]})
    if participant_id is not None:
        check_participant_id(participant_id)
    project = Project.objects.select_related("tenant").get(id=principal.project_id, tenant_id=principal.tenant_id)
    return apikey_create(user=user, tenant=project.tenant, project=project, access=access, participant_id=participant_id, name=name)


def apikey_withdraw(*, principal: Principal, key_id) -> ApiKey:
    """Revoke one of the project's keys (project admins); revoking a revoked key changes nothing."""
    policy.require(principal, policy.Act.ADMIN, policy.Reach.PROJECT)
    key = ApiKey.objects.filter(id=key_id, tenant_id=principal.tenant_id, project_id=principal.project_id).first() if _is_uuid(str(key_id)) else None
    if key is None:
        raise NotFound("No such key in this project.")
    if key.id == principal.api_key_id:  # a script that revoked its own key would lock itself out mid-run
        raise ValidationFailed("This is the key making the request: revoke it with another key, or in the dashboard.",
                               errors={"id": ["the key in use"]})
    return apikey_revoke(api_key=key)


def membership_grant(*, username: str, project: Project, role: str) -> Membership:
    """An operator's grant (`manage.py member add`): the person's role in one project, made or changed."""
    if role not in Role.values:
        raise ValidationFailed(f"role must be one of {', '.join(Role.values)}.", errors={"role": [f"one of {', '.join(Role.values)}"]})
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValidationFailed(f"There is no user {username!r}; create the account first.", errors={"user": ["no such user"]})
    membership, _ = Membership.objects.update_or_create(user=user, tenant_id=project.tenant_id, project=project, defaults={"role": role})
    return membership


def membership_revoke(*, username: str, project: Project) -> int:
    """An operator's removal of a person's role in one project; how many were removed (0 or 1)."""
    removed, _ = Membership.objects.filter(user__username=username, tenant_id=project.tenant_id, project=project).delete()
    return removed
