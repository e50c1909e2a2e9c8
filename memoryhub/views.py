"""Health probes, the key's own identity, and problem+json 404/500 for the API."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection
from django.http import JsonResponse

from core.errors import django_problem

logger = logging.getLogger(__name__)


def healthz(request):
    """The process is up (no dependencies checked)."""
    return JsonResponse({"status": "ok"})


def readyz(request):
    """Ready to serve: the database answers. The broker is reported, not required.

    Without Redis the API still reads and writes (the cache fails soft, an unsent task
    is picked up by the backfill job), so a broker outage says `degraded` with 200: a
    load balancer that pulled every web process on it would turn a Redis outage into a
    full one.
    """
    checks: dict[str, str] = {}
    status = "ok"
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # any failure means not ready; say which
        logger.warning("readyz: database: %s", exc)
        checks["database"] = "unavailable"
        status = "unavailable"
    if settings.REDIS_URL:
        try:
            import redis

            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1).ping()
            checks["broker"] = "ok"
        except Exception as exc:
            logger.warning("readyz: broker: %s", exc)
            checks["broker"] = "unavailable"
            if status == "ok":
                status = "degraded"
    return JsonResponse({"status": status, "checks": checks}, status=503 if status == "unavailable" else 200)


def _is_api(request) -> bool:
    """The API and the MCP endpoint answer problem+json; pages answer HTML."""
    return request.path.startswith("/v1/") or request.path == "/mcp"


def not_found(request, exception=None):
    if _is_api(request):
        return django_problem(404, "not-found", "Not found", "No such resource here.")
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def server_error(request):
    if _is_api(request):
        return django_problem(500, "server-error", "Server error", "An unexpected error occurred; it has been logged.")
    from django.views.defaults import server_error as default

    return default(request)
