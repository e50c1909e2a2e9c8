"""Conversations API: a thin door onto agent.conversations."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status as http
from rest_framework.response import Response

from agent import conversations
from agent.models import MessageRole
from core.api import ApiView, iso_time, validated
from core.errors import ValidationFailed
from core.pagination import parse_limit
from core.schema import limit_type
from facts.serializers import StrictSerializer


class ConversationInSerializer(StrictSerializer):
    agent = serializers.CharField(max_length=200, help_text="the agent's slug, e.g. acme.desk")
    participantId = serializers.CharField(required=False, allow_null=True, max_length=200)
    segment = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=500, help_text="a path such as acme/customers/c-42")
    replay = serializers.BooleanField(required=False, default=False, help_text="a comparison's replay: never recalled")
    projectId = serializers.UUIDField(required=False, allow_null=True, help_text="for tenant-wide keys")


class ConversationOutSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    agent = serializers.CharField()
    participantId = serializers.CharField(allow_null=True)
    segment = serializers.CharField(allow_null=True)
    replay = serializers.BooleanField()
    registered = serializers.BooleanField()
    projectId = serializers.UUIDField()
    createdAt = serializers.DateTimeField()
    unregisteredAt = serializers.DateTimeField(allow_null=True)


class MessagesInSerializer(StrictSerializer):
    # Items are validated by agent.conversations (one rule for every door).
    messages = serializers.ListField(child=serializers.JSONField(), help_text="[{role: user|agent|tool, text, externalId?, createdAt?}]")


class MessageOutSerializer(serializers.Serializer):
    conversationId = serializers.UUIDField()
    sequence = serializers.IntegerField()
    role = serializers.ChoiceField(choices=MessageRole.values)
    text = serializers.CharField()
    externalId = serializers.CharField(allow_null=True)
    userId = serializers.CharField()  # a string, as in /v1/me and attributedTo
    createdAt = serializers.DateTimeField()


def conversation_to_dict(conversation) -> dict:
    return {
        "id": str(conversation.id), "agent": conversation.agent_slug, "participantId": conversation.participant_id,
        "segment": conversation.segment, "replay": conversation.replay, "registered": conversation.unregistered_at is None,
        "projectId": str(conversation.project_id), "createdAt": iso_time(conversation.created_at),
        "unregisteredAt": iso_time(conversation.unregistered_at) if conversation.unregistered_at else None,
    }


def message_to_dict(message) -> dict:
    return {
        "conversationId": str(message.conversation_id), "sequence": message.sequence, "role": message.role,
        "text": message.text, "externalId": message.external_id, "userId": str(message.user_id), "createdAt": iso_time(message.created_at),
    }


class ConversationListView(ApiView):
    @extend_schema(operation_id="conversations_create", request=ConversationInSerializer, responses={201: ConversationOutSerializer})
    def post(self, request):
        data = validated(ConversationInSerializer, request.data)
        conversation = conversations.conversation_create(
            principal=self.principal,
            data=conversations.ConversationInput(
                agent=data["agent"], participant_id=data.get("participantId"), segment=data.get("segment"),
                replay=data["replay"], project_id=data.get("projectId"),
            ),
        )
        return Response(conversation_to_dict(conversation), status=http.HTTP_201_CREATED)


class ConversationDetailView(ApiView):
    @extend_schema(operation_id="conversations_get", responses=ConversationOutSerializer)
    def get(self, request, conversation_id):
        return Response(conversation_to_dict(conversations.conversation_get(principal=self.principal, conversation_id=conversation_id)))

    @extend_schema(operation_id="conversations_unregister", responses={204: None})
    def delete(self, request, conversation_id):
        conversations.conversation_unregister(principal=self.principal, conversation_id=conversation_id)
        return Response(status=http.HTTP_204_NO_CONTENT)


class MessageListView(ApiView):
    @extend_schema(
        operation_id="conversations_messages_list",
        parameters=[
            OpenApiParameter("limit", limit_type(1000), required=False, description="page size, default 500, at most 1000"),
            OpenApiParameter("after", int, required=False, description="the sequence after which the page starts (nextAfter of the previous page)"),
        ],
        responses=inline_serializer("MessagePage", {"data": MessageOutSerializer(many=True), "nextAfter": serializers.IntegerField(allow_null=True)}),
    )
    def get(self, request, conversation_id):
        limit = parse_limit(request.query_params.get("limit"), default=500, maximum=1000)
        after = request.query_params.get("after")
        _, queryset = conversations.messages_list(principal=self.principal, conversation_id=conversation_id)
        if after not in (None, ""):
            try:
                after = int(after)
            except ValueError:
                raise ValidationFailed("after must be a message sequence number", errors={"after": ["a whole number"]}) from None
            queryset = queryset.filter(sequence__gt=after)
        rows = list(queryset[: limit + 1])
        next_after = None
        if len(rows) > limit:
            rows = rows[:limit]
            next_after = rows[-1].sequence
        return Response({"data": [message_to_dict(m) for m in rows], "nextAfter": next_after})

    @extend_schema(
        operation_id="conversations_messages_append", request=MessagesInSerializer,
        responses={201: inline_serializer("MessagesAppended", {"messages": MessageOutSerializer(many=True)})},
    )
    def post(self, request, conversation_id):
        data = validated(MessagesInSerializer, request.data)
        created = conversations.messages_append(principal=self.principal, conversation_id=conversation_id, messages=data["messages"])
        return Response({"messages": [message_to_dict(m) for m in created]}, status=http.HTTP_201_CREATED)
