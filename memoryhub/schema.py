"""drf-spectacular extensions: how the schema describes our authentication."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "memoryhub.auth.ApiKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API key: `Authorization: Bearer mh_…`"}
