"""Approvals: what agents remember that a person must approve first."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
