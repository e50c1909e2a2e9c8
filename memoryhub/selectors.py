"""Tenancy reads that hot paths need, cached briefly per process."""

from __future__ import annotations

import time

from memoryhub.models import Project

_CONFIG_TTL = 60.0
_configs: dict = {}


def project_search_config(project_id) -> str:
    """The project's text search configuration (cached a minute per process)."""
    if project_id is None:
        return "english"
    cached = _configs.get(project_id)
    now = time.monotonic()
    if cached and cached[1] > now:
        return cached[0]
    config = Project.objects.filter(id=project_id).values_list("text_search_config", flat=True).first() or "english"
    _configs[project_id] = (config, now + _CONFIG_TTL)
    return config
