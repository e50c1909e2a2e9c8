"""The overview's charts: what the project's memory did per day, read within the caller's rights.

`project_activity` counts, for each of the last `days` days (UTC), the fact revisions
written, those an agent wrote (remembered), the approvals requested (held) and those
granted (approved). Facts are those `facts_visible` gives the caller; approvals only for
reviewers (`approvals_visible`), as the approval queue. One grouped query per series.
`read_latency` is the daily p95 of the project's retrieve and context reads
(retrieval.latency's histograms).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone as dt_timezone

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone

from accounts.services import Principal
from approvals.models import ApprovalStatus
from approvals.selectors import approvals_visible
from facts.models import FactRevision
from facts.selectors import facts_visible
from retrieval import latency

DAYS = 14


@dataclass
class Series:
    name: str
    help: str
    days: list[date]
    counts: list[int]
    labels: list[str] | None = None  # each day's tooltip (default: its count)
    summary: str | None = None  # the headline (default: the total)

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def headline(self) -> str:
        return self.summary if self.summary is not None else str(self.total)

    def bars(self, width: int = 168, height: int = 40) -> list[tuple[float, float, float, str]]:
        """(x, y, bar height, title) per day, scaled to the series' own maximum."""
        peak = max(self.counts) or 1
        step = width / len(self.counts)
        return [
            (round(i * step + 1, 1), round(height - max(1.0, height * n / peak) if n else height - 1, 1),
             round(max(1.0, height * n / peak) if n else 1, 1), self.labels[i] if self.labels else f"{day:%d %b}: {n}")
            for i, (day, n) in enumerate(zip(self.days, self.counts, strict=True))
        ]


def _per_day(queryset, field: str, days: list[date]) -> list[int]:
    start = datetime.combine(days[0], time.min, tzinfo=dt_timezone.utc)
    rows = (queryset.filter(**{f"{field}__gte": start}).annotate(day=TruncDate(field, tzinfo=dt_timezone.utc))
            .values("day").annotate(n=Count("id")))
    found = {row["day"]: row["n"] for row in rows}
    return [found.get(day, 0) for day in days]


def project_activity(*, principal: Principal, project_id, days: int = DAYS, reviewer: bool) -> list[Series]:
    today = timezone.now().astimezone(dt_timezone.utc).date()
    span = [today - timedelta(days=n) for n in range(days - 1, -1, -1)]
    revisions = FactRevision.objects.filter(fact__in=facts_visible(principal=principal).filter(project_id=project_id))
    series = [
        Series("written", "fact revisions written", span, _per_day(revisions, "recorded_at", span)),
        Series("remembered", "written by an agent's remember tool", span,
               _per_day(revisions.filter(recorded_by__kind="agent"), "recorded_at", span)),
    ]
    if reviewer:
        approvals = approvals_visible(principal=principal).filter(fact__project_id=project_id)
        series += [
            Series("held", "held for a reviewer", span, _per_day(approvals, "created_at", span)),
            Series("approved", "approved by a reviewer", span,
                   _per_day(approvals.filter(status=ApprovalStatus.APPROVED), "decided_at", span)),
        ]
    return series


def _ms(value: float | None) -> str:
    return "–" if value is None else ("over 5 s" if value == float("inf") else f"≤ {value:g} ms")


def read_latency(*, project_id, days: int = DAYS) -> Series:
    """The daily p95 of the project's per-turn reads (retrieve, context), from their histograms."""
    today = timezone.now().astimezone(dt_timezone.utc).date()
    span = [today - timedelta(days=n) for n in range(days - 1, -1, -1)]
    found = latency.daily(project_id=project_id, days=span)
    p95 = [latency.quantile(found.get(day, []), 0.95) for day in span]
    labels = [
        f"{day:%d %b}: " + (f"p50 {_ms(latency.quantile(found[day], 0.5))}, p95 {_ms(q)}, {sum(found[day])} reads" if day in found else "no reads")
        for day, q in zip(span, p95)
    ]
    every = [sum(column) for column in zip(*found.values())] if found else []
    summary = f"p95 {_ms(latency.quantile(every, 0.95))}" if every else "no reads yet"
    bars = [0 if q is None else int(min(q, 10_000)) for q in p95]
    return Series("latency", "per-turn reads (retrieve, context): p95 per day", span, bars, labels=labels, summary=summary)
