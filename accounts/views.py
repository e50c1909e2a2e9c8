"""`GET /v1/me`: what the presented key is."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from accounts.models import Project, Tenant
from core.api import ApiView


class MeView(ApiView):
    """What the presented key is: its tenant, project, access, role and participant."""

    needs_role = False  # a key with no role may still ask what it is (`role: null`)

    @extend_schema(
        operation_id="me",
        responses=inline_serializer(
            "Me",
            {
                "apiKeyId": serializers.UUIDField(),
                "tenantId": serializers.UUIDField(),
                "tenant": serializers.CharField(),
                "projectId": serializers.UUIDField(allow_null=True),
                "project": serializers.CharField(allow_null=True),
                "userId": serializers.CharField(),
                "access": serializers.ChoiceField(choices=["read", "write"]),
                "role": serializers.CharField(allow_null=True),
                "participantId": serializers.CharField(allow_null=True),
            },
        ),
    )
    def get(self, request):
        p = self.principal
        tenant = Tenant.objects.get(id=p.tenant_id)
        project = Project.objects.filter(id=p.project_id).first() if p.project_id else None
        return Response(
            {
                "apiKeyId": str(p.api_key_id),
                "tenantId": str(p.tenant_id),
                "tenant": tenant.slug,
                "projectId": str(p.project_id) if p.project_id else None,
                "project": project.slug if project else None,
                "userId": str(p.user_id),
                "access": p.access,
                "role": p.role,
                "participantId": p.participant_id,
            }
        )
