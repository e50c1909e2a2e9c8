"""The admin API: a project's members, API keys and retention, for teams that automate them.

    GET    /v1/members                  the memberships that give someone a role here (any member)
    POST   /v1/members                  {user, role} → give a person a role (admins)
    DELETE /v1/members/{username}       remove their role in this project (admins)
    GET    /v1/keys                     the project's keys, revoked ones too, never a secret (admins)
    POST   /v1/keys                     {user?, access, participantId?, name?} → 201 with `apiKey`, shown once (admins)
    DELETE /v1/keys/{id}                revoke it (admins)
    GET    /v1/retention                the days each kind of row is kept (any member)
    PUT    /v1/retention                {deletedFactsDays, expiredFactsDays, unregisteredConversationsDays} (admins)

Thin doors onto the services the dashboard's settings pages call (membership_set,
apikey_create, apikey_revoke, retention_policy_set), with the same rights: every one
checks core.policy. A tenant-wide key names the project with `?projectId=`.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts import services
from accounts.models import Access, Role
from core.api import ApiView, iso_time, json_object_body
from accounts.retention import MAX_DAYS, retention_policy_read, retention_policy_set

PROJECT_PARAM = OpenApiParameter("projectId", str, required=False, description="for a tenant-wide key: the project")
RETENTION_FIELDS = {
    "deletedFactsDays": "deleted_facts_days",
    "expiredFactsDays": "expired_facts_days",
    "unregisteredConversationsDays": "unregistered_conversations_days",
}


class MemberSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    userId = serializers.CharField()
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.values)
    projectId = serializers.UUIDField(allow_null=True, help_text="null: a tenant-wide role, which counts in every project")
    createdAt = serializers.DateTimeField()


class MemberPageSerializer(serializers.Serializer):
    data = MemberSerializer(many=True)


class MemberInSerializer(serializers.Serializer):
    user = serializers.CharField(max_length=150, help_text="the username")
    role = serializers.ChoiceField(choices=Role.values)


class KeySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    prefix = serializers.CharField(help_text="the key starts mh_<prefix>_")
    name = serializers.CharField(allow_blank=True)
    userId = serializers.CharField()
    username = serializers.CharField()
    access = serializers.ChoiceField(choices=Access.values)
    participantId = serializers.CharField(allow_null=True)
    projectId = serializers.UUIDField()
    createdAt = serializers.DateTimeField()
    lastUsedAt = serializers.DateTimeField(allow_null=True)
    revokedAt = serializers.DateTimeField(allow_null=True)


class KeyPageSerializer(serializers.Serializer):
    data = KeySerializer(many=True)


class KeyCreatedSerializer(KeySerializer):
    apiKey = serializers.CharField(help_text="the key itself: shown in this answer only")


class KeyInSerializer(serializers.Serializer):
    user = serializers.CharField(max_length=150, required=False, help_text="the username (default: the caller's)")
    access = serializers.ChoiceField(choices=Access.values)
    participantId = serializers.CharField(max_length=services.MAX_PARTICIPANT_ID, required=False, allow_null=True)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class RetentionSerializer(serializers.Serializer):
    deletedFactsDays = serializers.IntegerField(allow_null=True, min_value=0, max_value=MAX_DAYS, help_text="null: keep forever")
    expiredFactsDays = serializers.IntegerField(allow_null=True, min_value=0, max_value=MAX_DAYS)
    unregisteredConversationsDays = serializers.IntegerField(allow_null=True, min_value=0, max_value=MAX_DAYS)


def member_to_dict(membership) -> dict:
    return {
        "id": membership.id, "userId": str(membership.user_id), "username": membership.user.username, "role": membership.role,
        "projectId": str(membership.project_id) if membership.project_id else None, "createdAt": iso_time(membership.created_at),
    }


def key_to_dict(key) -> dict:
    return {
        "id": str(key.id), "prefix": key.prefix, "name": key.name, "userId": str(key.user_id), "username": key.user.username,
        "access": key.access, "participantId": key.participant_id, "projectId": str(key.project_id),
        "createdAt": iso_time(key.created_at), "lastUsedAt": iso_time(key.last_used_at), "revokedAt": iso_time(key.revoked_at),
    }


def retention_to_dict(values: dict) -> dict:
    return {wire: values[name] for wire, name in RETENTION_FIELDS.items()}


class AdminView(ApiView):
    def acting(self):
        return services.in_project(self.principal, self.request.query_params.get("projectId"))


class MembersView(AdminView):
    @extend_schema(operation_id="members_list", parameters=[PROJECT_PARAM], responses=MemberPageSerializer)
    def get(self, request):
        """Who has a role in this project: its own members and the tenant's."""
        return Response({"data": [member_to_dict(m) for m in services.members_read(principal=self.acting())]})

    @extend_schema(operation_id="members_set", parameters=[PROJECT_PARAM], request=MemberInSerializer, responses={200: MemberSerializer})
    def post(self, request):
        """Give a person (an existing account) a role in this project; their highest role counts."""
        data = MemberInSerializer(data=json_object_body(request))
        data.is_valid(raise_exception=True)
        membership = services.membership_set(principal=self.acting(), username=data.validated_data["user"], role=data.validated_data["role"])
        return Response(member_to_dict(membership))


class MemberView(AdminView):
    @extend_schema(operation_id="members_remove", parameters=[PROJECT_PARAM], responses={204: None})
    def delete(self, request, username):
        """Remove the person's role in this project (never your own)."""
        services.member_remove(principal=self.acting(), username=username)
        return Response(status=204)


class KeysView(AdminView):
    @extend_schema(operation_id="keys_list", parameters=[PROJECT_PARAM], responses=KeyPageSerializer)
    def get(self, request):
        """The project's API keys, newest first, revoked ones too; a key's secret is never shown again."""
        return Response({"data": [key_to_dict(k) for k in services.apikeys_read(principal=self.acting())]})

    @extend_schema(operation_id="keys_create", parameters=[PROJECT_PARAM], request=KeyInSerializer, responses={201: KeyCreatedSerializer})
    def post(self, request):
        """Make a key for a member (default: you) with read or write access, optionally bound to one participant."""
        data = KeyInSerializer(data=json_object_body(request))
        data.is_valid(raise_exception=True)
        values = data.validated_data
        key, raw = services.apikey_issue(
            principal=self.acting(), username=values.get("user"), access=values["access"],
            participant_id=values.get("participantId") or None, name=values.get("name") or "",
        )
        response = Response(key_to_dict(key) | {"apiKey": raw}, status=201)
        response["Cache-Control"] = "no-store"  # the key text must not linger in a cache
        return response


class KeyView(AdminView):
    @extend_schema(operation_id="keys_revoke", parameters=[PROJECT_PARAM], responses={204: None})
    def delete(self, request, key_id):
        """Revoke the key: the next request made with it, in any process, is refused."""
        services.apikey_withdraw(principal=self.acting(), key_id=key_id)
        return Response(status=204)


class RetentionView(AdminView):
    @extend_schema(operation_id="retention_get", parameters=[PROJECT_PARAM], responses=RetentionSerializer)
    def get(self, request):
        """How many days this project keeps deleted and expired facts and unregistered conversations (null: forever)."""
        return Response(retention_to_dict(retention_policy_read(principal=self.acting())))

    @extend_schema(operation_id="retention_set", parameters=[PROJECT_PARAM], request=RetentionSerializer, responses=RetentionSerializer)
    def put(self, request):
        """Set the project's retention; the next purge applies it. Every field is required (null keeps forever)."""
        data = RetentionSerializer(data=json_object_body(request))
        data.is_valid(raise_exception=True)
        principal = self.acting()
        retention_policy_set(principal=principal, project_id=principal.project_id,
                             **{name: data.validated_data[wire] for wire, name in RETENTION_FIELDS.items()})
        return Response(retention_to_dict(retention_policy_read(principal=principal)))
