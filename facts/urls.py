"""Facts API routes (under /v1/)."""

from django.urls import path

from facts import markdown_views as mdv, memory_tool_views as mtv, profile_views as pv, views, workspace_views as ws

urlpatterns = [
    path("facts", views.FactListView.as_view(), name="facts"),
    path("facts/batch", views.FactBatchView.as_view(), name="facts-batch"),
    path("facts/<uuid:fact_id>", views.FactDetailView.as_view(), name="fact"),
    path("facts/<uuid:fact_id>/supersede", views.FactSupersedeView.as_view(), name="fact-supersede"),
    path("facts/<uuid:fact_id>/verify", views.FactVerifyView.as_view(), name="fact-verify"),
    path("facts/<uuid:fact_id>/revisions", views.FactRevisionsView.as_view(), name="fact-revisions"),
    # Working memory (seed 000): a namespace's keyed entries and what agent loops need around them.
    path("workspaces/<str:namespace>/memory", ws.MemoryView.as_view(), name="workspace-memory"),
    path("workspaces/<str:namespace>/memory/keys", ws.MemoryKeysView.as_view(), name="workspace-memory-keys"),
    path("workspaces/<str:namespace>/memory/<path:key>", ws.MemoryEntryView.as_view(), name="workspace-memory-entry"),
    path("workspaces/<str:namespace>/query", ws.MemoryQueryView.as_view(), name="workspace-query"),
    path("workspaces/<str:namespace>/turns", ws.TurnsView.as_view(), name="workspace-turns"),
    path("workspaces/<str:namespace>/compactions", ws.CompactionsView.as_view(), name="workspace-compactions"),
    path("workspaces/<str:namespace>/tasks", ws.TasksView.as_view(), name="workspace-tasks"),
    path("workspaces/<str:namespace>/block", ws.BlockView.as_view(), name="workspace-block"),
    # Keyed profile (seed 002, memory.json): one participant's keyed facts.
    path("profiles/<str:participant_id>", pv.ProfileView.as_view(), name="profile"),
    path("profiles/<str:participant_id>/keys", pv.ProfileKeysView.as_view(), name="profile-keys"),
    path("profiles/<str:participant_id>/facts", pv.ProfileFactsView.as_view(), name="profile-facts"),
    path("profiles/<str:participant_id>/facts/<path:key>", pv.ProfileFactView.as_view(), name="profile-fact"),
    path("profiles/<str:participant_id>/relevant-keys", pv.RelevantKeysView.as_view(), name="profile-relevant-keys"),
    path("profiles/<str:participant_id>/import", pv.ProfileImportView.as_view(), name="profile-import"),
    # Markdown memory (seed 004): MEMORY.md and its topic files, out and back in.
    path("markdown", mdv.MarkdownFolderView.as_view(), name="markdown"),
    path("markdown/import", mdv.MarkdownImportView.as_view(), name="markdown-import"),
    path("markdown/<str:name>", mdv.MarkdownFileView.as_view(), name="markdown-file"),
    # Claude's memory tool (memory_20250818) over that folder, for hosts that are not Python.
    path("memory-tool/<str:who>", mtv.MemoryToolView.as_view(), name="memory-tool"),
]
