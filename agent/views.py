"""Agents API: declarations, context before a turn, tools, remember — thin doors onto agent.services."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status as http
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response

from agent import services as agents
from agent.retrieve import retrieve
from core.api import ApiView, iso_time, validated
from core.errors import ValidationFailed
from core.pagination import paginate
from facts.serializers import StrictSerializer, fact_to_dict
from retrieval.serializers import FactHitSerializer, RetrieveInSerializer, RetrieveOutSerializer, WarningSerializer
from workspaces.services import working_memory_tools
from workspaces.tools import FORMATS, to_format

PROJECT_PARAM = OpenApiParameter("projectId", str, required=False, description="for tenant-wide keys: the agent's project")


class RememberRulesSerializer(serializers.Serializer):
    types = serializers.ListField(child=serializers.CharField())
    scope = serializers.ChoiceField(choices=list(agents.REMEMBER_SCOPES), required=False)
    keepDays = serializers.IntegerField(required=False, min_value=1, max_value=3650)


class MemorySerializer(serializers.Serializer):
    remember = RememberRulesSerializer(required=False, allow_null=True)


class AgentInSerializer(StrictSerializer):
    slug = serializers.CharField(max_length=200, required=False)
    version = serializers.CharField(max_length=100, required=False, default="1.0.0")
    instructions = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)
    # Intents and remember rules are validated by agent.services (one rule for every door).
    retrieval = serializers.ListField(child=serializers.JSONField(), required=False, default=list)
    memory = serializers.JSONField(required=False, default=dict, help_text="{remember: {types, scope, keepDays}}")
    projectId = serializers.UUIDField(required=False, allow_null=True)


class AgentOutSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    version = serializers.CharField()
    instructions = serializers.CharField()
    retrieval = serializers.ListField(child=serializers.DictField())
    memory = MemorySerializer()
    projectId = serializers.UUIDField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    warnings = WarningSerializer(many=True)


def agent_to_dict(agent) -> dict:
    return {
        "id": str(agent.id), "slug": agent.slug, "version": agent.version, "instructions": agent.instructions,
        "retrieval": agent.retrieval, "memory": {"remember": agent.remember} if agent.remember else {},
        "projectId": str(agent.project_id), "createdAt": iso_time(agent.created_at), "updatedAt": iso_time(agent.updated_at),
        "warnings": agents.publishing_warnings(agent),
    }


def _agent_input(data: dict, slug: str | None = None) -> agents.AgentInput:
    memory = data.get("memory") or {}
    if not isinstance(memory, dict) or set(memory) - {"remember"}:
        raise ValidationFailed("memory must be {remember: {types, scope, keepDays}}", errors={"memory": ["{remember: {...}}"]})
    if slug is not None and data.get("slug") not in (None, slug):
        raise ValidationFailed("slug in the body differs from the one in the path", errors={"slug": ["must match the path"]})
    return agents.AgentInput(
        slug=slug or data.get("slug"), version=data["version"], instructions=data["instructions"],
        retrieval=data["retrieval"], remember=memory.get("remember"),
    )


class AgentListView(ApiView):
    @extend_schema(operation_id="agents_list", parameters=[PROJECT_PARAM], responses=inline_serializer("AgentPage", {"data": AgentOutSerializer(many=True), "nextCursor": serializers.CharField(allow_null=True)}))
    def get(self, request):
        queryset = agents.agents_list(principal=self.principal, project_id=request.query_params.get("projectId") or None)
        rows, next_cursor = paginate(queryset, params=request.query_params)
        return Response({"data": [agent_to_dict(a) for a in rows], "nextCursor": next_cursor})

    @extend_schema(operation_id="agents_create", request=AgentInSerializer, responses={201: AgentOutSerializer})
    def post(self, request):
        data = validated(AgentInSerializer, request.data)
        if not data.get("slug"):
            raise ValidationFailed("slug is required, e.g. acme.desk", errors={"slug": ["required"]})
        agent, _ = agents.agent_save(principal=self.principal, project_id=data.get("projectId"), data=_agent_input(data), create_only=True)
        return Response(agent_to_dict(agent), status=http.HTTP_201_CREATED)


class AgentDetailView(ApiView):
    @extend_schema(operation_id="agents_get", parameters=[PROJECT_PARAM], responses=AgentOutSerializer)
    def get(self, request, slug):
        return Response(agent_to_dict(agents.agent_get(principal=self.principal, project_id=request.query_params.get("projectId") or None, slug=slug)))

    @extend_schema(operation_id="agents_put", request=AgentInSerializer, responses=AgentOutSerializer)
    def put(self, request, slug):
        data = validated(AgentInSerializer, request.data)
        agent, _ = agents.agent_save(principal=self.principal, project_id=data.get("projectId"), data=_agent_input(data, slug), replace_only=True)
        return Response(agent_to_dict(agent))

    @extend_schema(operation_id="agents_delete", parameters=[PROJECT_PARAM], responses={204: None})
    def delete(self, request, slug):
        agents.agent_delete(principal=self.principal, project_id=request.query_params.get("projectId") or None, slug=slug)
        return Response(status=http.HTTP_204_NO_CONTENT)


class ContextInSerializer(StrictSerializer):
    userMessage = serializers.CharField(max_length=32_000, trim_whitespace=False)
    participantId = serializers.CharField(required=False, allow_null=True, max_length=200)
    conversationId = serializers.UUIDField(required=False, allow_null=True)
    runId = serializers.CharField(required=False, allow_null=True, max_length=200)
    projectId = serializers.UUIDField(required=False, allow_null=True)


class ChatMessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["system", "user"])
    content = serializers.CharField()


class ContextOutSerializer(serializers.Serializer):
    messages = ChatMessageSerializer(many=True)
    facts = FactHitSerializer(many=True)
    recalled = serializers.ListField(child=serializers.DictField())
    warnings = WarningSerializer(many=True)
    tools = serializers.ListField(child=serializers.DictField())


class AgentContextView(ApiView):
    idempotent_methods = frozenset()  # a read

    @extend_schema(operation_id="agents_context", request=ContextInSerializer, responses=ContextOutSerializer)
    def post(self, request, slug):
        context = agents.context(principal=self.principal, slug=slug, data=validated(ContextInSerializer, request.data))
        return Response(context_to_dict(context))


def context_to_dict(context: agents.Context) -> dict:
    """The context as the API returns it (also the MCP tool memory_context's structured result)."""
    return {
        "messages": context.messages,
        "facts": [{"fact": fact_to_dict(h.fact), "ranks": h.ranks, "score": h.score, "intent": h.intent.as_dict()} for h in context.hits],
        "recalled": context.recalled,
        "warnings": context.warnings,
        "tools": context.tools,
    }


class JsonOnlyNegotiation(BaseContentNegotiation):
    """Always JSON: here `?format=` names a tool format (openai, anthropic, mcp), not a DRF renderer."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class AgentToolsView(ApiView):
    content_negotiation_class = JsonOnlyNegotiation

    @extend_schema(
        operation_id="agents_tools",
        parameters=[
            OpenApiParameter("participantId", str, required=False), OpenApiParameter("conversationId", str, required=False), PROJECT_PARAM,
            OpenApiParameter("include", str, required=False, description="`working-memory`: add memory_save, memory_search, "
                             "memory_delete, memory_list and memory_query (served at /v1/workspaces/{ns}/...)"),
            OpenApiParameter("format", str, required=False, enum=list(FORMATS), description="the definitions in a vendor's "
                             "shape: `openai` {type: function, function: {name, description, parameters}}, `anthropic` "
                             "{name, description, input_schema}, `mcp` {name, description, inputSchema}; default {name, description, parameters}"),
        ],
        responses=inline_serializer("AgentTools", {"tools": serializers.ListField(child=serializers.DictField())}),
    )
    def get(self, request, slug):
        params = request.query_params
        agent = agents.agent_get(principal=self.principal, project_id=params.get("projectId") or None, slug=slug)
        conversation = params.get("conversationId") or None
        turn = agents.Turn.start(principal=self.principal, agent=agent, participant_id=params.get("participantId") or None, conversation_id=conversation)
        tools = agents.turn_tools(turn)
        include = {part.strip() for part in params.get("include", "").split(",") if part.strip()}
        if include - {"working-memory"}:
            raise ValidationFailed("include takes: working-memory", errors={"include": ["one of: working-memory"]})
        if "working-memory" in include:
            tools += working_memory_tools()
        fmt = params.get("format") or None
        if fmt is not None and fmt not in FORMATS:
            raise ValidationFailed(f"format takes: {', '.join(FORMATS)}", errors={"format": [f"one of: {', '.join(FORMATS)}"]})
        return Response({"tools": to_format(tools, fmt)})


class RememberInSerializer(StrictSerializer):
    participantId = serializers.CharField(required=False, allow_null=True, max_length=200)
    conversationId = serializers.UUIDField(required=False, allow_null=True)
    runId = serializers.CharField(required=False, allow_null=True, max_length=200)
    stepId = serializers.CharField(required=False, allow_null=True, max_length=200)
    toolCallId = serializers.CharField(required=False, allow_null=True, max_length=200)
    arguments = serializers.JSONField()
    projectId = serializers.UUIDField(required=False, allow_null=True)


class RememberOutSerializer(serializers.Serializer):
    factId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=["remembered", "pending-approval"])
    outcome = serializers.ChoiceField(choices=["created", "superseded", "replayed"])
    version = serializers.IntegerField()
    approvalId = serializers.UUIDField(required=False)
    hint = serializers.CharField(required=False, help_text="Held only because the text reads as an order: how to state it as a fact about the person instead.")


class AgentRememberView(ApiView):
    @extend_schema(operation_id="agents_remember", request=RememberInSerializer, responses={200: RememberOutSerializer, 201: RememberOutSerializer})
    def post(self, request, slug):
        result, replayed = agents.remember(principal=self.principal, slug=slug, data=validated(RememberInSerializer, request.data))
        return Response(result, status=http.HTTP_200_OK if replayed else http.HTTP_201_CREATED)


class RetrieveView(ApiView):
    """`POST /v1/retrieve`: a thin door onto agent.retrieve."""

    # A read: replaying it by Idempotency-Key would serve stale memory.
    idempotent_methods = frozenset()

    @extend_schema(operation_id="retrieve", request=RetrieveInSerializer, responses=RetrieveOutSerializer)
    def post(self, request):
        serializer = RetrieveInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(retrieve(principal=self.principal, data=serializer.validated_data))
