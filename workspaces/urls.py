"""Working-memory API routes (under /v1/)."""

from django.urls import path

from workspaces import views as ws

urlpatterns = [
    # Working memory (seed 000): a namespace's keyed entries and what agent loops need around them.
    path("workspaces/<str:namespace>/memory", ws.MemoryView.as_view(), name="workspace-memory"),
    path("workspaces/<str:namespace>/memory/keys", ws.MemoryKeysView.as_view(), name="workspace-memory-keys"),
    path("workspaces/<str:namespace>/memory/<path:key>", ws.MemoryEntryView.as_view(), name="workspace-memory-entry"),
    path("workspaces/<str:namespace>/query", ws.MemoryQueryView.as_view(), name="workspace-query"),
    path("workspaces/<str:namespace>/turns", ws.TurnsView.as_view(), name="workspace-turns"),
    path("workspaces/<str:namespace>/compactions", ws.CompactionsView.as_view(), name="workspace-compactions"),
    path("workspaces/<str:namespace>/tasks", ws.TasksView.as_view(), name="workspace-tasks"),
    path("workspaces/<str:namespace>/block", ws.BlockView.as_view(), name="workspace-block"),
]
