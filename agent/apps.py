"""agent: agent declarations, the per-turn context, the remember tool, conversations and their messages.

The package is `agent`, not `agents`: `agents` is the import name of the OpenAI Agents SDK,
which memoryhub.integrations.openai_agents adapts to.
"""

from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "agent"
    # The tables (retrieval_agent, retrieval_conversation, retrieval_message, …) and their
    # migrations were made under the label `retrieval` when these models lived there; the
    # label stays, so the move needed no data migration.
    label = "retrieval"
    verbose_name = "Agents and conversations"

    def ready(self) -> None:
        from agent import wiring  # noqa: F401  (what the layers below ask of conversations)
