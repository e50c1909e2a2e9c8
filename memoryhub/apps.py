"""memoryhub: the composition root (settings, URLs, the Celery app, checks, `serve`).

It composes the apps and no app imports it. Its label is `hub`: the label `memoryhub`
belongs to the accounts app, whose tables (memoryhub_tenant, …) were made under it.
"""

from django.apps import AppConfig


class MemoryhubConfig(AppConfig):
    name = "memoryhub"
    label = "hub"
    verbose_name = "memoryhub"

    def ready(self) -> None:
        from django.core.signals import request_started

        from core import schema  # noqa: F401  (drf-spectacular extensions)
        from core.connections import drop_dead_connections
        from memoryhub import celery, checks  # noqa: F401  (Celery app, pgvector check)

        request_started.connect(drop_dead_connections, dispatch_uid="memoryhub.drop_dead_connections")
