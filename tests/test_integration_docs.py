"""docs/integrations.md: each example, exactly as written there, run as a script against a live
memoryhub and a scripted model server on loopback (no network), and what it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memoryhub.client import MemoryHub
from tests.fake_chat_server import FakeChatServer, FakeClaudeServer, claude_text, claude_tool_use, text, tool_call

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "integrations.md"
AGENT = {
    "slug": "acme.desk",
    "instructions": "You are a support desk assistant.",
    "retrieval": [{"types": ["acme.preference"], "scope": "same-user", "mode": "keyword", "match": "any", "limit": 5}],
    "memory": {"remember": {"types": ["acme.preference"], "scope": "same-user", "keepDays": 30}},
}


def examples() -> dict[str, str]:
    blocks = re.findall(r"```python\n(# example: ([\w-]+)\n.*?)```", DOC.read_text(), re.S)
    return {name: code for code, name in blocks}


@pytest.fixture
def server(live_server, tx_world):
    key = tx_world.key()
    with MemoryHub(live_server.url, key) as hub:
        hub.agents_create(AGENT)
    return live_server.url, key


def run(name: str, server, **env: str) -> str:
    url, key = server
    variables = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYHUB_", "OPENAI_", "ANTHROPIC_"))}
    variables.update(MEMORYHUB_URL=url, MEMORYHUB_API_KEY=key, OPENAI_AGENTS_DISABLE_TRACING="1", **env)
    result = subprocess.run([sys.executable, "-c", examples()[name]], capture_output=True, text=True, env=variables,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_doc_has_one_example_per_framework():
    assert sorted(examples()) == ["claude", "langchain", "langgraph", "openai-agents"]


def test_the_claude_example(server):
    path = "/memories/user-preferences.md"
    topic = "---\ntype: user\n---\n\n# User Preferences\n\n- Lives in Lisbon (since last month)\n"
    script = [
        claude_tool_use("memory", {"command": "view", "path": "/memories"}, "toolu_1"),
        claude_tool_use("memory", {"command": "create", "path": path, "file_text": topic}, "toolu_2"),
        claude_tool_use("memory", {"command": "str_replace", "path": path, "old_str": "Lisbon (since last month)",
                                   "new_str": "Lisbon, Portugal"}, "toolu_3"),
        claude_text("Saved to memory: you live in Lisbon."),
    ]
    with FakeClaudeServer(script) as model:
        out = run("claude", server, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="test-key")
        assert model.remaining == 0
    assert out == "Saved to memory: you live in Lisbon.\nv2 Lives in Lisbon, Portugal\n"


def test_the_langgraph_example(server):
    assert run("langgraph", server) == (
        "ann -> ann drinks tea\nben -> ben drinks coffee\nann -> ann drinks it green; ann drinks tea\n")


def test_the_langchain_example(server):
    out = run("langchain", server).splitlines()
    assert out[0] == "['Please phone me in the mornings.', 'Noted: mornings, by phone.']"
    assert "conversations | Please phone me in the mornings." in out[1:]


def test_the_openai_agents_example(server):
    def answer(body):
        earlier = any("Phone me in the mornings" in (m.get("content") or "") for m in body["messages"][:-1])
        return text("You asked me to phone you in the mornings." if earlier else "I do not know.")

    remember = {"type": "acme.preference", "content": "Prefers a phone call in the morning"}
    with FakeChatServer([tool_call("memory_remember", remember), text("Noted: mornings, by phone."), answer]) as model:
        out = run("openai-agents", server, OPENAI_BASE_URL=model.url, OPENAI_API_KEY="test-key")
        assert model.remaining == 0
    assert out == "Noted: mornings, by phone.\nYou asked me to phone you in the mornings.\n"
