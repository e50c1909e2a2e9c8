"""Approvals API: thin doors onto approvals.services and approvals.selectors."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from approvals import selectors, services
from approvals.models import ApprovalStatus
from approvals.serializers import (
    ApprovalDecisionInSerializer,
    ApprovalOutSerializer,
    ApprovalPageSerializer,
    approval_to_dict,
)
from core.api import ApiView
from core.pagination import paginate
from core.schema import limit_type


def _note(request) -> str | None:
    # No body is no note; a JSON `null` body is not an object, and is refused like any other.
    serializer = ApprovalDecisionInSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data.get("note")


class ApprovalListView(ApiView):
    @extend_schema(
        operation_id="approvals_list",
        parameters=[
            OpenApiParameter("status", str, required=False, enum=ApprovalStatus.values, description="default pending"),
            OpenApiParameter("cursor", str, required=False),
            OpenApiParameter("limit", limit_type(500), required=False, description="1 to 500, default 50"),
        ],
        responses=ApprovalPageSerializer,
    )
    def get(self, request):
        status = request.query_params.get("status") or ApprovalStatus.PENDING
        queryset = selectors.approvals_list(principal=self.principal, status=status)
        rows, next_cursor = paginate(queryset, params=request.query_params)
        return Response({"data": [approval_to_dict(a) for a in rows], "nextCursor": next_cursor})


class ApprovalDetailView(ApiView):
    @extend_schema(operation_id="approvals_get", responses=ApprovalOutSerializer)
    def get(self, request, approval_id):
        return Response(approval_to_dict(selectors.approval_get(principal=self.principal, approval_id=approval_id)))


class ApprovalApproveView(ApiView):
    @extend_schema(operation_id="approvals_approve", request=ApprovalDecisionInSerializer, responses=ApprovalOutSerializer)
    def post(self, request, approval_id):
        approval = services.approval_grant(principal=self.principal, approval_id=approval_id, note=_note(request))
        return Response(approval_to_dict(approval))


class ApprovalRejectView(ApiView):
    @extend_schema(operation_id="approvals_reject", request=ApprovalDecisionInSerializer, responses=ApprovalOutSerializer)
    def post(self, request, approval_id):
        approval = services.approval_reject(principal=self.principal, approval_id=approval_id, note=_note(request))
        return Response(approval_to_dict(approval))
