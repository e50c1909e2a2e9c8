"""Facts held for a reviewer, with their approvals."""

from __future__ import annotations

import factory

from tests.factories.accounts import _ServiceFactory, owner


class PendingFactFactory(_ServiceFactory):
    """A fact an agent remembered, waiting for a reviewer, with its approval."""

    content = factory.Sequence(lambda n: f"held note {n}")
    participant_id = None

    @classmethod
    def _write(cls, world, **fields):
        from approvals.services import approval_request
        from facts.services import FactInput, Provenance, fact_write

        agent = {"id": "acme.desk", "kind": "agent", "agentVersion": "1.0.0"}
        fact, _ = fact_write(
            principal=owner(world), data=FactInput(type="acme.note", **fields),
            provenance=Provenance(trust="unverified", attributed_to=agent, status="pending"),
        )
        return approval_request(fact=fact, reasons=[{"rule": "wide-scope", "match": "same-project"}], requested_by=agent)
