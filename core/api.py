"""Shared API pieces: the base view every endpoint derives from.

`ApiView` authenticates the key (DRF), enters the key's tenant scope for the request
(core.scoping), and runs POSTs that carry an `Idempotency-Key` under the
idempotency protocol (core.idempotency).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.http import HttpResponse
from rest_framework import renderers
from rest_framework.views import APIView

from core import idempotency, scoping
from core.errors import Forbidden, ValidationFailed
from core.parsers import refuse_unstorable, unstorable_at

if TYPE_CHECKING:  # the principal is accounts' (request.auth, set by accounts.auth)
    from accounts.services import Principal


def validated(serializer_class, data) -> dict:
    """`data` checked by an input serializer: its validated data, or a 400 problem naming the fields."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def iso_time(value: datetime | None) -> str | None:
    """Times on the wire: ISO 8601 in UTC with a Z."""
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def unstorable_in_url(request) -> tuple[str, str] | None:
    """The first NUL or lone surrogate in a request's path (`path`) or query (`query.q`)."""
    return unstorable_at(request.path, "path") or next(
        (found for k, v in request.GET.items() if (found := unstorable_at(f"{k}={v}", f"query.{k}"))), None
    )


class ApiView(APIView):
    """Base of every /v1 endpoint."""

    idempotent_methods = frozenset({"POST"})
    # A key whose user has no role where it points has no rights (core.policy): every
    # endpoint refuses it, except the few that only describe the key itself (/v1/me).
    needs_role = True

    @property
    def principal(self) -> Principal:
        return self.request.auth

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # PostgreSQL stores no NUL and no lone surrogate in text or jsonb: one in the path,
        # the query or a JSON body would reach the database and fail there (500). Refused
        # here, for every endpoint.
        refuse_unstorable(unstorable_in_url(request))
        if request.method in ("POST", "PUT", "PATCH"):
            request.data  # parsed now, before any claim or write: core.parsers refuses the same in a body
        principal: Principal = request.auth
        if self.needs_role and principal.role is None:
            raise Forbidden("The key's user has no role here (a removed member?): the key has no rights.")
        self._scope_token = scoping.activate(
            scoping.Scope(tenant_id=principal.tenant_id, project_id=principal.project_id)
        )
        key = request.headers.get(idempotency.HEADER)
        if key is not None and request.method in self.idempotent_methods:
            fingerprint = idempotency.request_fingerprint(request)
            self._idempotency_record = idempotency.claim(principal=principal, key=key, fingerprint=fingerprint)
            self._idempotency_atomic = transaction.atomic()
            self._idempotency_atomic.__enter__()
            try:
                idempotency.hold(record=self._idempotency_record)
            except idempotency.RequestInFlight:
                self._idempotency_atomic.__exit__(None, None, None)
                self._idempotency_atomic = None
                raise

    def handle_exception(self, exc):
        if isinstance(exc, idempotency.Replay):
            record = exc.record
            response = HttpResponse(
                bytes(record.response_body or b""), status=record.response_status,
                content_type=record.response_content_type or None,
            )
            response["Idempotent-Replayed"] = "true"
            return response
        return super().handle_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        atomic = getattr(self, "_idempotency_atomic", None)
        if atomic is not None:
            self._idempotency_atomic = None
            record = self._idempotency_record
            keep = response.status_code < 500 and not transaction.get_rollback()
            if keep:
                if hasattr(response, "render") and not getattr(response, "is_rendered", True):
                    response.render()
                idempotency.complete(
                    record=record, status=response.status_code, body=bytes(response.content),
                    content_type=response.get("Content-Type", ""),
                )
                atomic.__exit__(None, None, None)
            else:
                transaction.set_rollback(True)
                atomic.__exit__(None, None, None)
                idempotency.release(record=record)
        token = getattr(self, "_scope_token", None)
        if token is not None:
            self._scope_token = None
            scoping.deactivate(token)
        return response


class PlainTextRenderer(renderers.BaseRenderer):
    """Lets `Accept: text/plain` through content negotiation for views that answer in the
    seeds' text formats (working memory, profiles); those views build the text themselves."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, (str, bytes)) else str(data)


def json_object_body(request) -> dict:
    """The request's JSON body, which must be an object."""
    if not isinstance(request.data, dict):
        raise ValidationFailed("the body must be a JSON object")
    return request.data

