"""Facts API: thin doors onto facts.services and facts.selectors."""

from __future__ import annotations

import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.response import Response

from core.api import ApiView, validated
from core.errors import PreconditionRequired, ValidationFailed
from core.pagination import paginate
from core.schema import limit_type
from core.times import parse_time
from facts import selectors, services
from facts.filters import FactFilter
from facts.models import Status, Trust
from facts.serializers import (
    FactBatchInSerializer,
    FactBatchOutSerializer,
    FactInSerializer,
    FactOrRevisionOutSerializer,
    FactOutSerializer,
    FactPageSerializer,
    RevisionListSerializer,
    SupersedeInSerializer,
    fact_input,
    fact_to_dict,
    revision_to_dict,
)

LIST_PARAMS = [
    OpenApiParameter(name, str, required=False) for name in ["type", "participantId", "key", "namespace", "q", "cursor"]
] + [
    OpenApiParameter("conversationId", OpenApiTypes.UUID, required=False),
    OpenApiParameter("trust", str, required=False, enum=Trust.values),
    OpenApiParameter("status", str, required=False, enum=Status.values, description="default active"),
    OpenApiParameter("limit", limit_type(500), required=False, description="1 to 500, default 50"),
]


class FactListView(ApiView):
    @extend_schema(operation_id="facts_list", parameters=LIST_PARAMS, responses=FactPageSerializer)
    def get(self, request):
        params = request.query_params
        self.principal.require_participant(params.get("participantId") or None)
        if conversation := params.get("conversationId"):
            try:  # the filter would strip control characters and read "\x1c" as no filter at all
                uuid.UUID(conversation)
            except ValueError:
                raise ValidationFailed("conversationId must be a uuid", errors={"conversationId": ["a uuid"]}) from None
        filterset = FactFilter(params, queryset=selectors.facts_list(principal=self.principal, status=params.get("status") or "active"))
        if not filterset.is_valid():
            errors = {name: [str(m) for m in messages] for name, messages in filterset.errors.items()}
            name, messages = next(iter(errors.items()))
            raise ValidationFailed(f"{name}: {messages[0]}", errors=errors)
        rows, next_cursor = paginate(filterset.qs, params=params)
        return Response({"data": [fact_to_dict(f) for f in rows], "nextCursor": next_cursor})

    @extend_schema(operation_id="facts_write", request=FactInSerializer, responses={201: FactOutSerializer})
    def post(self, request):
        data = validated(FactInSerializer, request.data)
        fact, _outcome = services.fact_write(principal=self.principal, data=fact_input(data))
        return Response(fact_to_dict(fact), status=http.HTTP_201_CREATED)


class FactBatchView(ApiView):
    @extend_schema(operation_id="facts_write_batch", request=FactBatchInSerializer, responses={201: FactBatchOutSerializer})
    def post(self, request):
        data = validated(FactBatchInSerializer, request.data)
        facts = services.fact_write_batch(principal=self.principal, items=[fact_input(item) for item in data["facts"]])
        return Response({"facts": [fact_to_dict(f) for f in facts]}, status=http.HTTP_201_CREATED)


class FactDetailView(ApiView):
    @extend_schema(
        operation_id="facts_get",
        parameters=[
            OpenApiParameter("revision", {"type": "integer", "minimum": 1}, required=False, description="an earlier version"),
            OpenApiParameter("asOf", OpenApiTypes.DATETIME, required=False, description="the revision current at this time (ISO 8601)"),
        ],
        responses=FactOrRevisionOutSerializer,
    )
    def get(self, request, fact_id):
        params = request.query_params
        if params.get("revision") and params.get("asOf"):
            raise ValidationFailed("Give revision or asOf, not both.", errors={"revision": ["not with asOf"]})
        if raw := params.get("revision"):
            try:
                version = int(raw)
            except ValueError:
                version = 0
            if version < 1:
                raise ValidationFailed("revision must be a version number from 1.", errors={"revision": ["a version number"]})
            fact, revision = selectors.fact_revision(principal=self.principal, fact_id=fact_id, version=version)
            return Response(revision_to_dict(revision, fact))
        if raw := params.get("asOf"):
            if (at := parse_time(raw)) is None:
                raise ValidationFailed("asOf must be an ISO 8601 time with a zone, e.g. 2026-10-01T00:00:00Z.", errors={"asOf": ["ISO 8601 with zone"]})
            fact, revision = selectors.fact_as_of(principal=self.principal, fact_id=fact_id, at=at)
            return Response(revision_to_dict(revision, fact))
        return Response(fact_to_dict(selectors.fact_get(principal=self.principal, fact_id=fact_id)))

    @extend_schema(operation_id="facts_delete", responses={204: None})
    def delete(self, request, fact_id):
        services.fact_delete(principal=self.principal, fact_id=fact_id)
        return Response(status=http.HTTP_204_NO_CONTENT)


class FactSupersedeView(ApiView):
    @extend_schema(
        operation_id="facts_supersede",
        request=SupersedeInSerializer,
        parameters=[OpenApiParameter("If-Match", {"type": "string", "pattern": r'^\s*(W/)?"?[0-9]+"?\s*$'}, OpenApiParameter.HEADER,
                                     required=False, description='"N": the version you read')],
        responses=FactOutSerializer,
    )
    def post(self, request, fact_id):
        data = validated(SupersedeInSerializer, request.data)
        expect = data.get("expectVersion")
        if expect is None and (header := request.headers.get("If-Match")):
            try:
                expect = int(header.strip().removeprefix("W/").strip('"'))
            except ValueError:
                raise ValidationFailed('If-Match must be the version you read, e.g. "1".', errors={"If-Match": ["a version"]}) from None
        if expect is None:
            raise PreconditionRequired("Send expectVersion (or If-Match) with the version you read, so no change is lost.")
        fact = services.fact_supersede(principal=self.principal, fact_id=fact_id, content=data["content"], expect_version=expect)
        return Response(fact_to_dict(fact), headers={"ETag": f'"{fact.version}"'})


class FactVerifyView(ApiView):
    @extend_schema(operation_id="facts_verify", request=None, responses=FactOutSerializer)
    def post(self, request, fact_id):
        fact = services.fact_verify(principal=self.principal, fact_id=fact_id)
        return Response(fact_to_dict(fact))


class FactRevisionsView(ApiView):
    @extend_schema(operation_id="facts_revisions", responses=RevisionListSerializer)
    def get(self, request, fact_id):
        fact, revisions = selectors.fact_revisions(principal=self.principal, fact_id=fact_id)
        return Response({"data": [revision_to_dict(r, fact) for r in revisions], "nextCursor": None})
