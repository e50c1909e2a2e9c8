"""Claude's memory tool over HTTP (`POST /v1/memory-tool/{who}`): a thin door onto profiles.memory_tool.

The body is the tool call's `input` as the model sent it (`{"command": "view", "path":
"/memories"}`); the answer's `text` is the tool result to hand back. A command the tool
refuses is a `400 memory-tool-error` whose `detail` is the text to hand back as an error
result. `{who}`: a participant id (or `participant:ID`), or `namespace:NAME`.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from core.api import ApiView, json_object_body
from profiles import memory_tool


class HeldSerializer(serializers.Serializer):
    file = serializers.CharField()
    line = serializers.CharField(help_text="the line as the model wrote it")
    factId = serializers.UUIDField(help_text="the pending fact")
    approvalId = serializers.UUIDField()
    reasons = serializers.ListField(child=serializers.DictField(), help_text="why it reads like an instruction")


class MemoryToolView(ApiView):
    @extend_schema(
        operation_id="memory_tool",
        parameters=[
            OpenApiParameter("who", str, OpenApiParameter.PATH,
                             description="a participant id (or participant:ID), or namespace:NAME for a shared folder"),
            OpenApiParameter("projectId", str, required=False, description="for tenant-wide keys: the project"),
        ],
        request=inline_serializer("MemoryToolCommand", {
            "command": serializers.ChoiceField(choices=memory_tool.COMMANDS),
            "path": serializers.CharField(required=False, help_text="under /memories (view, create, str_replace, insert, delete)"),
            "view_range": serializers.ListField(child=serializers.IntegerField(), required=False, min_length=2, max_length=2),
            "file_text": serializers.CharField(required=False),
            "old_str": serializers.CharField(required=False),
            "new_str": serializers.CharField(required=False, allow_blank=True),
            "insert_line": serializers.IntegerField(required=False),
            "insert_text": serializers.CharField(required=False),
            "old_path": serializers.CharField(required=False),
            "new_path": serializers.CharField(required=False),
        }),
        responses={
            200: inline_serializer("MemoryToolResult", {
                "text": serializers.CharField(help_text="the tool result to hand back to the model"),
                "held": HeldSerializer(many=True, help_text="lines the memory gate holds for approval"),
            }),
            400: OpenApiResponse(description="`memory-tool-error`: the tool refuses the command; `detail` is the error "
                                             "result to hand back. `validation-error`: the call is malformed."),
        },
        description="Claude's memory tool (`memory_20250818`) over the MEMORY.md folder of one person or namespace: "
                    "view, create, str_replace, insert, delete, rename under /memories. Each edit writes fact revisions; "
                    "an instruction-like line waits for approval; MEMORY.md keeps to 200 lines. `view` takes a read key.",
    )
    def post(self, request, who: str):
        body = json_object_body(request)
        scope = memory_tool.folder_for(principal=self.principal, who=who, project_id=request.query_params.get("projectId") or None)
        return Response(memory_tool.run_command(scope=scope, command=body).as_dict())
