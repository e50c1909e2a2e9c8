"""Request-level guards that run before any view."""

from django.conf import settings

from core.errors import django_problem


class BodySizeLimitMiddleware:
    """Refuse bodies over MEMORYHUB_MAX_BODY_BYTES with 413 before reading them."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = settings.MEMORYHUB_MAX_BODY_BYTES
        if length > limit:
            return django_problem(
                413, "payload-too-large", "Payload too large",
                f"The request body is {length} bytes; the limit is {limit} bytes. Split it into smaller requests.",
            )
        return self.get_response(request)
