"""OpenAI Agents SDK: a `Session` kept as a memoryhub conversation, and memoryhub's tools as function tools.

    from agents import Agent, Runner
    from memoryhub.client import AsyncMemoryHub
    from memoryhub.integrations.openai_agents import MemoryHubSession, memory_tools

    hub = AsyncMemoryHub()
    session = await MemoryHubSession.start(hub, agent="acme.desk", participant_id="end-7")
    agent = Agent(name="desk", tools=memory_tools(MemoryHub(), agent="acme.desk", participant_id="end-7"))
    await Runner.run(agent, "Call me in the mornings", session=session)
    # later, anywhere: MemoryHubSession(hub, session.session_id) resumes it

The session's id is the conversation's. Items map onto messages: a user message with text
is a `user` message, an assistant message an `agent` one (their text is what memoryhub
recalls later); every other item (tool calls and their outputs, reasoning, images) is a
`tool` message holding the item as JSON, so a resumed session gets back what it sent.
Conversations keep every message: `pop_item` is refused (NotImplementedError), and
`clear_session` unregisters the conversation and carries on in a new one (a new
`session_id`).

`memory_tools` are the tools memoryhub's MCP server offers (memory_context,
memory_remember for an agent that remembers, memory_recall, and the working-memory
memory_save / memory_search / memory_delete / memory_list / memory_query), as
`FunctionTool`s whose calls go through memoryhub.mcp_tools.call_tool and the REST API: a
refused call comes back to the model as the API's problem detail.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import FunctionTool
from agents.memory import SessionSettings

from memoryhub.client import AsyncMemoryHub, MemoryHub
from memoryhub.mcp_tools import Binding, ClientBackend, call_tool, list_tools

__all__ = ["MemoryHubSession", "memory_tools"]


def _text(content: Any) -> str | None:
    """The text of a message's content: a string, or parts that are all text; else None."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(
        isinstance(part, dict) and part.get("type") in ("input_text", "output_text") and isinstance(part.get("text"), str)
        for part in content
    ):
        return "".join(part["text"] for part in content)
    return None


def to_message(item: dict[str, Any]) -> dict[str, str]:
    """One session item as a conversation message."""
    role = item.get("role")
    if item.get("type", "message") == "message" and role in ("user", "assistant"):
        text = _text(item.get("content"))
        if text is not None:
            return {"role": "user" if role == "user" else "agent", "text": text}
    return {"role": "tool", "text": json.dumps(item, ensure_ascii=False, separators=(",", ":"))}


def to_item(message: dict[str, Any]) -> dict[str, Any] | None:
    """A conversation message as a session item (None: a tool message no session wrote)."""
    if message["role"] == "user":
        return {"role": "user", "content": message["text"]}
    if message["role"] == "agent":
        return {"role": "assistant", "content": message["text"]}
    try:
        item = json.loads(message["text"])
    except ValueError:
        return None
    return item if isinstance(item, dict) else None


class MemoryHubSession:
    """An Agents SDK session (the `Session` protocol) kept as one memoryhub conversation."""

    session_settings: SessionSettings | None = None

    def __init__(self, hub: AsyncMemoryHub, session_id: str, *, session_settings: SessionSettings | None = None) -> None:
        self.hub, self.session_id, self.session_settings = hub, session_id, session_settings
        self._lock = asyncio.Lock()

    @classmethod
    async def start(
        cls, hub: AsyncMemoryHub, *, agent: str, participant_id: str | None = None, project_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> MemoryHubSession:
        """A new session: a new conversation of `agent` (for `participant_id`)."""
        conversation = await hub.conversations_create(agent, participant_id=participant_id, project_id=project_id)
        return cls(hub, conversation["id"], session_settings=session_settings)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        items = [item async for message in self.hub.messages_iter(self.session_id) if (item := to_item(message)) is not None]
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        if items:
            async with self._lock:
                await self.hub.messages_append(self.session_id, [to_message(dict(item)) for item in items])

    async def pop_item(self) -> Any:
        raise NotImplementedError("memoryhub conversations keep every message: an item cannot be taken back")

    async def clear_session(self) -> None:
        """Unregister the conversation (never recalled again) and go on in a new one: `session_id` changes."""
        async with self._lock:
            old = await self.hub.conversations_get(self.session_id)
            await self.hub.conversations_delete(self.session_id)
            fresh = await self.hub.conversations_create(old["agent"], participant_id=old["participantId"], project_id=old["projectId"])
            self.session_id = fresh["id"]


def memory_tools(
    hub: MemoryHub, *, agent: str | None = None, namespace: str | None = None, participant_id: str | None = None,
    conversation_id: str | None = None, project_id: str | None = None,
) -> list[FunctionTool]:
    """memoryhub's tools for this binding (who and what they are for; the model only fills in arguments)."""
    backend = ClientBackend(hub)
    binding = Binding(agent=agent, participant_id=participant_id, conversation_id=conversation_id, project_id=project_id,
                      **({"namespace": namespace} if namespace else {}))

    def tool(definition: dict[str, Any]) -> FunctionTool:
        name = definition["name"]

        async def invoke(context: Any, arguments: str) -> str:
            parsed = json.loads(arguments) if arguments else {}
            return (await asyncio.to_thread(call_tool, backend, binding, name, parsed)).text

        return FunctionTool(name=name, description=definition["description"], params_json_schema=definition["parameters"],
                            on_invoke_tool=invoke, strict_json_schema=False)

    return [tool(definition) for definition in list_tools(backend, binding)]
