"""Participants' data API: export and erasure by person, thin doors onto privacy.erasure.

`GET /v1/participants/{id}/export` returns everything kept for one end user as one JSON
document; `DELETE /v1/participants/{id}` erases it all now and returns the counts.
Admins only. Another project's or tenant's data is simply not there: the answer is the
same as for a participant with nothing kept (empty lists, zero counts).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from agent.conversation_views import (
    ConversationOutSerializer,
    MessageOutSerializer,
    conversation_to_dict,
    message_to_dict,
)
from approvals.serializers import ApprovalOutSerializer, approval_to_dict
from core.api import ApiView, iso_time
from facts.serializers import FactOutSerializer, RevisionOutSerializer, fact_to_dict, revision_to_dict
from privacy import erasure


class ExportedFactSerializer(FactOutSerializer):
    revisions = RevisionOutSerializer(many=True, help_text="every revision, oldest first")


class ExportedConversationSerializer(ConversationOutSerializer):
    messages = MessageOutSerializer(many=True, help_text="every message, in order")


class ExportedWorkspaceSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    tasks = serializers.ListField(child=serializers.DictField(), help_text="the task list, as PUT …/tasks keeps it")
    updatedAt = serializers.DateTimeField()


class ExportedToolCallSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    args = serializers.JSONField()
    result = serializers.CharField()
    createdAt = serializers.DateTimeField()


class ParticipantExportSerializer(serializers.Serializer):
    exportedAt = serializers.DateTimeField()
    facts = ExportedFactSerializer(many=True)
    conversations = ExportedConversationSerializer(many=True)
    approvals = ApprovalOutSerializer(many=True)
    workspaces = ExportedWorkspaceSerializer(many=True, help_text="working-memory task lists a key bound to them kept")
    toolCalls = ExportedToolCallSerializer(many=True, help_text="tool calls a key bound to them reported")


class ErasureCountsSerializer(serializers.Serializer):
    facts = serializers.IntegerField()
    revisions = serializers.IntegerField()
    approvals = serializers.IntegerField()
    rememberCalls = serializers.IntegerField()
    conversations = serializers.IntegerField()
    messages = serializers.IntegerField()
    workspaces = serializers.IntegerField(help_text="working-memory task lists")
    toolCalls = serializers.IntegerField(help_text="reported tool calls")
    embeddings = serializers.IntegerField(help_text="facts and messages that had an embedding")
    idempotencyResponses = serializers.IntegerField(help_text="stored responses to idempotent requests that held their data")
    cachedQueryEmbeddings = serializers.IntegerField(help_text="cached query embeddings of their texts")


class ErasureSerializer(serializers.Serializer):
    erasedAt = serializers.DateTimeField()
    erased = ErasureCountsSerializer()


def export_to_dict(data: erasure.ParticipantData) -> dict:
    return {
        "exportedAt": iso_time(data.exported_at),
        "facts": [
            fact_to_dict(fact) | {"revisions": [revision_to_dict(r, fact) for r in data.revisions[fact.id]]}
            for fact in data.facts
        ],
        "conversations": [
            conversation_to_dict(c) | {"messages": [message_to_dict(m) for m in data.messages[c.id]]}
            for c in data.conversations
        ],
        "approvals": [approval_to_dict(approval) for approval in data.approvals],
        "workspaces": [
            {"namespace": w.namespace, "tasks": w.tasks, "updatedAt": iso_time(w.updated_at)} for w in data.workspaces
        ],
        "toolCalls": [
            {"namespace": c.namespace, "name": c.name, "args": c.args, "result": c.result, "createdAt": iso_time(c.created_at)}
            for c in data.tool_calls
        ],
    }


class ParticipantView(ApiView):
    @extend_schema(operation_id="participants_erase", responses={200: ErasureSerializer})
    def delete(self, request, participant_id):
        """Erase everything kept for this participant now: facts, revisions, embeddings, messages,
        conversations, approvals, stored idempotent responses and cached query embeddings."""
        result = erasure.participant_erase(principal=self.principal, participant_id=participant_id)
        return Response({"erasedAt": iso_time(result.erased_at), "erased": result.counts})


class ParticipantExportView(ApiView):
    @extend_schema(operation_id="participants_export", responses=ParticipantExportSerializer)
    def get(self, request, participant_id):
        """Everything kept for this participant, revisions and messages included, as one document."""
        data = erasure.participant_data(principal=self.principal, participant_id=participant_id)
        return Response(export_to_dict(data))
