"""The kinds of rows retrieval embeds, and where each comes from.

Facts are retrieval's own (facts sit below it); conversations' messages belong to the agent
app above, which registers them at startup (agent.wiring). The embedding task, the
backfill and `manage.py backfill` walk whatever is registered, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet

from facts.models import SLOT_HOLDING, Fact


@dataclass(frozen=True)
class Source:
    name: str  # the backfill's count of it: "facts", "messages"
    model: type
    embeddable: Callable[[], QuerySet]  # every row of the kind that may hold an embedding
    pending: Callable[[datetime], QuerySet]  # what the backfill takes: settled rows that still read
    guard: str | None = None  # a column that must hold the value read when the embedding is written


_SOURCES: dict[str, Source] = {}


def register(source: Source) -> None:
    _SOURCES[source.name] = source


def get(name: str) -> Source:
    return _SOURCES[name]


def registered() -> list[Source]:
    return list(_SOURCES.values())


def settled_before(now: datetime) -> datetime:
    """Rows younger than the grace are left to the write's own embedding task."""
    return now - timedelta(seconds=settings.MEMORYHUB_BACKFILL_GRACE_SECONDS)


register(Source(
    name="facts", model=Fact, embeddable=Fact.objects.all, guard="content_hash",
    pending=lambda now: Fact.objects.filter(status__in=SLOT_HOLDING, updated_at__lte=settled_before(now))
    .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now)),
))
