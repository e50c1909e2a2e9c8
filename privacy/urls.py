"""Privacy API routes (under /v1/): a participant's export and erasure."""

from django.urls import path

from privacy import views

urlpatterns = [
    path("participants/<str:participant_id>", views.ParticipantView.as_view(), name="participant"),
    path("participants/<str:participant_id>/export", views.ParticipantExportView.as_view(), name="participant-export"),
]
