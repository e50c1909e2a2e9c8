"""core: what every app shares and that imports no app (errors, the API base view, scoping,
idempotency, pagination, throttling, the task queue, job locks, the authorization table)."""

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "memoryhub: core"
