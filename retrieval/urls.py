"""Retrieval API routes (under /v1/)."""

from django.urls import path

from retrieval import views

urlpatterns = [path("retrieve", views.RetrieveView.as_view(), name="retrieve")]
