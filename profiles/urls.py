"""Keyed profile, Markdown memory and memory-tool API routes (under /v1/)."""

from django.urls import path

from profiles import markdown_views as mdv, memory_tool_views as mtv, views as pv

urlpatterns = [
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
