"""drf-spectacular extensions: how the schema describes our authentication, strict inputs and errors."""

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.auth.ApiKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API key: `Authorization: Bearer mh_…`"}


class StrictSerializerScheme(OpenApiSerializerExtension):
    """Input serializers that refuse undeclared fields say so: `additionalProperties: false`."""

    target_class = "facts.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["additionalProperties"] = False
        return schema


# Any JSON value but null, in the OpenAPI 3.0 dialect (which has no "null" type).
NOT_NULL_JSON = {"anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean")]}


class JSONFieldScheme(OpenApiSerializerFieldExtension):
    """A JSONField that refuses null says so (drf-spectacular writes `{}`, which admits null)."""

    target_class = "rest_framework.fields.JSONField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        return {} if self.target.allow_null else dict(NOT_NULL_JSON)


PROBLEM_SCHEMA = {
    "type": "object",
    "description": "An error, as RFC 9457 problem details; `errors` (field → messages) on validation errors.",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    },
    "required": ["type", "title", "status", "detail", "code"],
}
# What any /v1 operation may answer besides its success (docs/api.md, Conventions).
PROBLEM_STATUSES = {
    "400": "validation-error: the request is malformed (`errors` names the fields)",
    "401": "unauthenticated: no key, or a bad or revoked one",
    "403": "forbidden or participant-not-allowed: the key may not do this",
    "404": "not-found: no such thing here (also anything of another tenant or project)",
    "409": "a conflict: version-conflict, idempotency-key-reused, request-in-flight, …",
    "413": "payload-too-large",
    "415": "unsupported-media-type: send application/json",
    "429": "rate-limited (Retry-After)",
    "503": "service-unavailable: the database is away; retry (Retry-After)",
}


def api_operations(result):
    """(path, operation) for every authenticated operation of a generated schema (the /v1 API),
    for the POSTPROCESSING_HOOKS that complete them (this module's and facts.schema's)."""
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method in {"get", "post", "put", "patch", "delete"} and operation.get("security"):
                yield path, operation


def problem_responses(result, generator, request, public):
    """POSTPROCESSING_HOOKS entry: every /v1 operation documents its problem+json errors.

    Without them the schema promised only the success status, and clients (and
    schemathesis) met undocumented 4xx answers everywhere.
    """
    result.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path, operation in api_operations(result):
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query" and not parameter.get("required"):
                # Every view reads `?name=` (empty) as "not given".
                parameter["allowEmptyValue"] = True
        responses = operation.setdefault("responses", {})
        for status, description in PROBLEM_STATUSES.items():
            responses.setdefault(status, {"description": description, "content": problem})
        if path.endswith("/supersede"):
            responses.setdefault("428", {"description": "precondition-required: send expectVersion or If-Match", "content": problem})
    return result


def limit_type(maximum: int) -> dict:
    """The schema of a `?limit=` parameter: what core.pagination.parse_limit accepts."""
    return {"type": "integer", "minimum": 1, "maximum": maximum}
