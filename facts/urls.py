"""Facts API routes (under /v1/)."""

from django.urls import path

from facts import views

urlpatterns = [
    path("facts", views.FactListView.as_view(), name="facts"),
    path("facts/batch", views.FactBatchView.as_view(), name="facts-batch"),
    path("facts/<uuid:fact_id>", views.FactDetailView.as_view(), name="fact"),
    path("facts/<uuid:fact_id>/supersede", views.FactSupersedeView.as_view(), name="fact-supersede"),
    path("facts/<uuid:fact_id>/verify", views.FactVerifyView.as_view(), name="fact-verify"),
    path("facts/<uuid:fact_id>/revisions", views.FactRevisionsView.as_view(), name="fact-revisions"),
]
