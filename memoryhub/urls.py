"""URL configuration: the /v1 API, its schema and docs, health probes, the dashboard, the admin."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from dashboard import views as dashboard_views
from memoryhub import mcp_http, views

api_v1 = [
    # First: an agent's per-turn reads (retrieve, context) resolve after the fewest patterns
    # (about 60 µs sooner than behind the facts routes).
    path("", include("agent.urls")),
    path("", include("accounts.urls")),
    path("schema", SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema", authentication_classes=[], permission_classes=[]), name="docs"),
    path("", include("facts.urls")),
    path("", include("workspaces.urls")),
    path("", include("profiles.urls")),
    path("", include("approvals.urls")),
    path("", include("privacy.urls")),
]

urlpatterns = [
    path("", dashboard_views.start, name="home"),
    path("dashboard/", include("dashboard.urls")),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("v1/", include(api_v1)),
    path("mcp", mcp_http.McpView.as_view(), name="mcp"),  # MCP streamable HTTP (stateless JSON), same keys as /v1
    path("admin/", admin.site.urls),
]

handler404 = "memoryhub.views.not_found"
handler500 = "memoryhub.views.server_error"
