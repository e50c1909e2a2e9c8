"""Facts in the admin: read everything, change only through the services.

A fact and its revisions are shown read-only; nothing is added or edited here. The two
actions, verify and delete, call `fact_verify` and `fact_delete` as the signed-in person
in each fact's own scope, so the admin obeys the same roles as the API. Delete ends a
fact (status `deleted`, revisions kept); the admin never removes a fact's rows.
"""

from __future__ import annotations

import json
import uuid

from django.contrib import admin
from django.utils.html import format_html
from django.utils.text import Truncator

from accounts.admin_site import (
    CrossTenantAdminMixin,
    ServiceOnlyAdminMixin,
    admin_principal,
    membership_condition,
    report_outcome,
)
from accounts.models import Project
from core import scoping
from core.errors import ApplicationError, Forbidden
from facts.models import Fact, FactRevision, Status
from facts.services import fact_delete, fact_verify

ACTION_LOCATIONS = [admin.ActionLocation.CHANGE_LIST, admin.ActionLocation.CHANGE_FORM]


def _pretty_json(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


class _DistinctValuesFilter(admin.SimpleListFilter):
    """Choices from the distinct values of one column, capped so a big table stays quick to list."""

    field = ""
    cap = 50

    def lookups(self, request, model_admin):
        values = (
            model_admin.get_queryset(request)
            .filter(**{f"{self.field}__isnull": False})
            .order_by(self.field)
            .values_list(self.field, flat=True)
            .distinct()[: self.cap]
        )
        return [(value, value) for value in values]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        return queryset.filter(**{self.field: self.value()})


class TypeFilter(_DistinctValuesFilter):
    title = "type"
    parameter_name = "type"
    field = "type"


class ParticipantFilter(_DistinctValuesFilter):
    title = "participant"
    parameter_name = "participant"
    field = "participant_id"


class ProjectFilter(admin.SimpleListFilter):
    """Projects named with their tenant, plus the tenant-wide facts that have none."""

    title = "project"
    parameter_name = "project"
    TENANT_WIDE = "none"

    def lookups(self, request, model_admin):
        projects = Project.objects.select_related("tenant").order_by("tenant__slug", "slug")
        if (condition := membership_condition(request.user, project_field="id")) is not None:
            projects = projects.filter(condition)
        return [(str(project.id), str(project)) for project in projects] + [(self.TENANT_WIDE, "tenant-wide (no project)")]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value == self.TENANT_WIDE:
            return queryset.filter(project__isnull=True)
        try:
            return queryset.filter(project_id=uuid.UUID(value))
        except ValueError:
            return queryset.none()


class FactRevisionInline(admin.TabularInline):
    """Every version of the fact, oldest first, as recorded: never added to or changed here."""

    model = FactRevision
    fk_name = "fact"
    ordering = ("version",)
    fields = ("version", "trust", "status", "summary", "content_hash", "recorded_at", "recorded_by", "superseded_at", "invalidation_reason")
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="content")
    def summary(self, revision: FactRevision) -> str:
        return Truncator(revision.text).chars(200)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Fact)
class FactAdmin(CrossTenantAdminMixin, ServiceOnlyAdminMixin, admin.ModelAdmin):
    """Facts across tenants (a staff user who is not a superuser sees only their own), read-only."""

    list_display = ("id", "type", "key", "participant", "tenant", "project", "trust", "status", "version", "updated_at")
    list_filter = (TypeFilter, "trust", "status", ProjectFilter, ParticipantFilter)
    list_select_related = ("tenant", "project__tenant")
    search_fields = ("id__exact", "key", "participant_id", "text")
    search_help_text = "Text of the content, key, participant id, or the fact's exact id."
    ordering = ("-updated_at", "-id")
    show_full_result_count = False  # one COUNT(*) of a big table per page is enough
    fieldsets = (
        (None, {"fields": ("id", "type", "key", "namespace", "tenant", "project", "participant_id", "conversation_id")}),
        ("Content", {"fields": ("content_pretty", "text", "size", "content_hash", "subjects", "references")}),
        ("Provenance", {"fields": ("trust", "status", "attributed_to", "generated_by", "verified_by", "verified_at")}),
        ("Validity", {"fields": ("valid_from", "valid_until", "expires_at")}),
        ("Version", {"fields": ("version", "created_at", "updated_at", "search_config", "embedding_model")}),
    )
    readonly_fields = tuple(name for _, options in fieldsets for name in options["fields"])
    inlines = (FactRevisionInline,)
    actions = ("verify_selected", "delete_selected")

    @admin.display(description="participant", ordering="participant_id")
    def participant(self, fact: Fact) -> str | None:
        return fact.participant_id

    @admin.display(description="content")
    def content_pretty(self, fact: Fact) -> str:
        return _pretty_json(fact.content)

    def get_queryset(self, request):
        # The embedding and the tsvector are large and shown nowhere here.
        queryset = super().get_queryset(request).select_related("tenant", "project__tenant").defer("embedding", "search_vector")
        if (condition := membership_condition(request.user)) is not None:
            queryset = queryset.filter(condition)
        return queryset

    def has_act_permission(self, request) -> bool:
        """May run the actions; the services then check the person's role in each fact's tenant."""
        return request.user.has_perm("facts.change_fact")

    @admin.action(description="Verify selected facts", permissions=["act"], location=ACTION_LOCATIONS)
    def verify_selected(self, request, queryset):
        def verify(principal, fact):
            verified = fact_verify(principal=principal, fact_id=fact.id)
            return verified if verified.version != fact.version else None  # None: it was verified already

        self._act(request, queryset, verify, verb="Verified", done_note="Verified (version {version}).", noop="already verified")

    @admin.action(description="Delete selected facts", permissions=["act"], location=ACTION_LOCATIONS)
    def delete_selected(self, request, queryset):
        """Replaces Django's bulk delete: ends each fact through `fact_delete`, keeping its revisions."""

        def end(principal, fact):
            if fact.status == Status.DELETED:
                return None
            return fact_delete(principal=principal, fact_id=fact.id)

        self._act(request, queryset, end, verb="Deleted", done_note="Deleted (status deleted).", noop="already deleted")

    def _act(self, request, queryset, change, *, verb: str, done_note: str, noop: str) -> None:
        """Run `change` on each fact in its own scope as the signed-in person; count and name the skips."""
        principals: dict[tuple, object] = {}
        done = 0
        skipped: list[tuple[str, str]] = []
        for fact in queryset.order_by("updated_at", "id"):
            where = (fact.tenant_id, fact.project_id)
            if where not in principals:
                principals[where] = admin_principal(user=request.user, tenant_id=fact.tenant_id, project_id=fact.project_id)
            principal = principals[where]
            try:
                with scoping.scope(tenant_id=fact.tenant_id, project_id=fact.project_id):
                    changed = change(principal, fact)
            except Forbidden:
                place = fact.project or fact.tenant
                skipped.append((str(fact.id), f"not allowed: your role in {place} is {principal.role or 'none'}"))
                continue
            except ApplicationError as error:
                skipped.append((str(fact.id), error.detail))
                continue
            if changed is None:
                skipped.append((str(fact.id), noop))
                continue
            done += 1
            self.log_change(request, changed, done_note.format(version=changed.version))
        report_outcome(self, request, verb=verb, noun="fact", plural="facts", done=done, skipped=skipped)
