"""profiles: keyed profiles (memory.json) and the Markdown memory folder (MEMORY.md), with Claude's memory tool over it."""

from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    name = "profiles"
