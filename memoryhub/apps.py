"""The memoryhub core app: tenancy, auth and the pieces every API shares."""

from django.apps import AppConfig


class MemoryhubConfig(AppConfig):
    name = "memoryhub"
    verbose_name = "memoryhub: tenancy and keys"

    def ready(self) -> None:
        from django.core.signals import request_started

        from memoryhub import celery, checks, schema  # noqa: F401  (Celery app, pgvector check, schema extensions)
        from memoryhub.connections import drop_dead_connections

        request_started.connect(drop_dead_connections, dispatch_uid="memoryhub.drop_dead_connections")
