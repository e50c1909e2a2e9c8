"""Approval input validation (the decision's note) and the output shape of API.md."""

from __future__ import annotations

from rest_framework import serializers

from approvals.models import Approval, ApprovalKind, ApprovalStatus
from approvals.services import MAX_NOTE
from core.api import iso_time
from facts.serializers import AttributionSerializer, FactOutSerializer, StrictSerializer, fact_to_dict


class ApprovalDecisionInSerializer(StrictSerializer):
    note = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=MAX_NOTE, trim_whitespace=False)


def approval_to_dict(approval: Approval) -> dict:
    """The approval as API.md gives it, with its fact in its current state."""
    return {
        "id": str(approval.id),
        "kind": approval.kind,
        "fact": fact_to_dict(approval.fact),
        "reasons": approval.reasons,
        "status": approval.status,
        "requestedBy": approval.requested_by,
        "origin": approval.origin,
        "decidedBy": approval.decided_by,
        "decidedAt": iso_time(approval.decided_at),
        "note": approval.note,
        "createdAt": iso_time(approval.created_at),
    }


# --- output shapes, for the OpenAPI schema ---------------------------------------------------


class ApprovalReasonSerializer(serializers.Serializer):
    rule = serializers.CharField(help_text="wide-scope, imperative, role-marker, link, account, tool-name, hidden-characters, obfuscated, markup, encoded, intent")
    match = serializers.CharField(help_text="what the rule matched (normalised), or the scope")
    start = serializers.IntegerField(required=False, help_text="offset of the match in the text the agent remembered")
    end = serializers.IntegerField(required=False)


class ApprovalOriginSerializer(serializers.Serializer):
    conversationId = serializers.UUIDField(allow_null=True)
    runId = serializers.CharField(allow_null=True)
    stepId = serializers.CharField(allow_null=True)
    toolCallId = serializers.CharField(allow_null=True)


class ApprovalOutSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=ApprovalKind.values)
    fact = FactOutSerializer()
    reasons = ApprovalReasonSerializer(many=True)
    status = serializers.ChoiceField(choices=ApprovalStatus.values)
    requestedBy = AttributionSerializer()
    origin = ApprovalOriginSerializer(allow_null=True, help_text="where it was asked: the remember call's conversation and run (null outside an agent's turn)")
    decidedBy = AttributionSerializer(allow_null=True)
    decidedAt = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()


class ApprovalPageSerializer(serializers.Serializer):
    data = ApprovalOutSerializer(many=True)
    nextCursor = serializers.CharField(allow_null=True)
