"""factory_boy factories for the rows tests need in bulk, made through the services (so every
row is what the API would have written: hashes, revisions, search vectors, scopes).

    FactFactory.create_batch(20, world=world, participant_id="end-7")

One module per concern; every name is re-exported here, so `from tests.factories import X` works.
"""

from tests.factories.accounts import ApiKeyFactory, MemberFactory, owner
from tests.factories.agent import AgentFactory, ConversationFactory
from tests.factories.approvals import PendingFactFactory
from tests.factories.facts import FactFactory
from tests.factories.workspaces import WorkspaceEntryFactory, WorkspaceTasksFactory

__all__ = [
    "AgentFactory", "ApiKeyFactory", "ConversationFactory", "FactFactory", "MemberFactory", "PendingFactFactory",
    "WorkspaceEntryFactory", "WorkspaceTasksFactory", "owner",
]
