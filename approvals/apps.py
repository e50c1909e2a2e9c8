"""Approvals: what agents remember that a person must approve first."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        from django.conf import settings

        from approvals import intent

        # The gate embeds a text itself on the request's path, as a turn's question is.
        intent.VECTOR_THREADS = settings.MEMORYHUB_EMBEDDINGS_QUERY_THREADS
