"""Agents and conversations in the admin, read-only, for operators across tenants.

An agent is declared and replaced through `agent_save` (the API, or the dashboard's
agents page shows it), which validates its intents; a conversation changes only
through its services. So both are shown here and never edited.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from accounts.admin_site import CrossTenantAdminMixin, ServiceOnlyAdminMixin, membership_condition
from agent.models import Agent, Conversation


def _pretty(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


@admin.register(Agent)
class AgentAdmin(CrossTenantAdminMixin, ServiceOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("slug", "version", "tenant", "project", "updated_at")
    list_filter = ("tenant",)
    list_select_related = ("tenant", "project__tenant")
    search_fields = ("slug",)
    fields = ("id", "slug", "version", "tenant", "project", "instructions", "retrieval_shown", "remember_shown", "created_at", "updated_at")
    readonly_fields = fields

    @admin.display(description="retrieval intents")
    def retrieval_shown(self, agent: Agent) -> str:
        return _pretty(agent.retrieval)

    @admin.display(description="memory.remember")
    def remember_shown(self, agent: Agent) -> str:
        return _pretty(agent.remember)

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if (condition := membership_condition(request.user)) is not None:
            queryset = queryset.filter(condition)
        return queryset


@admin.register(Conversation)
class ConversationAdmin(CrossTenantAdminMixin, ServiceOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "agent_slug", "participant_id", "tenant", "project", "replay", "unregistered_at", "created_at")
    list_filter = ("replay", "tenant")
    list_select_related = ("tenant", "project__tenant")
    search_fields = ("id__exact", "agent_slug", "participant_id")
    fields = ("id", "agent_slug", "participant_id", "segment", "tenant", "project", "replay", "unregistered_at", "created_at", "user_id")
    readonly_fields = fields
    ordering = ("-created_at", "-id")
    show_full_result_count = False

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if (condition := membership_condition(request.user)) is not None:
            queryset = queryset.filter(condition)
        return queryset
