"""Facts in one context that contradict each other, said out loud (`memory-conflict`).

Two live facts of one person (the same `participantId`) are about the same thing when they
share a key (same type and key: a slot's value, e.g. kept in two conversations, or one the
agent remembered and one a person wrote in another namespace) or, for facts without a key,
the same type and the same subjects. They disagree when their content differs. Such a
group is not dropped: the context warns `memory-conflict`, naming the facts and their
trust, and each of their `<memory>` entries carries a `conflict` note, so neither the
runtime nor the model is left to guess. Keys keep a person's several values of one type
apart; a keyless type read per person is one question with several answers.
"""

from __future__ import annotations

import json

from retrieval.search import Hit

CONFLICT_NOTE = "another fact here is about the same thing and says otherwise: prefer the more trusted one, or ask the user"


def _about(hit: Hit) -> tuple | None:
    """What a fact is about, for one person; None when it is no one's in particular."""
    fact = hit.fact
    if fact.participant_id is None:
        return None
    if fact.key is not None:
        return (fact.participant_id, fact.type, "key", fact.key)
    subjects = json.dumps(sorted((s.get("kind"), s.get("id")) for s in fact.subjects or []))
    return (fact.participant_id, fact.type, "subjects", subjects)


def memory_conflicts(hits: list[Hit]) -> list[list[Hit]]:
    """Groups (in the order read) of hits about the same thing whose content differs."""
    groups: dict[tuple, list[Hit]] = {}
    for hit in hits:
        about = _about(hit)
        if about is not None:
            groups.setdefault(about, []).append(hit)
    return [group for group in groups.values() if len({hit.fact.content_hash for hit in group}) > 1]


def conflict_warning(group: list[Hit]) -> dict:
    """The `memory-conflict` warning for one group: its facts, in the order read, with their trust."""
    first = group[0].fact
    what = f"key {first.key!r}" if first.key is not None else "the same subjects, with no key"
    named = ", ".join(f"{hit.fact.id} ({hit.fact.trust})" for hit in group)
    return {
        "code": "memory-conflict",
        "message": (
            f"{len(group)} facts of participant {first.participant_id!r} of type {first.type!r} share {what} and say "
            f"different things: {named}. All were sent, each marked with its trust and a conflict note; verify or "
            "delete the wrong ones, or give each value its own key."
        ),
        "facts": [str(hit.fact.id) for hit in group],
    }
