"""Application errors and the one place that turns every error into problem+json.

Services raise `ApplicationError` subclasses that carry the API code; views never build
error bodies themselves. DRF's own exceptions (auth, parsing, throttling, validation)
are mapped to the same shape, so every 4xx/5xx on the API reads alike:
`{type, title, status, detail, code}` plus `errors` on validation errors.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "https://memoryhub.dev/problems/"


class ApplicationError(Exception):
    """An error a client can act on; `code` is the stable API error code."""

    status = 400
    code = "bad-request"
    title = "Bad request"

    def __init__(self, detail: str | None = None, *, extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        self.detail = detail or self.title
        self.extra = extra or {}
        self.headers = headers or {}
        super().__init__(self.detail)


class Unauthenticated(ApplicationError):
    status, code, title = 401, "unauthenticated", "Authentication required"


class Forbidden(ApplicationError):
    status, code, title = 403, "forbidden", "Not allowed"


class ParticipantNotAllowed(ApplicationError):
    status, code, title = 403, "participant-not-allowed", "Participant not allowed"


class NotFound(ApplicationError):
    status, code, title = 404, "not-found", "Not found"


class VersionConflict(ApplicationError):
    status, code, title = 409, "version-conflict", "Version conflict"


class Conflict(ApplicationError):
    status, code, title = 409, "conflict", "Conflict"


class PreconditionRequired(ApplicationError):
    status, code, title = 428, "precondition-required", "Precondition required"


class ValidationFailed(ApplicationError):
    status, code, title = 400, "validation-error", "Invalid request"

    def __init__(self, detail: str | None = None, *, errors: dict[str, list[str]] | None = None, **kwargs):
        super().__init__(detail, **kwargs)
        self.errors = errors or {}
        if self.errors:
            self.extra = {**self.extra, "errors": self.errors}


class PayloadTooLarge(ApplicationError):
    status, code, title = 413, "payload-too-large", "Payload too large"


class RateLimited(ApplicationError):
    status, code, title = 429, "rate-limited", "Too many requests"


class ServiceUnavailable(ApplicationError):
    status, code, title = 503, "service-unavailable", "Service unavailable"


def problem_body(status: int, code: str, title: str, detail: str, extra: dict | None = None) -> dict:
    body = {"type": TYPE_BASE + code, "title": title, "status": status, "detail": detail, "code": code}
    if extra:
        body.update(extra)
    return body


def problem_response(error: ApplicationError) -> Response:
    body = problem_body(error.status, error.code, error.title, error.detail, error.extra)
    response = Response(body, status=error.status, headers=error.headers, content_type=PROBLEM_CONTENT_TYPE)
    return response


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested ValidationError detail → {"field.sub": [messages]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if name.endswith("non_field_errors"):
                name = prefix or "body"
            for k, v in _flatten(value, name).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out[prefix or "body"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                for k, v in _flatten(item, f"{prefix}[{index}]").items():
                    out.setdefault(k, []).extend(v)
    else:
        out[prefix or "body"] = [str(detail)]
    return out


def as_application_error(exc: Exception) -> ApplicationError | None:
    """Map DRF and Django exceptions onto our error classes."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, drf.ValidationError):
        errors = _flatten(exc.detail)
        first = next(iter(errors.items()), ("body", ["invalid"]))
        return ValidationFailed(f"{first[0]}: {first[1][0]}", errors=errors)
    if isinstance(exc, drf.ParseError):
        return ValidationFailed(f"The body is not valid JSON: {exc.detail}", errors={"body": [str(exc.detail)]})
    if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
        return Unauthenticated(str(exc.detail), headers={"WWW-Authenticate": 'Bearer realm="memoryhub"'})
    if isinstance(exc, (drf.PermissionDenied, DjangoPermissionDenied)):
        return Forbidden(str(getattr(exc, "detail", "")) or "This key may not do that.")
    if isinstance(exc, (drf.NotFound, Http404)):
        return NotFound("No such resource here.")
    if isinstance(exc, drf.Throttled):
        wait = max(1, int(exc.wait or 1))
        return RateLimited(f"Too many requests for this API key; retry in {wait} s.", headers={"Retry-After": str(wait)})
    if isinstance(exc, drf.MethodNotAllowed):
        error = ApplicationError(str(exc.detail))
        error.status, error.code, error.title = 405, "method-not-allowed", "Method not allowed"
        return error
    if isinstance(exc, drf.UnsupportedMediaType):
        error = ApplicationError(f"{exc.detail} Send application/json.")
        error.status, error.code, error.title = 415, "unsupported-media-type", "Unsupported media type"
        return error
    if isinstance(exc, drf.NotAcceptable):
        error = ApplicationError(str(exc.detail))
        error.status, error.code, error.title = 406, "not-acceptable", "Not acceptable"
        return error
    if isinstance(exc, drf.APIException):
        error = ApplicationError(str(exc.detail))
        error.status, error.code, error.title = exc.status_code, exc.default_code.replace("_", "-"), "Error"
        return error
    return None


def problem_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF EXCEPTION_HANDLER: every error leaves as problem+json."""
    from django.db import DatabaseError, InterfaceError, OperationalError

    error = as_application_error(exc)
    if error is None:
        if isinstance(exc, (OperationalError, InterfaceError)):
            logger.warning("database unavailable: %s", exc)
            error = ServiceUnavailable("The database is unavailable; retry shortly.", headers={"Retry-After": "2"})
        elif isinstance(exc, DatabaseError):
            logger.exception("database error")
            error = ApplicationError("An unexpected database error occurred.")
            error.status, error.code, error.title = 500, "server-error", "Server error"
        else:
            return None  # let Django's 500 handler answer (also problem+json, see views)
    response = problem_response(error)
    # A problem is JSON whatever the request asked for: a view that also offers text
    # (`?format=txt`, `Accept: text/plain`) would otherwise print the dict's repr.
    if (request := context.get("request")) is not None:
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), PROBLEM_CONTENT_TYPE
    return response


def django_problem(status: int, code: str, title: str, detail: str) -> JsonResponse:
    """problem+json for errors raised outside DRF (404/500 handlers, middleware)."""
    return JsonResponse(problem_body(status, code, title, detail), status=status, content_type=PROBLEM_CONTENT_TYPE)
