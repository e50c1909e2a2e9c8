"""Template helpers: times for the viewer's zone, JSON, who did something, dictionary lookups."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from django import template
from django.utils.html import format_html

register = template.Library()


@register.filter
def when(value: datetime | None, style: str = "") -> str:
    """`<time datetime="…Z">2026-10-01 12:00 UTC</time>`: UTC in the page, the viewer's zone once the script runs."""
    if not value:
        return format_html('<span class="muted">{}</span>', "—")
    utc = value.astimezone(timezone.utc)
    return format_html(
        '<time datetime="{}" data-style="{}" title="{}">{}</time>',
        utc.isoformat().replace("+00:00", "Z"), style, utc.strftime("%Y-%m-%d %H:%M:%S UTC"), utc.strftime("%Y-%m-%d %H:%M UTC"),
    )


@register.filter
def pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def lookup(mapping, key):
    if not mapping:
        return None
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def actor(value, people=None) -> str:
    """`{id, kind, agentVersion?}` as a person reads it: a username, or "agent acme.desk 1.0.0"."""
    if not isinstance(value, dict):
        return "—" if value in (None, "") else (people or {}).get(str(value), f"user {value}")
    kind, ident = value.get("kind", "?"), value.get("id", "?")
    if kind == "user":
        return (people or {}).get(str(ident), f"user {ident}")
    version = f" {value['agentVersion']}" if value.get("agentVersion") else ""
    return f"{kind} {ident}{version}"


@register.filter
def shown(value, people=None) -> str:
    """A changed field's value on the revision timeline: a time, who, JSON, or text."""
    if value is None or value == "":
        return "—"
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, dict) and "kind" in value:
        return actor(value, people)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


@register.filter
def short(value, length: int = 8) -> str:
    return str(value)[: int(length)]


@register.simple_tag
def url_with(query: str, **params) -> str:
    """A query string: `query` (already encoded) with `params` added."""
    from urllib.parse import urlencode

    extra = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return "?" + "&".join(part for part in (query, extra) if part)
