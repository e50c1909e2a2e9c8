"""Throttling keyed on the API key (429 with Retry-After), rate from settings."""

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle


class ApiKeyRateThrottle(SimpleRateThrottle):
    scope = "api-key"

    def get_rate(self):
        # Read on every request (not cached on the class) so deployments and tests can change it.
        return settings.MEMORYHUB_RATE_LIMIT or None

    def __init__(self):
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def get_cache_key(self, request, view):
        principal = getattr(request, "auth", None)
        if principal is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": principal.api_key_id}
