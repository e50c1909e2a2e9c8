"""What every memoryhub admin page shares: reading across tenants, acting as a principal.

The admin is an operator's tool and spans tenants, so its pages read with scopes
disabled (`CrossTenantAdminMixin`). It never writes around the services: an admin
action acts as the signed-in person in the row's own tenant and project
(`admin_principal`) and calls the same service the API calls, inside that scope.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Q
from django.template.response import SimpleTemplateResponse

from accounts.models import Access, Membership, Role
from accounts.services import Principal, role_for
from core import scoping

MAX_NAMED_SKIPS = 10  # a message names this many skipped rows, then counts the rest


def _unscoped(view, *args, **kwargs):
    # A queryset is lazy and an admin page is a TemplateResponse that Django renders
    # after the view returns, so the page is rendered here, while scopes are disabled.
    with scoping.scopes_disabled():
        response = view(*args, **kwargs)
        if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
            response.render()
    return response


class CrossTenantAdminMixin:
    """Runs (and renders) a ModelAdmin's pages with tenant scopes disabled.

    Scoped managers refuse to query outside a scope; the admin is where an operator
    really does look across tenants. Actions run inside the changelist or change page,
    so they start unscoped too and enter a row's scope themselves before they write.
    """

    def changelist_view(self, request, extra_context=None):
        return _unscoped(super().changelist_view, request, extra_context)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return _unscoped(super().changeform_view, request, object_id, form_url, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        return _unscoped(super().delete_view, request, object_id, extra_context)

    def history_view(self, request, object_id, extra_context=None):
        return _unscoped(super().history_view, request, object_id, extra_context)


class ServiceOnlyAdminMixin:
    """Rows that change only through the services: no add, no edit, no delete in the admin;
    the actions call the services, which check the person's role."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


def membership_condition(user, *, tenant_field: str = "tenant_id", project_field: str = "project_id") -> Q | None:
    """The rows a staff user who is not a superuser may see: their tenants and projects.

    None for a superuser (everything). Django's model permissions say what kind of row
    a staff user may open; memberships say whose.
    """
    if user.is_superuser:
        return None
    memberships = Membership.objects.filter(user_id=user.pk)
    return Q(**{f"{tenant_field}__in": memberships.filter(project__isnull=True).values("tenant_id")}) | Q(
        **{f"{project_field}__in": memberships.filter(project__isnull=False).values("project_id")}
    )


def admin_principal(*, user, tenant_id, project_id) -> Principal:
    """The principal a person signed in to the admin acts as in one tenant or project.

    Their membership role there, with write access and no participant binding, as a
    write key of theirs would be. A superuser who is no member there acts as an admin;
    anyone else without a role gets the services' own refusal.
    """
    role = role_for(user_id=user.pk, tenant_id=tenant_id, project_id=project_id)
    if role is None and user.is_superuser:
        role = Role.ADMIN
    return Principal(
        api_key_id=None,
        tenant_id=tenant_id,
        project_id=project_id,
        user_id=user.pk,
        access=Access.WRITE,
        role=role,
        participant_id=None,
    )


def report_outcome(
    model_admin: admin.ModelAdmin, request, *, verb: str, noun: str, plural: str, done: int, skipped: list[tuple[str, str]]
) -> None:
    """One message for a bulk action: how many it did, and which it skipped and why."""
    text = f"{verb} {done} {noun if done == 1 else plural}"
    if skipped:
        named = "; ".join(f"{name} ({why})" for name, why in skipped[:MAX_NAMED_SKIPS])
        rest = len(skipped) - MAX_NAMED_SKIPS
        text += f"; {len(skipped)} skipped: {named}" + (f"; and {rest} more" if rest > 0 else "")
    model_admin.message_user(request, text + ".", messages.WARNING if skipped else messages.SUCCESS)
