"""Agent API routes (under /v1/): retrieve, agents and their per-turn doors, conversations."""

from django.urls import path

from agent import conversation_views, views

urlpatterns = [
    path("retrieve", views.RetrieveView.as_view(), name="retrieve"),
    path("agents", views.AgentListView.as_view(), name="agents"),
    path("agents/<str:slug>", views.AgentDetailView.as_view(), name="agent"),
    path("agents/<str:slug>/context", views.AgentContextView.as_view(), name="agent-context"),
    path("agents/<str:slug>/tools", views.AgentToolsView.as_view(), name="agent-tools"),
    path("conversations", conversation_views.ConversationListView.as_view(), name="conversations"),
    path("conversations/<uuid:conversation_id>", conversation_views.ConversationDetailView.as_view(), name="conversation"),
    path("conversations/<uuid:conversation_id>/messages", conversation_views.MessageListView.as_view(), name="conversation-messages"),
    path("agents/<str:slug>/remember", views.AgentRememberView.as_view(), name="agent-remember"),
]
