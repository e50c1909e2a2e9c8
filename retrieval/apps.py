"""Retrieval: keyword, semantic and hybrid search over facts and conversations."""

from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
