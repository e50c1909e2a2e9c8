"""Claude's memory tool (`memory_20250818`) with memoryhub as its backend.

    from anthropic import Anthropic
    from memoryhub.client import MemoryHub
    from memoryhub.integrations.claude import MemoryHubMemoryTool

    hub = MemoryHub()                                   # MEMORYHUB_URL, MEMORYHUB_API_KEY
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-5-5", max_tokens=1024, messages=[...],
        tools=[MemoryHubMemoryTool(hub, "end-7")],      # one person's /memories
    )

`/memories` is that person's (or `namespace:NAME`'s) MEMORY.md folder in memoryhub: each
command is `POST /v1/memory-tool/{who}` (profiles.memory_tool does the work), so every edit is
a fact revision, instruction-like lines wait for approval, and the index keeps to 200 lines.
The classes subclass the SDK's `BetaAbstractMemoryTool` / `BetaAsyncAbstractMemoryTool`; a
refused command raises the SDK's `ToolError` with the text the model is shown.
"""

from __future__ import annotations

from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError

from memoryhub.client import AsyncMemoryHub, MemoryHub, MemoryHubError

__all__ = ["AsyncMemoryHubMemoryTool", "MemoryHubMemoryTool"]


def _input(command: Any) -> dict[str, Any]:
    """The command as the model sent it (the SDK's typed model, or a plain dict)."""
    if isinstance(command, dict):
        return dict(command)
    return command.model_dump(exclude_none=True)


def _refused(error: MemoryHubError) -> ToolError:
    if error.status == 0:  # no answer at all: not the model's to fix
        raise error
    return ToolError(error.detail)


class MemoryHubMemoryTool(BetaAbstractMemoryTool):
    """The memory tool on memoryhub: `who` is a participant id, or `namespace:NAME`."""

    def __init__(self, hub: MemoryHub, who: str, *, project_id: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.hub, self.who, self.project_id = hub, who, project_id

    def execute(self, command: Any) -> str:
        try:
            return self.hub.memory_tool(self.who, _input(command), project_id=self.project_id)["text"]
        except MemoryHubError as error:
            raise _refused(error) from None

    # The SDK's abstract methods; each is one call of the same endpoint.
    def view(self, command: Any) -> str:
        return self.execute(command)

    create = str_replace = insert = delete = rename = view


class AsyncMemoryHubMemoryTool(BetaAsyncAbstractMemoryTool):
    """MemoryHubMemoryTool for the async client (`AsyncAnthropic`, `AsyncMemoryHub`)."""

    def __init__(self, hub: AsyncMemoryHub, who: str, *, project_id: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.hub, self.who, self.project_id = hub, who, project_id

    async def execute(self, command: Any) -> str:
        try:
            return (await self.hub.memory_tool(self.who, _input(command), project_id=self.project_id))["text"]
        except MemoryHubError as error:
            raise _refused(error) from None

    async def view(self, command: Any) -> str:
        return await self.execute(command)

    create = str_replace = insert = delete = rename = view
