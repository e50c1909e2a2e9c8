"""Markdown memory API (/v1/markdown...): thin doors onto profiles.markdown_memory.

`GET /v1/markdown` is the whole folder as JSON (what `memoryhub markdown export` writes),
`GET /v1/markdown/{file}` one file as `text/markdown` (`MEMORY.md`: the index),
`POST /v1/markdown/import` a folder back into facts. `?participantId=` picks whose memory
(default: the project's own, or the bound key's participant's).
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from core.api import json_object_body
from core.errors import ValidationFailed
from profiles import markdown_memory
from profiles.views import TextOrJsonView

MARKDOWN = "text/markdown; charset=utf-8"
PARAMETERS = [
    OpenApiParameter("participantId", str, required=False, description="whose markdown memory; none: the project's own"),
    OpenApiParameter("projectId", str, required=False, description="for tenant-wide keys: the project"),
]


class MarkdownFileSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="MEMORY.md or a topic file, e.g. user-preferences.md")
    text = serializers.CharField()


class FileImportSerializer(serializers.Serializer):
    name = serializers.CharField()
    created = serializers.IntegerField()
    updated = serializers.IntegerField(help_text="changed lines: their facts' next revisions")
    unchanged = serializers.IntegerField()
    removed = serializers.IntegerField(help_text="lines gone from the file: their facts ended")
    keptUnplaced = serializers.IntegerField(help_text="facts written since the last import that the file leaves out: kept")


class _MarkdownView(TextOrJsonView):
    def scope(self, request, body: dict | None = None) -> markdown_memory.Folder:
        body = body or {}
        params = request.query_params
        return markdown_memory.folder(
            principal=self.principal,
            participant_id=body.get("participantId") or params.get("participantId") or None,
            project_id=body["projectId"] if body.get("projectId") is not None else params.get("projectId") or None,
        )


class MarkdownFolderView(_MarkdownView):
    @extend_schema(
        operation_id="markdown_export", parameters=PARAMETERS,
        responses=inline_serializer("MarkdownFolder", {"files": MarkdownFileSerializer(many=True)}),
        description="The whole folder: MEMORY.md first, then the topic files by name.",
    )
    def get(self, request):
        files = markdown_memory.markdown_export(scope=self.scope(request))
        return Response({"files": [{"name": name, "text": text} for name, text in files.items()]})


class MarkdownImportView(_MarkdownView):
    @extend_schema(
        operation_id="markdown_import", parameters=PARAMETERS,
        request=inline_serializer("MarkdownImportIn", {
            "files": MarkdownFileSerializer(many=True),
            "participantId": serializers.CharField(required=False),
            "projectId": serializers.UUIDField(required=False),
        }),
        responses=inline_serializer("MarkdownImported", {
            "created": serializers.IntegerField(), "updated": serializers.IntegerField(), "unchanged": serializers.IntegerField(),
            "removed": serializers.IntegerField(), "keptUnplaced": serializers.IntegerField(), "files": FileImportSerializer(many=True),
        }),
        description="Reads files back into facts, all or nothing: equal lines write nothing (importing twice changes "
                    "nothing), a changed line is its fact's next revision, a new line a new fact, a dropped line ends "
                    "its fact. Files not sent are left alone. A file an import would refuse is a 400 naming file and line.",
    )
    def post(self, request):
        body = json_object_body(request)
        unknown = sorted(set(body) - {"files", "participantId", "projectId"})
        if unknown:
            raise ValidationFailed(f"{unknown[0]} is not a field here", errors={name: ["not a field here"] for name in unknown})
        files = body.get("files")
        if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in files):
            raise ValidationFailed("files is a list of {name, text}", errors={"files": ["a list of {name, text}"]})
        named = {}
        for item in files:
            if item["name"] in named:
                raise ValidationFailed(f"files: {item['name']} is given twice", errors={"files": [f"{item['name']} twice"]})
            named[item["name"]] = item.get("text")
        scope = self.scope(request, body)
        return Response(markdown_memory.markdown_import(scope=scope, files=named))


class MarkdownFileView(_MarkdownView):
    @extend_schema(
        operation_id="markdown_file", parameters=PARAMETERS,
        responses={(200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR, description="the file; MEMORY.md is the index")},
        description="One file of the folder as text/markdown: MEMORY.md (always there) or a topic file (404 if none).",
    )
    def get(self, request, name: str):
        text = markdown_memory.markdown_file(scope=self.scope(request), name=name)
        return HttpResponse(text, content_type=MARKDOWN)
