"""workspaces: working memory (seed 000): keyed entries, the memory_query language, the block, extraction, tools."""

from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"
