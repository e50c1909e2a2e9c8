#!/usr/bin/env python3
"""An agent loop with memory: memoryhub context -> a chat model -> tool calls -> remember.

Runs against any OpenAI-compatible chat endpoint (OpenAI, Ollama, vLLM, llama.cpp's
server, LM Studio) and a memoryhub server:

    export MEMORYHUB_URL=http://127.0.0.1:8000 MEMORYHUB_API_KEY=mh_...
    export OPENAI_BASE_URL=http://127.0.0.1:11434/v1       # Ollama; OPENAI_API_KEY if it needs one
    python docs/examples/agent_loop.py --agent acme.desk --participant end-7 --model llama3.2 \
        "Please call me in the mornings, never email."

With no message it reads one per line from stdin (a small chat). Each turn:

1. `POST /v1/agents/{agent}/context` -> the messages to send (instructions, the <memory>
   block, the user's message) and `GET /v1/agents/{agent}/tools?format=openai` -> the tools.
2. The model is asked; when it calls tools, each call is run through memoryhub.client
   (`memory_remember` -> `/remember`; with --namespace the memory_* working-memory tools
   -> `/v1/workspaces/{ns}/...`), its result (or the API's error detail, which says what to
   fix) goes back as a `tool` message, and the model is asked again, up to --max-rounds.
3. The answer is printed; with --keep the turn's messages are kept in a conversation, so
   later turns can recall what the user said.

It needs only httpx and memoryhub.client. docs/agent-loop.md explains it step by step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from memoryhub.client import MemoryHub, MemoryHubError

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"  # Ollama's OpenAI-compatible endpoint
MAX_ROUNDS = 5


@dataclass
class Turn:
    """What one turn did: the answer, every tool call with its result, the rounds it took."""

    answer: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, arguments, result, error}
    rounds: int = 0
    conversation_id: str | None = None


def chat(http: httpx.Client, base_url: str, model: str, messages: list[dict], tools: list[dict]) -> dict:
    """One Chat Completions request; the assistant's message."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        body["tools"] = tools
    response = http.post(f"{base_url.rstrip('/')}/chat/completions", json=body)
    if response.status_code >= 400:
        raise RuntimeError(f"the chat model answered {response.status_code}: {response.text[:300]}")
    return response.json()["choices"][0]["message"]


def run_tool(hub: MemoryHub, agent: str, name: str, arguments: dict, *, call_id: str, run_id: str,
             participant_id: str | None, conversation_id: str | None, namespace: str | None) -> str:
    """Run one tool call through the client; the text the model gets back. A refused call
    answers the API's `detail`, which tells the model what to send instead."""
    if name == "memory_remember":
        result = hub.agent_remember(agent, arguments, participant_id=participant_id, conversation_id=conversation_id,
                                    run_id=run_id, tool_call_id=call_id)
        return json.dumps(result)
    if namespace is not None and name == "memory_save":
        return hub.memory_save(namespace, **arguments)["text"]
    if namespace is not None and name == "memory_search":
        return hub.memory_search(namespace, **arguments)["text"]
    if namespace is not None and name == "memory_list":
        return hub.memory_list(namespace, **arguments)["text"]
    if namespace is not None and name == "memory_delete":
        return hub.memory_delete(namespace, **arguments)["text"]
    if namespace is not None and name == "memory_query":
        return json.dumps(hub.memory_query(namespace, **arguments))
    return f"There is no tool {name!r} here."


def run_turn(hub: MemoryHub, http: httpx.Client, *, base_url: str, model: str, agent: str, user_message: str,
             participant_id: str | None = None, conversation_id: str | None = None, namespace: str | None = None,
             max_rounds: int = MAX_ROUNDS, keep: bool = False, log: Any = None) -> Turn:
    """One user message, answered with memory."""
    run_id = f"run-{uuid.uuid4()}"
    context = hub.agent_context(agent, user_message, participant_id=participant_id, conversation_id=conversation_id, run_id=run_id)
    for warning in context["warnings"]:
        _log(log, f"memoryhub: {warning['code']}: {warning['message']}")
    messages: list[dict[str, Any]] = [dict(m) for m in context["messages"]]
    tools = hub.agent_tools(agent, participant_id=participant_id, conversation_id=conversation_id,
                            include="working-memory" if namespace else None, format="openai")
    turn = Turn(answer=None, conversation_id=conversation_id)
    while turn.rounds < max_rounds:
        turn.rounds += 1
        reply = chat(http, base_url, model, messages, tools)
        calls = reply.get("tool_calls") or []
        if not calls:
            turn.answer = reply.get("content") or ""
            messages.append({"role": "assistant", "content": turn.answer})
            break
        messages.append({"role": "assistant", "content": reply.get("content"), "tool_calls": calls})
        for call in calls:
            name, raw = call["function"]["name"], call["function"].get("arguments") or "{}"
            record: dict[str, Any] = {"id": call["id"], "name": name, "arguments": raw, "result": None, "error": None}
            try:
                arguments = json.loads(raw)
                if not isinstance(arguments, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                output = f"Error: the arguments are not a JSON object ({exc}); call {name} again with one."
                record["error"] = output
            else:
                record["arguments"] = arguments
                try:
                    output = run_tool(hub, agent, name, arguments, call_id=call["id"], run_id=run_id,
                                      participant_id=participant_id, conversation_id=conversation_id, namespace=namespace)
                    record["result"] = output
                except MemoryHubError as error:
                    output = f"Error: {error.detail}"
                    record["error"] = output
                except TypeError as error:  # arguments the client method does not take
                    output = f"Error: {error}; call {name} again with the arguments its schema lists."
                    record["error"] = output
            _log(log, f"tool {name}({record['arguments']}) -> {output}")
            turn.tool_calls.append(record)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    if keep:
        if turn.conversation_id is None:
            turn.conversation_id = hub.conversations_create(agent, participant_id=participant_id)["id"]
        said = [{"role": "user", "text": user_message}]
        if turn.answer:
            said.append({"role": "agent", "text": turn.answer})
        hub.messages_append(turn.conversation_id, said)
    return turn


def _log(log: Any, line: str) -> None:
    if log is not None:
        log.write(line + "\n")
        log.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An agent loop with memoryhub memory and an OpenAI-compatible chat model.")
    parser.add_argument("message", nargs="?", help="the user's message (default: read one per line from stdin)")
    parser.add_argument("--agent", required=True, help="the agent's slug, e.g. acme.desk (declare it first: docs/agent-loop.md)")
    parser.add_argument("--participant", help="the end user's participantId (the agent remembers per person)")
    parser.add_argument("--conversation", help="an existing conversation id to continue")
    parser.add_argument("--namespace", help="also offer the memory_* working-memory tools, on this namespace")
    parser.add_argument("--keep", action="store_true", help="keep the turns in a conversation (for recall later)")
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "llama3.2"), help="model name (default $OPENAI_MODEL or llama3.2)")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", DEFAULT_BASE_URL), help="OpenAI-compatible base URL (default $OPENAI_BASE_URL or Ollama's)")
    parser.add_argument("--max-rounds", type=int, default=MAX_ROUNDS, help="model calls per turn at most")
    parser.add_argument("--verbose", "-v", action="store_true", help="show warnings and tool calls on stderr")
    args = parser.parse_args(argv)

    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"} if os.environ.get("OPENAI_API_KEY") else {}
    log = sys.stderr if args.verbose else None
    messages = [args.message] if args.message else (line.strip() for line in sys.stdin)
    conversation = args.conversation
    try:
        with MemoryHub() as hub, httpx.Client(headers=headers, timeout=120) as http:
            for message in messages:
                if not message:
                    continue
                turn = run_turn(hub, http, base_url=args.base_url, model=args.model, agent=args.agent, user_message=message,
                                participant_id=args.participant, conversation_id=conversation, namespace=args.namespace,
                                max_rounds=args.max_rounds, keep=args.keep, log=log)
                conversation = turn.conversation_id
                print(turn.answer if turn.answer is not None else f"(no answer after {turn.rounds} rounds)", flush=True)
    except MemoryHubError as error:
        print(f"agent_loop: memoryhub: {error}", file=sys.stderr)
        return 1
    except (httpx.HTTPError, RuntimeError) as error:
        print(f"agent_loop: chat model: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
