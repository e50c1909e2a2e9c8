"""LangChain: a retriever over `/v1/retrieve` and a chat-message history over conversations.

    from memoryhub.client import MemoryHub
    from memoryhub.integrations.langchain import MemoryHubChatMessageHistory, MemoryHubRetriever

    hub = MemoryHub()
    retriever = MemoryHubRetriever(hub=hub, participant_id="end-7",
                                   intents=[{"types": ["acme.preference"], "scope": "same-user"}])
    docs = retriever.invoke("How should we contact them?")
    history = MemoryHubChatMessageHistory(hub, agent="acme.desk", participant_id="end-7")

The retriever runs the intents as `/v1/retrieve` does (types, scope, mode, limit, recall of
earlier conversations with `"source": "conversations"`): each fact is a Document whose text
is the fact's, recalled messages follow the facts. The history appends to one memoryhub
conversation (human ↔ `user`, AI ↔ `agent`, tool ↔ `tool`); its messages are what memoryhub
recalls later. Conversations keep every message: `clear()` unregisters this one (never
recalled again) and carries on in a new conversation of the same agent and person.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from facts.content import searchable_text  # Django-free: the text memoryhub searches a content by
from memoryhub.client import MemoryHub

__all__ = ["MemoryHubChatMessageHistory", "MemoryHubRetriever"]


class MemoryHubRetriever(BaseRetriever):
    """Documents for a question from memoryhub's retrieval (facts, then recalled messages)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    hub: MemoryHub
    intents: list[dict[str, Any]]
    participant_id: str | None = None
    conversation_id: str | None = None
    segment: str | None = None
    agent: str | None = None
    project_id: str | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        result = self.hub.retrieve(
            query, self.intents, participant_id=self.participant_id, conversation_id=self.conversation_id,
            segment=self.segment, agent=self.agent, project_id=self.project_id,
        )
        documents = [
            Document(
                page_content=searchable_text(hit["fact"]["content"]), id=hit["fact"]["id"],
                metadata={"source": "facts", "factId": hit["fact"]["id"], "type": hit["fact"]["type"], "score": hit["score"],
                          "ranks": hit["ranks"], "version": hit["fact"]["version"], "scope": hit["fact"]["scope"]},
            )
            for hit in result["facts"]
        ]
        for hit in result["recalled"]:
            message = hit["message"]
            documents.append(Document(
                page_content=message["text"],
                metadata={"source": "conversations", "conversationId": message["conversationId"], "sequence": message["sequence"],
                          "role": message["role"], "score": hit["score"], "ranks": hit["ranks"]},
            ))
        return documents


_ROLES = {"human": "user", "ai": "agent", "tool": "tool"}


class MemoryHubChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history kept as one memoryhub conversation.

    Give `conversation_id` to resume one, or `agent` (and `participant_id`) to start one.
    """

    def __init__(
        self, hub: MemoryHub, *, conversation_id: str | None = None, agent: str | None = None,
        participant_id: str | None = None, project_id: str | None = None,
    ) -> None:
        self.hub = hub
        if conversation_id is None:
            if agent is None:
                raise ValueError("give conversation_id (to resume one) or agent (to start one)")
            conversation_id = hub.conversations_create(agent, participant_id=participant_id, project_id=project_id)["id"]
        conversation = hub.conversations_get(conversation_id)
        self.conversation_id = conversation["id"]
        self.agent, self.participant_id, self.project_id = conversation["agent"], conversation["participantId"], conversation["projectId"]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        out: list[BaseMessage] = []
        for message in self.hub.messages_iter(self.conversation_id):
            if message["role"] == "user":
                out.append(HumanMessage(message["text"]))
            elif message["role"] == "agent":
                out.append(AIMessage(message["text"]))
            else:
                out.append(ToolMessage(message["text"], tool_call_id=message["externalId"] or ""))
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        batch = []
        for message in messages:
            role = _ROLES.get(message.type)
            if role is None:
                raise ValueError(f"a memoryhub conversation keeps user, agent and tool messages, not {message.type!r} ones")
            item: dict[str, Any] = {"role": role, "text": message.text}
            if isinstance(message, ToolMessage) and message.tool_call_id:
                item["externalId"] = message.tool_call_id
            batch.append(item)
        if batch:
            self.hub.messages_append(self.conversation_id, batch)

    def clear(self) -> None:
        """Unregister this conversation (never recalled again) and go on in a new, empty one."""
        self.hub.conversations_delete(self.conversation_id)
        fresh = self.hub.conversations_create(self.agent, participant_id=self.participant_id, project_id=self.project_id)
        self.conversation_id = fresh["id"]
