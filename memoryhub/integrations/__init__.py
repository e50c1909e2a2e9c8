"""memoryhub as the memory backend of the agent frameworks teams already run, one line each.

| framework | the line | extra |
|---|---|---|
| Claude's memory tool (Anthropic SDK) | `tools=[MemoryHubMemoryTool(hub, "end-7")]` (memoryhub.integrations.claude) | `anthropic` |
| LangGraph | `graph.compile(store=MemoryHubStore(hub))` (memoryhub.integrations.langgraph) | `langgraph` |
| LangChain | `MemoryHubRetriever(hub=hub, intents=[...])`, `MemoryHubChatMessageHistory(hub, agent=...)` (memoryhub.integrations.langchain) | `langchain` |
| OpenAI Agents SDK | `Runner.run(agent, text, session=MemoryHubSession(hub, agent="…"))`, `tools=memory_tools(hub, ...)` (memoryhub.integrations.openai_agents) | `openai-agents` |

Each adapter runs in the agent's process and talks to a live memoryhub over HTTP through
memoryhub.client (`hub` is a `MemoryHub`); none imports Django. Each module imports its
framework, installed with `pip install 'memoryhub[EXTRA]'`; this package imports none.
docs/integrations.md has a runnable example per framework.
"""
