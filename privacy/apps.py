"""privacy: a participant's export and erasure, and the retention purges."""

from django.apps import AppConfig


class PrivacyConfig(AppConfig):
    name = "privacy"
