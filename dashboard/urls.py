"""Dashboard URLs: /dashboard/<tenant>/<project>/<section>/…; the project is in every project page's path."""

from django.urls import include, path

from dashboard import views

app_name = "dashboard"

project_pages = [
    path("", views.overview, name="overview"),
    path("facts/", views.facts, name="facts"),
    path("facts/<uuid:fact_id>/", views.fact, name="fact"),
    path("facts/<uuid:fact_id>/verify/", views.fact_verify, name="fact-verify"),
    path("facts/<uuid:fact_id>/delete/", views.fact_delete, name="fact-delete"),
    path("facts/<uuid:fact_id>/supersede/", views.fact_supersede, name="fact-supersede"),
    path("people/<str:participant_id>/", views.person, name="person"),
    path("people/<str:participant_id>/erase/", views.person_erase, name="person-erase"),
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/<uuid:approval_id>/decide/", views.approval_decide, name="approval-decide"),
    path("conversations/", views.conversations, name="conversations"),
    path("conversations/<uuid:conversation_id>/", views.conversation, name="conversation"),
    path("agents/", views.agents, name="agents"),
    path("agents/<str:slug>/", views.agent, name="agent"),
    path("agents/<str:slug>/edit/", views.agent_edit, name="agent-edit"),
    path("memory/", views.memory, name="memory"),
    path("memory/<path:namespace>/", views.memory_namespace, name="memory-namespace"),
    path("keys/", views.keys, name="keys"),
    path("keys/<uuid:key_id>/revoke/", views.key_revoke, name="key-revoke"),
    path("members/", views.members, name="members"),
    path("members/<int:membership_id>/remove/", views.member_remove, name="member-remove"),
    path("retention/", views.retention, name="retention"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.SignInView.as_view(), name="login"),
    path("logout/", views.SignOutView.as_view(), name="logout"),
    path("switch/", views.switch, name="switch"),
    path("<slug:tenant>/<slug:project>/", include(project_pages)),
]
