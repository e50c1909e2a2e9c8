"""Does a remembered text wait for a person? The one answer, for every door that keeps what a
model was told: the remember tool (agent.services), Claude's memory tool and MEMORY.md writes
(profiles.memory_tool).

`judge` asks the rules and the intent classifier (approvals.rules, approvals.intent) and the
scope (wider than one person waits too); `hold` files the question for a reviewer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from approvals import rules
from approvals.models import Approval
from approvals.services import approval_request


@dataclass(frozen=True)
class Verdict:
    reasons: list[dict]  # why it waits ([]: it may be kept at once)
    hint: str | None = None  # held only for reading as an order: how to state it as a fact instead

    @property
    def held(self) -> bool:
        return bool(self.reasons)


def judge(text: str, *, scope: str | None = None, tool_names: Iterable[str] = ()) -> Verdict:
    """The gate's verdict on `text`, kept at `scope` (a remember scope; None: one person's)."""
    screening = rules.screen(text, tool_names=tool_names)
    wide = rules.scope_reasons(scope) if scope else []
    hint = rules.REPHRASE_HINT if screening.order_only and not wide else None
    return Verdict(wide + screening.reasons, hint)


def hold(*, fact, verdict: Verdict, requested_by: dict, origin: dict | None = None) -> Approval:
    """Ask a person to approve `fact` (written pending, in this transaction) for the verdict's
    reasons; `origin` tells the reviewer where it was asked (a remember call's conversation and run)."""
    return approval_request(fact=fact, reasons=verdict.reasons, requested_by=requested_by, origin=origin)
