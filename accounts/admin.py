"""Tenancy in the admin: tenants, projects, memberships and API keys.

API keys are made and revoked only through `apikey_create` and `apikey_revoke`, as the
CLI does: the key text is shown once, right after it is made, and only its hash is
stored; a key is never edited or hard-deleted here. Tenants and projects are not
deleted from the admin either, since that would hard-delete their facts with them.
Idempotency records are an internal cache and are not shown. Retention policies are
set by project admins through `retention_policy_set`, as the dashboard will.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q

from accounts.admin_site import CrossTenantAdminMixin, admin_principal, membership_condition, report_outcome
from accounts.models import ApiKey, Membership, Project, RetentionPolicy, Role, Tenant
from accounts.services import apikey_create, apikey_revoke, role_for
from core import scoping
from accounts.retention import retention_policy_set

ACTION_LOCATIONS = [admin.ActionLocation.CHANGE_LIST, admin.ActionLocation.CHANGE_FORM]


def _projects_with_tenants(db_field, kwargs: dict) -> dict:
    # A project is shown as "tenant/project": fetch the tenant with it.
    kwargs.setdefault("queryset", db_field.remote_field.model.objects.select_related("tenant").order_by("tenant__slug", "slug"))
    return kwargs


class ProjectInline(admin.TabularInline):
    model = Project
    fields = ("slug", "name", "text_search_config", "created_at")
    readonly_fields = ("created_at",)
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Tenant)
class TenantAdmin(CrossTenantAdminMixin, admin.ModelAdmin):
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    readonly_fields = ("id", "created_at")
    fields = ("id", "slug", "name", "created_at")
    inlines = (ProjectInline,)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(CrossTenantAdminMixin, admin.ModelAdmin):
    list_display = ("slug", "name", "tenant", "text_search_config", "created_at")
    list_filter = ("tenant",)
    list_select_related = ("tenant",)
    search_fields = ("slug", "name", "tenant__slug")
    fields = ("id", "tenant", "slug", "name", "text_search_config", "created_at")

    def get_readonly_fields(self, request, obj=None):
        # Moving a project to another tenant would strand its facts and keys there.
        return ("id", "created_at") + (("tenant",) if obj is not None else ())

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class MembershipForm(forms.ModelForm):
    class Meta:
        model = Membership
        fields = ("user", "tenant", "project", "role")

    def clean(self):
        cleaned = super().clean()
        tenant, project = cleaned.get("tenant"), cleaned.get("project")
        if tenant is not None and project is not None and project.tenant_id != tenant.id:
            self.add_error("project", "This project belongs to another tenant.")
        return cleaned


@admin.register(Membership)
class MembershipAdmin(CrossTenantAdminMixin, admin.ModelAdmin):
    form = MembershipForm
    list_display = ("user", "role", "tenant", "project", "created_at")
    list_filter = ("role", "tenant")
    list_select_related = ("user", "tenant", "project__tenant")
    search_fields = ("user__username", "user__email", "tenant__slug", "project__slug")
    autocomplete_fields = ("user",)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "project":
            kwargs = _projects_with_tenants(db_field, kwargs)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ApiKeyCreateForm(forms.ModelForm):
    """What a new key is for; the prefix and secret are the service's to make."""

    class Meta:
        model = ApiKey
        fields = ("name", "user", "tenant", "project", "access", "participant_id")
        help_texts = {
            "project": "Empty: a tenant-wide key.",
            "participant_id": "Bind the key to one end user's app: it may then name only this participant.",
        }

    def clean(self):
        cleaned = super().clean()
        user, tenant, project = cleaned.get("user"), cleaned.get("tenant"), cleaned.get("project")
        if tenant is None or user is None:
            return cleaned
        if project is not None and project.tenant_id != tenant.id:
            self.add_error("project", "This project belongs to another tenant.")
        elif role_for(user_id=user.pk, tenant_id=tenant.id, project_id=project.id if project else None) is None:
            # A key acts with its user's role; with none it could do nothing at all.
            self.add_error("user", f"{user} has no role in {project or tenant}; give them a membership first.")
        return cleaned


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(CrossTenantAdminMixin, admin.ModelAdmin):
    """Keys by their public prefix; the secret's hash is never shown."""

    list_display = ("key_prefix", "name", "user", "tenant", "project", "access", "participant_id", "created_at", "last_used_at", "revoked_at")
    list_filter = (KeyStateFilter, "access", "tenant")
    list_select_related = ("user", "tenant", "project__tenant")
    search_fields = ("prefix", "name", "user__username", "participant_id")
    search_help_text = "Prefix (the part after mh_), name, username or participant id."
    ordering = ("-created_at",)
    autocomplete_fields = ("user",)
    add_fieldsets = ((None, {"fields": ("name", "user", "tenant", "project", "access", "participant_id")}),)
    fieldsets = (
        (None, {"fields": ("key_prefix", "name", "user", "tenant", "project", "access", "participant_id")}),
        ("Use", {"fields": ("created_at", "last_used_at", "revoked_at")}),
    )
    actions = ("revoke_selected",)

    @admin.display(description="key", ordering="prefix")
    def key_prefix(self, key: ApiKey) -> str:
        return f"mh_{key.prefix}_…"

    def get_fieldsets(self, request, obj=None):
        return self.add_fieldsets if obj is None else self.fieldsets

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return tuple(name for _, options in self.fieldsets for name in options["fields"])

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        return super().get_form(request, obj, **kwargs)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "project":
            kwargs = _projects_with_tenants(db_field, kwargs)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        if change:
            raise PermissionDenied  # a key is revoked and made anew, never edited
        data = form.cleaned_data
        key, raw = apikey_create(
            user=data["user"], tenant=data["tenant"], project=data["project"], access=data["access"],
            participant_id=data["participant_id"] or None, name=data["name"],
        )
        # The admin goes on to log and redirect with `obj`: make it the row the service made.
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(key, field.attname))
        obj._state.adding, obj._state.db = False, key._state.db
        messages.success(request, f"The new API key is {raw} — copy it now: it is not shown again, and memoryhub keeps only its hash.")

    # Keys are made by the service, revoked by the action, and otherwise left alone.
    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_revoke_permission(self, request) -> bool:
        return request.user.has_perm("memoryhub.change_apikey")

    @admin.action(description="Revoke selected keys", permissions=["revoke"], location=ACTION_LOCATIONS)
    def revoke_selected(self, request, queryset):
        done = 0
        skipped: list[tuple[str, str]] = []
        for key in queryset.order_by("created_at"):
            if key.revoked_at is not None:
                skipped.append((self.key_prefix(key), "already revoked"))
                continue
            apikey_revoke(api_key=key)
            done += 1
            self.log_change(request, key, "Revoked.")
        report_outcome(self, request, verb="Revoked", noun="key", plural="keys", done=done, skipped=skipped)


def _is_project_admin(user, project: Project) -> bool:
    return user.is_superuser or role_for(user_id=user.pk, tenant_id=project.tenant_id, project_id=project.id) == Role.ADMIN


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(CrossTenantAdminMixin, admin.ModelAdmin):
    """How long each project keeps deleted and expired facts and unregistered conversations.

    Saved through `retention_policy_set` as the signed-in person, so only the project's
    admins (or a superuser) can change it; a project without a policy uses the
    MEMORYHUB_RETENTION_* settings. Removing a policy is not offered (it would quietly
    bring the defaults back); an emptied field keeps those rows forever.
    """

    list_display = ("project", "deleted_facts_days", "expired_facts_days", "unregistered_conversations_days", "updated_at", "updated_by")
    list_select_related = ("project__tenant", "updated_by")
    fields = ("project", "deleted_facts_days", "expired_facts_days", "unregistered_conversations_days", "updated_at", "updated_by")
    search_fields = ("project__slug", "project__tenant__slug")

    def get_readonly_fields(self, request, obj=None):
        return ("updated_at", "updated_by") + (("project",) if obj is not None else ())

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if (condition := membership_condition(request.user)) is not None:
            queryset = queryset.filter(condition)
        return queryset

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "project":
            kwargs = _projects_with_tenants(db_field, kwargs)
            if not request.user.is_superuser:
                # Only projects this person administers: a tenant-wide admin membership counts in each.
                admin_of = Membership.objects.filter(user_id=request.user.pk, role=Role.ADMIN)
                kwargs["queryset"] = kwargs["queryset"].filter(
                    Q(tenant_id__in=admin_of.filter(project__isnull=True).values("tenant_id"))
                    | Q(id__in=admin_of.filter(project__isnull=False).values("project_id"))
                )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and (obj is None or _is_project_admin(request.user, obj.project))

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change):
        project = obj.project
        principal = admin_principal(user=request.user, tenant_id=project.tenant_id, project_id=project.id)
        data = form.cleaned_data
        with scoping.scope(tenant_id=project.tenant_id, project_id=project.id):
            policy = retention_policy_set(
                principal=principal, project_id=project.id, deleted_facts_days=data["deleted_facts_days"],
                expired_facts_days=data["expired_facts_days"],
                unregistered_conversations_days=data["unregistered_conversations_days"],
            )
        # The admin goes on to log and redirect with `obj`: make it the row the service saved.
        for model_field in RetentionPolicy._meta.concrete_fields:
            setattr(obj, model_field.attname, getattr(policy, model_field.attname))
        obj._state.adding, obj._state.db = False, policy._state.db
