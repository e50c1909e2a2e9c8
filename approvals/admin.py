"""Approvals in the admin: the reviewers' queue, with why each fact waits.

The list opens on the pending queue. Each row shows the fact's current text with what
the rules found highlighted (`<mark>`), invisible characters made visible, and the
reasons the request gave. The two actions, approve and reject, call `approval_grant` and
`approval_reject` as the signed-in person in each approval's own scope, so the admin
obeys the same roles as the API; nothing is added, edited or deleted here.
"""

from __future__ import annotations

import json
import unicodedata

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from accounts.admin_site import (
    CrossTenantAdminMixin,
    ServiceOnlyAdminMixin,
    admin_principal,
    membership_condition,
    report_outcome,
)
from accounts.models import Tenant
from approvals.gate import approval_current_reasons
from approvals.models import Approval, ApprovalStatus
from approvals.selectors import approval_replaces, approvals_replacing
from approvals.services import approval_grant, approval_reject
from core import scoping
from core.errors import ApplicationError, Forbidden

ACTION_LOCATIONS = [admin.ActionLocation.CHANGE_LIST, admin.ActionLocation.CHANGE_FORM]
LIST_TEXT_CHARS = 400  # the list shows this much of a fact's text; its page shows all of it


class StatusFilter(admin.SimpleListFilter):
    """Pending by default: the list is the reviewers' queue."""

    title = "status"
    parameter_name = "status"
    ALL = "all"

    def lookups(self, request, model_admin):
        return [*ApprovalStatus.choices, (self.ALL, "All")]

    def selected(self) -> str:
        return self.value() or ApprovalStatus.PENDING

    def choices(self, changelist):
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.selected() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request, queryset):
        value = self.selected()
        if value == self.ALL:
            return queryset
        if value not in ApprovalStatus.values:
            return queryset.none()
        return queryset.filter(status=value)


class TenantFilter(admin.SimpleListFilter):
    """The tenants the signed-in person may see."""

    title = "tenant"
    parameter_name = "tenant"

    def lookups(self, request, model_admin):
        tenants = Tenant.objects.order_by("slug")
        if not request.user.is_superuser:
            tenants = tenants.filter(memberships__user_id=request.user.pk).distinct()
        return [(str(tenant.id), tenant.slug) for tenant in tenants]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value not in {lookup for lookup, _ in self.lookup_choices}:
            return queryset.none()
        return queryset.filter(tenant_id=value)


def _visible(segment: str) -> SafeString:
    """Text with invisible characters shown: `⟦U+200B⟧`, and tag-character text spelled out."""
    parts: list[SafeString] = []
    plain: list[str] = []
    tags: list[str] = []

    def flush_plain() -> None:
        if plain:
            parts.append(format_html("{}", "".join(plain)))
            plain.clear()

    def flush_tags() -> None:
        if tags:
            parts.append(format_html('<code title="hidden in Unicode tag characters">⟦hidden text: {}⟧</code>', "".join(tags)))
            tags.clear()

    for char in segment:
        code = ord(char)
        if 0xE0000 <= code <= 0xE007F:
            flush_plain()
            tags.append(chr(code - 0xE0000) if 0xE0020 <= code <= 0xE007E else "")
            continue
        flush_tags()
        if unicodedata.category(char) in {"Cf", "Cc", "Co", "Cs"} and char not in "\n\t":
            flush_plain()
            parts.append(format_html("<code>⟦U+{}⟧</code>", f"{code:04X}"))
        else:
            plain.append(char)
    flush_plain()
    flush_tags()
    return mark_safe("".join(parts))  # every part was escaped by format_html


def highlighted(text: str, reasons: list[dict], *, limit: int | None = None) -> SafeString:
    """`text` with each reason's span marked; spans are offsets into `text`."""
    spans = sorted((r["start"], r["end"], r["rule"]) for r in reasons if isinstance(r.get("start"), int) and isinstance(r.get("end"), int))
    merged: list[list] = []
    for start, end, rule in spans:
        start, end = max(0, start), min(len(text), end)
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            merged[-1][2].add(rule)
        else:
            merged.append([start, end, {rule}])
    shown = len(text) if limit is None else min(len(text), limit)
    parts: list[SafeString] = []
    position = 0
    for start, end, rules in merged:
        if start >= shown:
            break
        parts.append(_visible(text[position:start]))
        parts.append(format_html('<mark title="{}">{}</mark>', ", ".join(sorted(rules)), _visible(text[start:min(end, shown)])))
        position = min(end, shown)
    parts.append(_visible(text[position:shown]))
    if shown < len(text):
        parts.append(mark_safe("…"))
    return mark_safe("".join(parts))


def _current_reasons(approval: Approval) -> list[dict]:
    """What the rules find in the fact's text now (it is what an approval makes visible)."""
    return approval_current_reasons(approval=approval)


class _ApprovalChangeList(ChangeList):
    """The queue's page, with the slot value each keyed approval would replace read for the
    whole page in one query (approvals_replacing) rather than one per row."""

    def get_results(self, request):
        super().get_results(request)
        page = list(self.result_list)  # the rows the list shows, cached on the queryset
        replacing = approvals_replacing(approvals=page)
        for approval in page:
            approval.replaced_value = replacing.get(approval.id)


@admin.register(Approval)
class ApprovalAdmin(CrossTenantAdminMixin, ServiceOnlyAdminMixin, admin.ModelAdmin):
    """The approvals queue across tenants (a staff user who is not a superuser sees only their own)."""

    list_display = ("short_id", "status", "tenant", "project", "fact_type", "participant", "slot", "fact_text", "reasons_shown", "requested", "created_at", "decided")
    list_display_links = ("short_id",)
    list_filter = (StatusFilter, TenantFilter, "kind")
    list_select_related = ("tenant", "project__tenant", "fact")
    search_fields = ("id__exact", "fact__id__exact", "fact__text", "fact__participant_id")
    search_help_text = "Text of the fact, its participant, or the approval's or fact's exact id."
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    fieldsets = (
        (None, {"fields": ("id", "kind", "status", "tenant", "project", "fact_link", "slot")}),
        ("Why", {"fields": ("fact_text_full", "reasons_shown", "reasons_json")}),
        ("Who", {"fields": ("requested_by", "created_at", "decided_by", "decided_at", "note")}),
    )
    readonly_fields = tuple(name for _, options in fieldsets for name in options["fields"])
    actions = ("approve_selected", "reject_selected")

    def get_changelist(self, request, **kwargs):
        return _ApprovalChangeList

    def get_queryset(self, request):
        # The fact's embedding stays: the reasons column asks the gate again, which reads it.
        queryset = super().get_queryset(request).select_related("tenant", "project__tenant", "fact").defer("fact__search_vector")
        if (condition := membership_condition(request.user)) is not None:
            queryset = queryset.filter(condition)
        return queryset

    @admin.display(description="approval", ordering="id")
    def short_id(self, approval: Approval) -> str:
        return str(approval.id)[:8]

    @admin.display(description="type", ordering="fact__type")
    def fact_type(self, approval: Approval) -> str:
        return approval.fact.type

    @admin.display(description="participant", ordering="fact__participant_id")
    def participant(self, approval: Approval) -> str | None:
        return approval.fact.participant_id

    @admin.display(description="key slot (what approving replaces)")
    def slot(self, approval: Approval) -> SafeString | str:
        """The fact's key and, while it waits, the slot's current value that approving would end."""
        if approval.fact.key is None:
            return "—"
        # Read with the page (_ApprovalChangeList), else (the change page) now.
        replaced = approval.replaced_value if hasattr(approval, "replaced_value") else approval_replaces(approval=approval)
        if replaced is None:
            empty = "empty now: approving fills it" if approval.status == ApprovalStatus.PENDING else ""
            return format_html("<code>{}</code> {}", approval.fact.key, empty)
        return format_html(
            '<code>{}</code> replaces <a href="/admin/facts/fact/{}/change/">v{} ({})</a>: {}',
            approval.fact.key, replaced.id, replaced.version, replaced.trust, replaced.text[:200],
        )

    @admin.display(description="fact (current text, what the rules find marked)")
    def fact_text(self, approval: Approval) -> SafeString:
        return highlighted(approval.fact.text, _current_reasons(approval), limit=LIST_TEXT_CHARS)

    @admin.display(description="fact (current text, what the rules find marked)")
    def fact_text_full(self, approval: Approval) -> SafeString:
        return format_html('<div style="white-space: pre-wrap">{}</div>', highlighted(approval.fact.text, _current_reasons(approval)))

    @admin.display(description="reasons")
    def reasons_shown(self, approval: Approval) -> SafeString:
        if not approval.reasons:
            return format_html("<i>{}</i>", "none given")
        return format_html_join(
            mark_safe("<br>"), "<b>{}</b>: <mark>{}</mark>", ((r.get("rule", "?"), r.get("match", "")) for r in approval.reasons)
        )

    @admin.display(description="reasons as stored")
    def reasons_json(self, approval: Approval) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(approval.reasons, indent=2, ensure_ascii=True))

    @admin.display(description="requested by")
    def requested(self, approval: Approval) -> str:
        who = approval.requested_by or {}
        version = f" {who['agentVersion']}" if who.get("agentVersion") else ""
        return f"{who.get('kind', '?')} {who.get('id', '?')}{version}"

    @admin.display(description="decided", ordering="decided_at")
    def decided(self, approval: Approval) -> str:
        if approval.decided_at is None:
            return "—"
        who = approval.decided_by or {}
        return f"{approval.status} by user {who.get('id', '?')} at {approval.decided_at:%Y-%m-%d %H:%M}"

    @admin.display(description="fact")
    def fact_link(self, approval: Approval) -> SafeString:
        return format_html('<a href="/admin/facts/fact/{}/change/">{}</a>', approval.fact_id, approval.fact)

    def has_act_permission(self, request) -> bool:
        """May run the actions; the services then check the person's role in each approval's tenant."""
        return request.user.has_perm("approvals.change_approval")

    @admin.action(description="Approve selected (the facts become visible)", permissions=["act"], location=ACTION_LOCATIONS)
    def approve_selected(self, request, queryset):
        self._decide(request, queryset, approval_grant, verb="Approved")

    @admin.action(description="Reject selected (the facts are never shown)", permissions=["act"], location=ACTION_LOCATIONS)
    def reject_selected(self, request, queryset):
        self._decide(request, queryset, approval_reject, verb="Rejected")

    def _decide(self, request, queryset, decide, *, verb: str) -> None:
        """Run `decide` on each approval in its own scope as the signed-in person; count and name the skips."""
        principals: dict[tuple, object] = {}
        done = 0
        skipped: list[tuple[str, str]] = []
        for approval in queryset.select_related(None).select_related("tenant", "project__tenant").order_by("created_at", "id"):
            where = (approval.tenant_id, approval.project_id)
            if where not in principals:
                principals[where] = admin_principal(user=request.user, tenant_id=approval.tenant_id, project_id=approval.project_id)
            principal = principals[where]
            if approval.status != ApprovalStatus.PENDING:
                skipped.append((str(approval.id), f"already {approval.status}"))
                continue
            try:
                with scoping.scope(tenant_id=approval.tenant_id, project_id=approval.project_id):
                    decided = decide(principal=principal, approval_id=approval.id)
            except Forbidden:
                place = approval.project or approval.tenant
                skipped.append((str(approval.id), f"not allowed: your role in {place} is {principal.role or 'none'}"))
                continue
            except ApplicationError as error:
                skipped.append((str(approval.id), error.detail))
                continue
            done += 1
            self.log_change(request, decided, f"{verb} (fact {decided.fact_id} is now {decided.fact.status}).")
        report_outcome(self, request, verb=verb, noun="approval", plural="approvals", done=done, skipped=skipped)
