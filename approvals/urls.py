"""Approvals API routes (under /v1/)."""

from django.urls import path

from approvals import views

urlpatterns = [
    path("approvals", views.ApprovalListView.as_view(), name="approvals"),
    path("approvals/<uuid:approval_id>", views.ApprovalDetailView.as_view(), name="approval"),
    path("approvals/<uuid:approval_id>/approve", views.ApprovalApproveView.as_view(), name="approval-approve"),
    path("approvals/<uuid:approval_id>/reject", views.ApprovalRejectView.as_view(), name="approval-reject"),
]
