"""A scripted OpenAI-compatible chat server on loopback, for testing agent loops without a model.

    with FakeChatServer([tool_call("memory_remember", {...}), text("Noted.")]) as chat:
        run_turn(..., base_url=chat.url)          # http://127.0.0.1:PORT/v1
        chat.requests                             # every request body, in order
        chat.calls                                # each POST's path and Authorization header

A real HTTP server (http.server, one thread per request) speaking the subset of
`POST /v1/chat/completions` an agent loop uses: `model`, `messages`, `tools` in;
`choices[0].message` with `content` or `tool_calls` out, `finish_reason`, `usage`. Each
request takes the next step of the script: an assistant message, or a function of the
request body that returns one (to answer from what was sent). Past the script's end,
or on a malformed request, it answers an OpenAI-style error, so a loop that calls once
too often fails loudly. `GET /v1/models` lists the one model.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def text(content: str) -> dict[str, Any]:
    """An assistant message that answers in words (finish_reason `stop`)."""
    return {"role": "assistant", "content": content}


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1") -> dict[str, Any]:
    """An assistant message that calls one tool (finish_reason `tool_calls`); `arguments` as JSON text, as OpenAI sends them."""
    return tool_calls([(name, arguments, call_id)])


def tool_calls(calls: list[tuple[str, dict[str, Any] | str, str]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for name, args, call_id in calls
        ],
    }


class FakeChatServer:
    """Serves the script on 127.0.0.1 (a free port) while the `with` block runs."""

    route = "/v1/chat/completions"

    def __init__(self, script: list[Step], model: str = "fake-model"):
        self.script = list(script)
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.calls: list[dict[str, str | None]] = []  # per POST: path and Authorization header
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The OpenAI base URL (what OPENAI_BASE_URL takes)."""
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def remaining(self) -> int:
        return len(self.script)

    def __enter__(self) -> FakeChatServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-chat-server", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not isinstance(body.get("messages"), list) or not body["messages"] or not body.get("model"):
            return 400, _error("`model` and a non-empty `messages` list are required.", "invalid_request_error")
        with self._lock:
            self.requests.append(body)
            if not self.script:
                return 500, _error(f"The fake chat server's script is used up ({len(self.requests)} requests).", "server_error")
            step = self.script.pop(0)
            number = next(self._ids)
        message = step(body) if callable(step) else step
        return 200, self._reply(body, message, number)

    def _reply(self, body: dict[str, Any], message: dict[str, Any], number: int) -> dict[str, Any]:
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _handler(fake: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet in test output
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": fake.model, "object": "model", "owned_by": "fake"}]})
            else:
                self._send(404, _error(f"No route {self.path}.", "invalid_request_error"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            with fake._lock:
                fake.calls.append({"path": self.path, "auth": self.headers.get("Authorization")})
            if self.path.split("?")[0].rstrip("/") != fake.route:
                self._send(404, _error(f"No route {self.path}.", "invalid_request_error"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, _error("The body is not JSON.", "invalid_request_error"))
                return
            self._send(*fake._answer(body if isinstance(body, dict) else {}))

    return Handler


# --- Anthropic's Messages API (POST /v1/messages), for the Claude SDK's tool runner ---------------


def claude_tool_use(name: str, input: dict[str, Any], call_id: str = "toolu_1") -> dict[str, Any]:
    """An assistant turn that calls one tool (stop_reason `tool_use`)."""
    return {"content": [{"type": "tool_use", "id": call_id, "name": name, "input": input}]}


def claude_text(content: str) -> dict[str, Any]:
    """An assistant turn that answers in words (stop_reason `end_turn`)."""
    return {"content": [{"type": "text", "text": content}]}


class FakeClaudeServer(FakeChatServer):
    """The same scripted server speaking `POST /v1/messages`: each step is `{"content": [blocks]}`."""

    route = "/v1/messages"

    @property
    def url(self) -> str:
        """The Anthropic base URL (what `Anthropic(base_url=...)` takes)."""
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _reply(self, body: dict[str, Any], message: dict[str, Any], number: int) -> dict[str, Any]:
        blocks = message["content"]
        return {
            "id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": body["model"], "content": blocks,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
