"""What the OpenAPI schema says of names (types, keys, namespaces): facts.content's rule."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.schema import api_operations
from facts.content import MAX_NAME_LENGTH, NAME_PATTERN

# facts.content.NAME_PATTERN, less the "/" that one path segment cannot hold.
WORKSPACE_NAMESPACE = r"^[A-Za-z0-9_.:@+\-]{1,200}$"


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH, "pattern": NAME_PATTERN.pattern})
class NameField(serializers.CharField):
    """A type, key or namespace: the schema carries the pattern facts.content.name_problem checks."""


def name_patterns(result, generator, request, public):
    """POSTPROCESSING_HOOKS entry: path parameters that are names carry the name pattern."""
    for _, operation in api_operations(result):
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path" and parameter["name"] == "namespace":
                parameter["schema"]["pattern"] = WORKSPACE_NAMESPACE
            elif parameter["in"] == "path" and parameter["name"] == "key":  # an entry's or profile's key
                parameter["schema"]["pattern"] = NAME_PATTERN.pattern
    return result
