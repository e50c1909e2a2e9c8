"""Facts, written (and revised) as the API writes them."""

from __future__ import annotations

import factory

from tests.factories.accounts import _ServiceFactory, owner


class FactFactory(_ServiceFactory):
    """`revisions=n` supersedes the fact until it is at version n."""

    type = "acme.note"
    content = factory.Sequence(lambda n: f"note number {n} about the washing machine")
    participant_id = None
    revisions = 1

    @classmethod
    def _write(cls, world, *, revisions, **fields):
        from facts.services import FactInput, fact_supersede, fact_write

        fact = fact_write(principal=owner(world), data=FactInput(**fields))[0]
        for version in range(1, revisions):
            content = f"{fields['content']} (revision {version + 1})"
            fact = fact_supersede(principal=owner(world), fact_id=fact.id, content=content, expect_version=version)
        return fact
