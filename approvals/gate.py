"""Does a remembered text wait for a person? The one answer, for every door that keeps what a
model was told: the remember tool (agent.services), Claude's memory tool and MEMORY.md writes
(profiles.memory_tool).

`judge` asks the rules and the intent classifier (approvals.rules, approvals.intent) and the
scope (wider than one person waits too); `hold` files the question for a reviewer;
`approval_current_reasons` asks again on an approval's fact as it is now, for the reviewer's
views (the admin and the dashboard highlight what it finds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

from approvals import intent, rules
from approvals.models import Approval
from approvals.services import approval_request


@dataclass(frozen=True)
class Verdict:
    reasons: list[dict]  # why it waits ([]: it may be kept at once)
    hint: str | None = None  # held only for reading as an order: how to state it as a fact instead
    vector: object = None  # the passage vector the classifier read (approvals.rules.Screening.vector)

    @property
    def held(self) -> bool:
        return bool(self.reasons)


def judge(text: str, *, scope: str | None = None, tool_names: Iterable[str] = (), vector=None) -> Verdict:
    """The gate's verdict on `text`, kept at `scope` (a remember scope; None: one person's).

    `vector`: the local model's passage vector of `text` when the caller's write made it
    (approvals.intent.reusable); otherwise the classifier makes its own, unless
    MEMORYHUB_GATE_VECTORS is off, or a rule holds the text (then nothing is embedded). The
    verdict carries the vector the classifier read."""
    screening = rules.screen(text, tool_names=tool_names, vector=vector, vectors=settings.MEMORYHUB_GATE_VECTORS)
    wide = rules.scope_reasons(scope) if scope else []
    hint = rules.REPHRASE_HINT if screening.order_only and not wide else None
    return Verdict(wide + screening.reasons, hint, screening.vector)


def judge_label(text: str) -> Verdict:
    """The verdict on a label of a memory file — a heading or a frontmatter value of at most
    three words ("User Preferences", "Notes", "name: user prefs"): the certain signals only.

    A label has no clause whose intent the classifier could read (it learned from memories, and
    on a bare "Notes" or "Memory" it says no more than its prior), so a label is held only for
    a rule. Longer headings, and every label in a script written without spaces, where one
    "word" can be a whole sentence, are judged as any text is.
    """
    words = rules.normalise(text).split()
    if len(words) > 3 or any(rules.unspaced_script(char) for char in text):
        return judge(text)
    return Verdict(rules.hard_reasons(text))


def approval_current_reasons(*, approval: Approval) -> list[dict]:
    """The gate's reasons on the fact's text now, with offsets into it (it is what approving makes visible).

    The stored reasons were found when the agent asked; the fact may have been rewritten
    since. Tool names the request flagged are looked for again, and the fact's stored
    embedding is the vector the classifier reads when the local model made it.
    """
    names = [r["match"] for r in approval.reasons if r.get("rule") == "tool-name" and isinstance(r.get("match"), str)]
    fact = approval.fact
    vector = fact.embedding if fact.embedding is not None and intent.reusable(fact.embedding_model) else None
    return judge(fact.text, tool_names=names, vector=vector).reasons


def hold(*, fact, verdict: Verdict, requested_by: dict, origin: dict | None = None) -> Approval:
    """Ask a person to approve `fact` (written pending, in this transaction) for the verdict's
    reasons; `origin` tells the reviewer where it was asked (a remember call's conversation and run)."""
    return approval_request(fact=fact, reasons=verdict.reasons, requested_by=requested_by, origin=origin)
