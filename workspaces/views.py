"""Working memory API (/v1/workspaces/{ns}/...): thin doors onto workspaces.services.

The memory_* replies carry the seed's tool text (`text`) beside the structured data, so
an agent loop can hand `text` to its model as the tool result; `Accept: text/plain`
returns the text alone. The block is `text/plain` unless JSON is asked for.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import renderers, serializers, status as http
from rest_framework.response import Response

from core.api import ApiView, PlainTextRenderer, json_object_body
from core.errors import ValidationFailed
from facts.schema import NameField
from facts.serializers import StrictSerializer
from workspaces import block as memory_block, services as workspaces

PROJECT = OpenApiParameter("projectId", str, required=False, description="for tenant-wide keys: the workspace's project")
TEXT = "text/plain; charset=utf-8"

class MemoryEntrySerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.CharField()
    type = serializers.CharField()
    namespace = serializers.CharField()
    references = serializers.ListField(child=serializers.CharField(), help_text="keys of the entries it refers to")
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    factId = serializers.UUIDField()
    version = serializers.IntegerField()


class MemorySavedSerializer(serializers.Serializer):
    entry = MemoryEntrySerializer()
    outcome = serializers.ChoiceField(["created", "superseded"])
    pruned = serializers.ListField(child=serializers.CharField(), help_text="keys the caps removed")
    text = serializers.CharField(help_text="the seed's tool reply")


class MemorySearchSerializer(serializers.Serializer):
    data = MemoryEntrySerializer(many=True)
    count = serializers.IntegerField()
    text = serializers.CharField(help_text='the seed\'s tool reply, e.g. "Found 2 memory entries:"')


class MemoryKeysSerializer(serializers.Serializer):
    keys = serializers.ListField(child=serializers.CharField())
    text = serializers.CharField()


class MemoryDeletedSerializer(serializers.Serializer):
    key = serializers.CharField()
    text = serializers.CharField()


class MemoryQueryInSerializer(serializers.Serializer):
    query = serializers.CharField(help_text='expr-lang, e.g. filter(memory, .type == "error")')
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=500, help_text="default 50")


class MemoryQueryOutSerializer(serializers.Serializer):
    rows = serializers.ListField(child=serializers.DictField())
    count = serializers.IntegerField(help_text="matches before the limit")
    truncated = serializers.BooleanField()


class ToolCallInSerializer(serializers.Serializer):
    name = serializers.CharField()
    args = serializers.JSONField(required=False, allow_null=True)
    result = serializers.JSONField(required=False, allow_null=True)


class TurnInSerializer(serializers.Serializer):
    assistantText = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    toolCalls = serializers.ListField(child=ToolCallInSerializer(), required=False, allow_null=True)
    thinking = serializers.CharField(required=False, allow_null=True, allow_blank=True)


class CapturedEntrySerializer(MemoryEntrySerializer):
    outcome = serializers.ChoiceField(["created", "superseded"])


class CapturedSerializer(serializers.Serializer):
    saved = CapturedEntrySerializer(many=True)
    pruned = serializers.ListField(child=serializers.CharField())
    toolCallsRecorded = serializers.IntegerField(required=False)


class TaskInSerializer(StrictSerializer):
    """A task as `PUT .../tasks` takes it (workspaces.services.tasks_put): only `id` is needed."""

    id = serializers.CharField(max_length=4000)
    desc = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    status = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    rounds = serializers.IntegerField(required=False, min_value=0)
    note = serializers.CharField(required=False, allow_blank=True, max_length=4000)


class MemorySaveInSerializer(StrictSerializer):
    key = NameField()
    value = serializers.CharField(allow_blank=True, trim_whitespace=False)
    type = serializers.ChoiceField(choices=list(memory_block.TYPES), required=False, allow_null=True, help_text="inferred from the key when left out")
    references = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False, allow_null=True, help_text="keys of other entries")
    projectId = serializers.UUIDField(required=False, allow_null=True)


class TaskSerializer(serializers.Serializer):
    id = serializers.CharField()
    desc = serializers.CharField()
    status = serializers.CharField()
    rounds = serializers.IntegerField()
    note = serializers.CharField()


def _wants_text(request) -> bool:
    accept = request.headers.get("Accept", "")
    return "text/plain" in accept and "application/json" not in accept


def _reply(request, payload: dict, text: str, status: int = http.HTTP_200_OK):
    if _wants_text(request):
        return HttpResponse(text, content_type=TEXT, status=status)
    return Response(payload | {"text": text}, status=status)


class _WorkspaceView(ApiView):
    renderer_classes = [renderers.JSONRenderer, PlainTextRenderer]

    def space(self, request, namespace: str, project_id=None) -> workspaces.Space:
        return workspaces.workspace(
            principal=self.principal, namespace=namespace,
            # A body's projectId (even "") is what it says; the query's empty one is "not given".
            project_id=project_id if project_id is not None else request.query_params.get("projectId") or None,
        )


class MemoryView(_WorkspaceView):
    @extend_schema(
        operation_id="memory_search", parameters=[OpenApiParameter("q", str, required=False, description="case-insensitive substring of key or value; empty: every entry"), PROJECT],
        responses=MemorySearchSerializer, description="`memory_search`: entries whose key or value contains `q`.",
    )
    def get(self, request, namespace: str):
        space = self.space(request, namespace)
        found, key_of, text = workspaces.memory_search(space=space, query=request.query_params.get("q", ""))
        data = [workspaces.entry_to_dict(f, key_of) for f in found]
        return _reply(request, {"data": data, "count": len(data)}, text)

    @extend_schema(
        operation_id="memory_save", parameters=[PROJECT],
        request=MemorySaveInSerializer,
        responses={201: MemorySavedSerializer, 200: MemorySavedSerializer},
        description="`memory_save`: creates the entry (201) or writes its next revision (200).",
    )
    def post(self, request, namespace: str):
        body = json_object_body(request)
        unknown = sorted(set(body) - {"key", "value", "type", "references", "projectId"})
        if unknown:
            raise ValidationFailed(f"{unknown[0]} is not a field here", errors={name: ["not a field here"] for name in unknown})
        space = self.space(request, namespace, body.get("projectId"))
        out = workspaces.memory_save(
            space=space, key=body.get("key"), value=body.get("value"), type=body.get("type"), references=body.get("references"),
        )
        status = http.HTTP_201_CREATED if out["outcome"] == "created" else http.HTTP_200_OK
        return _reply(request, out, out["text"], status)


class MemoryKeysView(_WorkspaceView):
    @extend_schema(operation_id="memory_list", parameters=[PROJECT], responses=MemoryKeysSerializer, description="`memory_list`: every key, no content.")
    def get(self, request, namespace: str):
        keys, text = workspaces.memory_keys(space=self.space(request, namespace))
        return _reply(request, {"keys": keys}, text)

    @extend_schema(operation_id="memory_delete_keys", parameters=[PROJECT], responses={200: MemoryDeletedSerializer}, description="`memory_delete` of the entry whose key is `keys`.")
    def delete(self, request, namespace: str):
        return _remove(self, request, namespace, "keys")


class MemoryEntryView(_WorkspaceView):
    @extend_schema(operation_id="memory_delete", parameters=[PROJECT], responses={200: MemoryDeletedSerializer}, description="`memory_delete`: removes the entry (404 when there is none).")
    def delete(self, request, namespace: str, key: str):
        return _remove(self, request, namespace, key)


def _remove(view: _WorkspaceView, request, namespace: str, key: str):
    text = workspaces.memory_delete(space=view.space(request, namespace), key=key)
    return _reply(request, {"key": key}, text)


class MemoryQueryView(_WorkspaceView):
    @extend_schema(
        operation_id="memory_query", parameters=[PROJECT], request=MemoryQueryInSerializer, responses=MemoryQueryOutSerializer,
        description="`memory_query`: filter/map/join/union over `memory`, `tool_calls` (newest 200) and `tasks`. "
                    "A query that does not parse is a 400 with `position` {line, column} and `expected`.",
    )
    def post(self, request, namespace: str):
        body = json_object_body(request)
        space = self.space(request, namespace, body.get("projectId"))
        return Response(workspaces.memory_query_run(space=space, query=body.get("query"), limit=body.get("limit")))


class TurnsView(_WorkspaceView):
    @extend_schema(
        operation_id="memory_turns", parameters=[PROJECT], request=TurnInSerializer, responses={201: CapturedSerializer},
        description="Auto-extraction from a finished turn: `[MEMORY: key] value` lines, last_action, last_files, "
                    "tool results of write/exec/search tools, thinking; every tool call joins `tool_calls`.",
    )
    def post(self, request, namespace: str):
        body = json_object_body(request)
        space = self.space(request, namespace, body.get("projectId"))
        out = workspaces.record_turn(
            space=space, assistant_text=body.get("assistantText"), tool_calls=body.get("toolCalls"), thinking=body.get("thinking"),
        )
        return Response(out, status=http.HTTP_201_CREATED)


class CompactionsView(_WorkspaceView):
    @extend_schema(
        operation_id="memory_compactions", parameters=[PROJECT],
        request=inline_serializer("CompactionIn", {"summary": serializers.CharField()}), responses={201: CapturedSerializer},
        description="Compaction capture: `## Key Decisions` items become decision entries, `## Critical Context` items "
                    "context entries, and `checkpoint:summary` holds Goal, Progress, Key Decisions, Critical Context.",
    )
    def post(self, request, namespace: str):
        body = json_object_body(request)
        space = self.space(request, namespace, body.get("projectId"))
        out = workspaces.record_compaction(space=space, summary=body.get("summary"))
        return Response(out, status=http.HTTP_201_CREATED)


class TasksView(_WorkspaceView):
    @extend_schema(operation_id="memory_tasks_get", parameters=[PROJECT], responses=TaskSerializer(many=True))
    def get(self, request, namespace: str):
        return Response(workspaces.tasks_get(space=self.space(request, namespace)))

    @extend_schema(operation_id="memory_tasks_put", parameters=[PROJECT], request=TaskInSerializer(many=True), responses=TaskSerializer(many=True),
                   description="Replaces the task list the `tasks` relation reads.")
    def put(self, request, namespace: str):
        return Response(workspaces.tasks_put(space=self.space(request, namespace), tasks=request.data))


class BlockView(_WorkspaceView):
    @extend_schema(
        operation_id="memory_block",
        parameters=[
            OpenApiParameter("prompt", str, required=False, description="the current prompt: entries that match its words are kept first"),
            OpenApiParameter("budget", {"type": "integer", "minimum": 1, "maximum": 100_000}, required=False,
                             description="token budget (1 to 100000); none: every entry"),
            OpenApiParameter("standingRule", bool, required=False, description='prepend "Check memory first. ..."'),
            PROJECT,
        ],
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="the <memory> block; headers "
                   "X-Memory-Tokens, X-Memory-Tokenizer, X-Memory-Entries (shown/total)")},
        description="The graph-ordered `<memory>` block. `Accept: application/json` returns {block, tokens, budget, "
                    "tokenizer, shown, total, dropped, resume}.",
    )
    def get(self, request, namespace: str):
        params = request.query_params
        budget = params.get("budget")
        if budget not in (None, ""):
            if not budget.isdigit() or not 1 <= int(budget) <= 100_000:
                raise ValidationFailed("budget must be a whole number of tokens from 1 to 100000", errors={"budget": ["1 to 100000"]})
            budget = int(budget)
        else:
            budget = None
        rule = params.get("standingRule", "").lower()
        if rule not in ("", "1", "true", "yes", "0", "false", "no"):
            raise ValidationFailed("standingRule must be true or false", errors={"standingRule": ["true or false"]})
        rule = rule in ("1", "true", "yes")
        block = workspaces.memory_block_for(
            space=self.space(request, namespace), prompt=params.get("prompt", ""), budget=budget, standing_rule=rule,
        )
        if "application/json" in request.headers.get("Accept", ""):
            return Response({
                "block": block.text, "tokens": block.tokens, "budget": block.budget, "tokenizer": block.tokenizer,
                "shown": block.shown, "total": block.total, "dropped": block.dropped, "resume": block.resume,
            })
        response = HttpResponse(block.text, content_type=TEXT)
        response["X-Memory-Tokens"] = str(block.tokens)
        response["X-Memory-Tokenizer"] = block.tokenizer
        response["X-Memory-Entries"] = f"{block.shown}/{block.total}"
        return response
