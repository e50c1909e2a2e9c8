"""Keyed profile API (/v1/profiles/{participantId}/...): thin doors onto profiles.services.

Each call answers with the seed primitive's text (`Saved: name = Sam`, `name: Sam` lines,
`name, editor`, "No results found.") as `text/plain`, or with JSON that carries the same
text beside the data when the request asks for `application/json`.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field, inline_serializer
from rest_framework import renderers, serializers, status as http
from rest_framework.response import Response

from core.api import ApiView, PlainTextRenderer, json_object_body
from core.errors import ValidationFailed
from facts.serializers import StrictSerializer
from profiles import services as profiles

TEXT = "text/plain; charset=utf-8"
PROJECT = OpenApiParameter("projectId", str, required=False, description="for tenant-wide keys: the profile's project")
JSON_OR_TEXT = "`text/plain` (the seed's reply) unless the request accepts `application/json`."


def wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def reply(request, payload: dict, text: str, status: int = http.HTTP_200_OK):
    if wants_json(request):
        return Response(payload | {"text": text}, status=status)
    return HttpResponse(text, content_type=TEXT, status=status)


class MarkdownRenderer(PlainTextRenderer):
    media_type = "text/markdown"
    format = "md"


class TextOrJsonView(ApiView):
    """Answers text or JSON; errors are problem+json whatever the request accepts."""

    renderer_classes = [renderers.JSONRenderer, PlainTextRenderer, MarkdownRenderer]

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        self.request.accepted_renderer = renderers.JSONRenderer()
        self.request.accepted_media_type = "application/json"
        return response


class _ProfileView(TextOrJsonView):
    def scope(self, request, participant_id: str, project_id=None) -> profiles.Profile:
        return profiles.profile(
            principal=self.principal, participant_id=participant_id,
            # A body's projectId (even "") is what it says; the query's empty one is "not given".
            project_id=project_id if project_id is not None else request.query_params.get("projectId") or None,
        )


def _text_response(description: str, json_shape) -> dict:
    return {
        (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description=description),
        (200, "application/json"): json_shape,
    }


class ProfileView(_ProfileView):
    @extend_schema(
        operation_id="profiles_load_memory", parameters=[PROJECT],
        responses=_text_response(
            '`load_memory`: "key: value" lines in the order keys were first saved; "No results found." when empty.',
            inline_serializer("ProfileMemory", {"memory": serializers.DictField(help_text="the memory.json object"), "text": serializers.CharField()}),
        ),
        description="`load_memory`. " + JSON_OR_TEXT + " The JSON `memory` is the profile as a memory.json object.",
    )
    def get(self, request, participant_id: str):
        memory = profiles.profile_memory(scope=self.scope(request, participant_id))
        return reply(request, {"memory": memory}, profiles.format_memory(memory))


class ProfileKeysView(_ProfileView):
    @extend_schema(
        operation_id="profiles_load_keys", parameters=[PROJECT],
        responses=_text_response("`load_keys`: the keys, comma-separated (empty when none).",
                                 inline_serializer("ProfileKeys", {"keys": serializers.ListField(child=serializers.CharField()), "text": serializers.CharField()})),
        description="`load_keys`. " + JSON_OR_TEXT,
    )
    def get(self, request, participant_id: str):
        keys = profiles.profile_keys(scope=self.scope(request, participant_id))
        return reply(request, {"keys": keys}, ", ".join(keys))


class ProfileFactsView(_ProfileView):
    @extend_schema(
        operation_id="profiles_get_facts_for_keys",
        parameters=[OpenApiParameter("keys", str, required=False, description="comma-separated keys, e.g. editor,name"), PROJECT],
        responses=_text_response('`get_facts_for_keys`: "key: value" lines in the order asked, or exactly "No results found."',
                                 inline_serializer("ProfileFacts", {"facts": serializers.DictField(), "text": serializers.CharField()})),
        description="`get_facts_for_keys`. " + JSON_OR_TEXT + " Keys that do not exist are left out.",
    )
    def get(self, request, participant_id: str):
        scope = self.scope(request, participant_id)
        found = profiles.profile_facts_for_keys(scope=scope, keys=profiles.parse_keys(request.query_params.get("keys", "")))
        return reply(request, {"facts": found}, profiles.format_facts(found))


# Request shapes for the schema (the views check bodies themselves, with these rules).
@extend_schema_field({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})
class KeysField(serializers.JSONField):
    """Keys to choose from: "a, b" or ["a", "b"]."""



class ProfileSaveInSerializer(StrictSerializer):
    value = serializers.JSONField(help_text="a string (any JSON value but null is kept as it is)")


class ProfileImportInSerializer(StrictSerializer):
    memory = serializers.DictField(child=serializers.JSONField(), help_text="a memory.json object: key -> value")
    replace = serializers.BooleanField(required=False, default=False, help_text="also end the keys the file lacks")
    projectId = serializers.UUIDField(required=False, allow_null=True)


class ProfileFactView(_ProfileView):
    @extend_schema(
        operation_id="profiles_save_fact", parameters=[PROJECT],
        request=ProfileSaveInSerializer,
        responses={
            (201, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description='"Saved: key = value" (a new key)'),
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description='"Saved: key = value" (its next revision, or unchanged)'),
            (200, "application/json"): inline_serializer("ProfileSaved", {
                "key": serializers.CharField(), "value": serializers.JSONField(),
                "outcome": serializers.ChoiceField(["created", "updated", "unchanged"]),
                "factId": serializers.UUIDField(), "version": serializers.IntegerField(), "text": serializers.CharField(),
            }),
        },
        description="`save_fact`: the key now holds the value; a new key is 201, a changed value its fact's next "
                    "revision, the same value writes nothing (200 either way). " + JSON_OR_TEXT,
    )
    def put(self, request, participant_id: str, key: str):
        body = json_object_body(request)
        unknown = sorted(set(body) - {"value"})
        if unknown:
            raise ValidationFailed(f"{unknown[0]} is not a field here (send {{\"value\": ...}})", errors={name: ["not a field here"] for name in unknown})
        fact, outcome = profiles.profile_save(scope=self.scope(request, participant_id), key=key, value=body.get("value"))
        payload = {"key": fact.key, "value": fact.content, "outcome": outcome, "factId": str(fact.id), "version": fact.version}
        status = http.HTTP_201_CREATED if outcome == "created" else http.HTTP_200_OK
        return reply(request, payload, profiles.format_saved(fact.key, fact.content), status)


class RelevantKeysView(_ProfileView):
    @extend_schema(
        operation_id="profiles_select_relevant_keys", parameters=[PROJECT],
        request=inline_serializer("RelevantKeysIn", {
            "question": serializers.CharField(),
            "keys": KeysField(required=False, allow_null=True, help_text='the keys to choose from ("a, b" or a list); default: all'),
        }),
        responses=_text_response("`select_relevant_keys`: the relevant keys, comma-separated; empty when none is relevant.",
                                 inline_serializer("RelevantKeys", {
                                     "keys": serializers.ListField(child=serializers.CharField()),
                                     "method": serializers.ChoiceField(["embeddings+keywords", "keywords", "llm"]),
                                     "scores": serializers.DictField(child=serializers.FloatField(), help_text="similarity per key (embeddings only)"),
                                     "warnings": serializers.ListField(child=serializers.DictField()),
                                     "text": serializers.CharField(),
                                 })),
        description="`select_relevant_keys`: keys close in meaning to the question (embeddings of \"key: value\") or "
                    "sharing a stemmed word with it; none rather than a guess. An optional chat model refines it. " + JSON_OR_TEXT,
    )
    def post(self, request, participant_id: str):
        body = json_object_body(request)
        scope = self.scope(request, participant_id, body.get("projectId"))
        found = profiles.profile_relevant_keys(scope=scope, question=body.get("question"), keys=body.get("keys"))
        payload = {"keys": found.keys, "method": found.method, "scores": found.scores, "warnings": found.warnings}
        return reply(request, payload, ", ".join(found.keys))


class ProfileImportView(_ProfileView):
    @extend_schema(
        operation_id="profiles_import", parameters=[PROJECT],
        request=ProfileImportInSerializer,
        responses=inline_serializer("ProfileImported", {
            name: serializers.ListField(child=serializers.CharField()) for name in ("created", "updated", "unchanged", "removed")
        }),
        description="Imports a memory.json object, all or nothing, in its order: new keys are created, changed values "
                    "become next revisions, equal ones write nothing (importing twice changes nothing).",
    )
    def post(self, request, participant_id: str):
        body = json_object_body(request)
        unknown = sorted(set(body) - {"memory", "replace", "projectId"})
        if unknown:
            raise ValidationFailed(f"{unknown[0]} is not a field here", errors={name: ["not a field here"] for name in unknown})
        replace = body.get("replace", False)
        if not isinstance(replace, bool):
            raise ValidationFailed("replace must be true or false", errors={"replace": ["a boolean"]})
        scope = self.scope(request, participant_id, body.get("projectId"))
        return Response(profiles.profile_import(scope=scope, memory=body.get("memory"), replace=replace))
