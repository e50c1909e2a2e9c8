"""Fact input validation (shape only; rules live in facts.services) and the output shape of API.md."""

from __future__ import annotations

from datetime import datetime

from rest_framework import serializers

from core.api import iso_time
from facts.models import TRUST_ASCENDING, Fact, FactRevision, InvalidationReason, Status
from facts.schema import NameField
from facts.selectors import effective_status
from facts.services import UNSET, FactInput

SERVER_SET = {
    "id": "id is given by the server",
    "trust": "trust is set by the server from the credential (verify a fact to make it verified)",
    "version": "version is set by the server; send expectVersion to supersede",
    "attributedTo": "attributedTo is set by the server from the credential",
    "generatedBy": "generatedBy is set by the server for facts an agent remembers",
    "tenantId": "tenantId is set by the server from the credential",
    "status": "status is set by the server",
    "contentHash": "contentHash is computed by the server",
    "size": "size is computed by the server",
    "createdAt": "createdAt is set by the server",
    "updatedAt": "updatedAt is set by the server",
    "embeddingModel": "embeddingModel is set by the server",
    "verifiedBy": "verifiedBy is set by the server when a reviewer verifies the fact",
    "verifiedAt": "verifiedAt is set by the server when a reviewer verifies the fact",
}


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not declare, naming fields the server sets."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            errors = {}
            for name, value in data.items():
                field = self.fields.get(name)
                if field is None:
                    errors[name] = [SERVER_SET.get(name, f"{name} is not a field here")]
                elif isinstance(field, serializers.CharField) and value is not None and not isinstance(value, str):
                    # DRF's CharField turns 7 into "7"; the schema says string, so a number is refused.
                    errors[name] = [f"{name} must be a string"]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class ScopeInSerializer(StrictSerializer):
    projectId = serializers.UUIDField(required=False, allow_null=True)
    participantId = serializers.CharField(required=False, allow_null=True, max_length=200, trim_whitespace=False)
    conversationId = serializers.UUIDField(required=False, allow_null=True)


class SubjectSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=["participant", "user", "external"])
    id = serializers.CharField(max_length=200)


class FactInSerializer(StrictSerializer):
    type = NameField(max_length=200, trim_whitespace=False)
    content = serializers.JSONField()
    key = NameField(required=False, allow_null=True, max_length=200, trim_whitespace=False)
    namespace = NameField(required=False, allow_null=True, max_length=200, trim_whitespace=False)
    scope = ScopeInSerializer(required=False)
    # The list may be null (the default subjects), its items may not: `many=True` would pass
    # allow_null to each item too, and `[null]` then reached the service as a subject.
    subjects = serializers.ListField(child=SubjectSerializer(), required=False, allow_null=True)
    references = serializers.ListField(child=serializers.UUIDField(), required=False, max_length=100)
    expiresAt = serializers.DateTimeField(required=False, allow_null=True)
    validFrom = serializers.DateTimeField(required=False, allow_null=True)
    validUntil = serializers.DateTimeField(required=False, allow_null=True)

    def to_fact_input(self) -> FactInput:
        return fact_input(self.validated_data)


def fact_input(data: dict) -> FactInput:
    scope = data.get("scope") or {}
    return FactInput(
        type=data["type"], content=data["content"], key=data.get("key"), namespace=data.get("namespace"),
        project_id=scope.get("projectId", UNSET), participant_id=scope.get("participantId"),
        conversation_id=scope.get("conversationId"),
        subjects=[dict(s) for s in data["subjects"]] if data.get("subjects") is not None else None,
        references=[str(ref) for ref in data.get("references") or []],
        expires_at=data.get("expiresAt"), valid_from=data.get("validFrom"), valid_until=data.get("validUntil"),
    )


class FactBatchInSerializer(StrictSerializer):
    facts = FactInSerializer(many=True, max_length=1000, allow_empty=False)


class SupersedeInSerializer(StrictSerializer):
    content = serializers.JSONField()
    expectVersion = serializers.IntegerField(required=False, min_value=1)


def fact_to_dict(fact: Fact | FactRevision, *, created_at: datetime | None = None) -> dict:
    """The fact as API.md gives it (a revision too, with its own version and state)."""
    return {
        "id": str(fact.fact_id if isinstance(fact, FactRevision) else fact.id),
        "type": fact.type,
        "key": fact.key,
        "namespace": fact.namespace,
        "scope": {
            "tenantId": str(fact.tenant_id),
            "projectId": str(fact.project_id) if fact.project_id else None,
            "participantId": fact.participant_id,
            "conversationId": str(fact.conversation_id) if fact.conversation_id else None,
        },
        "version": fact.version,
        "createdAt": iso_time(created_at or fact.created_at),
        "updatedAt": iso_time(fact.recorded_at if isinstance(fact, FactRevision) else fact.updated_at),
        "content": fact.content,
        "contentHash": fact.content_hash,
        "size": fact.size,
        "embeddingModel": fact.embedding_model,
        "trust": fact.trust,
        "verifiedBy": fact.verified_by,
        "verifiedAt": iso_time(fact.verified_at),
        "attributedTo": fact.attributed_to,
        "generatedBy": fact.generated_by,
        "subjects": fact.subjects,
        "references": fact.references,
        "validFrom": iso_time(fact.valid_from),
        "validUntil": iso_time(fact.valid_until),
        "expiresAt": iso_time(fact.expires_at),
        "status": effective_status(fact),
    }


def revision_to_dict(revision: FactRevision, fact: Fact) -> dict:
    body = fact_to_dict(revision, created_at=fact.created_at)
    body["supersededAt"] = iso_time(revision.superseded_at)
    body["invalidationReason"] = revision.invalidation_reason
    body["invalidatedBy"] = revision.invalidated_by
    return body


# --- output shapes, for the OpenAPI schema ---------------------------------------------------


class ScopeOutSerializer(serializers.Serializer):
    tenantId = serializers.UUIDField()
    projectId = serializers.UUIDField(allow_null=True)
    participantId = serializers.CharField(allow_null=True)
    conversationId = serializers.UUIDField(allow_null=True)


class AttributionSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=["user", "service", "agent"])
    agentVersion = serializers.CharField(required=False)


class GeneratedBySerializer(serializers.Serializer):
    runId = serializers.CharField(allow_null=True)
    stepId = serializers.CharField(allow_null=True)
    toolCallId = serializers.CharField(allow_null=True)


class FactOutSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    type = serializers.CharField()
    key = serializers.CharField(allow_null=True)
    namespace = serializers.CharField(allow_null=True)
    scope = ScopeOutSerializer()
    version = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    content = serializers.JSONField()
    contentHash = serializers.CharField()
    size = serializers.IntegerField()
    embeddingModel = serializers.CharField(allow_null=True)
    trust = serializers.ChoiceField(choices=TRUST_ASCENDING)
    verifiedBy = serializers.CharField(allow_null=True)
    verifiedAt = serializers.DateTimeField(allow_null=True)
    attributedTo = AttributionSerializer()
    generatedBy = GeneratedBySerializer(allow_null=True)
    subjects = SubjectSerializer(many=True)
    references = serializers.ListField(child=serializers.UUIDField())
    validFrom = serializers.DateTimeField(allow_null=True)
    validUntil = serializers.DateTimeField(allow_null=True)
    expiresAt = serializers.DateTimeField(allow_null=True)
    status = serializers.ChoiceField(choices=Status.values)


class RevisionOutSerializer(FactOutSerializer):
    supersededAt = serializers.DateTimeField(allow_null=True)
    invalidationReason = serializers.ChoiceField(choices=InvalidationReason.values, allow_null=True)
    invalidatedBy = AttributionSerializer(allow_null=True)


class FactOrRevisionOutSerializer(FactOutSerializer):
    """GET /v1/facts/{id}: the fact; with ?revision= or ?asOf= one of its revisions, which adds these."""

    supersededAt = serializers.DateTimeField(allow_null=True, required=False)
    invalidationReason = serializers.ChoiceField(choices=InvalidationReason.values, allow_null=True, required=False)
    invalidatedBy = AttributionSerializer(allow_null=True, required=False)


class FactPageSerializer(serializers.Serializer):
    data = FactOutSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)


class RevisionListSerializer(serializers.Serializer):
    data = RevisionOutSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)


class FactBatchOutSerializer(serializers.Serializer):
    facts = FactOutSerializer(many=True)
