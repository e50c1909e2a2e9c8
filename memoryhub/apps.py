"""The memoryhub core app: tenancy, auth and the pieces every API shares."""

from django.apps import AppConfig


class MemoryhubConfig(AppConfig):
    name = "memoryhub"
    verbose_name = "memoryhub: tenancy and keys"

    def ready(self) -> None:
        from memoryhub import celery, checks, schema  # noqa: F401  (Celery app, pgvector check, schema extensions)
