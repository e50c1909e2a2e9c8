"""Accounts API routes (under /v1/): the key itself, and the admin API (members, keys, retention)."""

from django.urls import path

from accounts import admin_views, views

urlpatterns = [
    path("me", views.MeView.as_view(), name="me"),
    # The admin API (accounts.admin_views), as the dashboard's settings pages.
    path("members", admin_views.MembersView.as_view(), name="members"),
    path("members/<str:username>", admin_views.MemberView.as_view(), name="member"),
    path("keys", admin_views.KeysView.as_view(), name="keys"),
    path("keys/<str:key_id>", admin_views.KeyView.as_view(), name="key"),
    path("retention", admin_views.RetentionView.as_view(), name="retention"),
]
