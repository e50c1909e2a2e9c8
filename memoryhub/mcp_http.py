"""The MCP streamable HTTP transport at `/mcp`, served by the WSGI service itself.

memoryhub is a WSGI application (gunicorn's sync workers in production, Django's server
under `make run`). The MCP SDK's HTTP transport is ASGI. We join them without a second
server, without an ASGI entry point and without sticky sessions, by running the SDK in
its **stateless, JSON-response** mode (what the MCP spec allows a server that keeps no
session: every POST carries one JSON-RPC message and gets one JSON answer, GET is `405`):

1. `McpView` is an `ApiView`, so `/mcp` authenticates exactly as the REST API does
   (`Authorization: Bearer <key>`, `401` problem+json for none or a bad key), counts
   against the key's rate limit, and enters the key's tenant scope.
2. The POST's bytes are handed, as one ASGI request, to a `StreamableHTTPSessionManager`
   (stateless, `json_response=True`) made for this request, under
   `asgiref.sync.async_to_sync`. Its answer (status, headers, body) becomes the Django
   response. Both protocol eras work: the handshake era (initialize, then calls; the
   `Mcp-Session-Id` is simply never issued) and the 2026-07-28 per-request era.
3. The tool handlers run the services with `sync_to_async(thread_sensitive=True)`, which
   asgiref runs back on the request's own thread: the same database connection, the same
   scope, as a REST view. `ServiceBackend` calls the services the REST views call, with
   the same input serializers, so validation messages and scoping are the API's own.

Because no state outlives a request, `/mcp` scales like the rest of the API: any web
process answers any call. What the stateless mode gives up is the server-to-client
channel (sampling, elicitation, list-changed notifications), which memoryhub's tools do
not use.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

import anyio
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema

from accounts.services import Principal
from agent import services as agents
from agent.retrieve import retrieve
from agent.views import ContextInSerializer, JsonOnlyNegotiation, RememberInSerializer, context_to_dict
from core import scoping
from core.api import ApiView, validated
from core.errors import Forbidden, ServiceUnavailable, ValidationFailed, as_application_error, problem_body
from memoryhub.mcp_tools import DEFAULT_NAMESPACE, QUERY, Binding, ToolError, build_server
from retrieval.serializers import RetrieveInSerializer
from workspaces import services as workspaces

SCOPE_KEY = "memoryhub.mcp"  # the ASGI scope entry that carries (backend, binding) to the tool handlers
FORWARDED_HEADERS_DROPPED = {"authorization", "cookie"}  # checked here; the SDK has no use for them


# --- the services, as the REST views call them ---------------------------------------------------


def _tool_error(exc: Exception) -> ToolError | None:
    """The problem the REST API would answer for this exception (same mapping, same detail)."""
    error = as_application_error(exc)
    if error is None and isinstance(exc, (OperationalError, InterfaceError)):
        error = ServiceUnavailable("The database is unavailable; retry shortly.")
    if error is None:
        return None
    return ToolError(error.detail, status=error.status, code=error.code,
                     problem=problem_body(error.status, error.code, error.title, error.detail, error.extra))


class ServiceBackend:
    """Answers tool calls with the services the REST views call, as `principal` (the key)."""

    def __init__(self, principal: Principal):
        self.principal = principal

    def _run(self, fn, *args, **kwargs):
        with scoping.scope(tenant_id=self.principal.tenant_id, project_id=self.principal.project_id):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                error = _tool_error(exc)
                if error is None:
                    raise
                raise error from None

    def participant(self, binding: Binding) -> str | None:
        return binding.participant_id or self.principal.participant_id

    def turn_tools(self, binding: Binding) -> list[dict]:
        def run():
            turn = agents.turn_for(principal=self.principal, slug=binding.agent, data={
                "projectId": binding.project_id, "participantId": binding.participant_id, "conversationId": binding.conversation_id})
            return agents.turn_tools(turn)
        return self._run(run)

    def context(self, binding: Binding, body: dict) -> dict:
        def run():
            return context_to_dict(agents.context(principal=self.principal, slug=binding.agent, data=validated(ContextInSerializer, body)))
        return self._run(run)

    def remember(self, binding: Binding, body: dict) -> dict:
        def run():
            result, _ = agents.remember(principal=self.principal, slug=binding.agent, data=validated(RememberInSerializer, body))
            return result
        return self._run(run)

    def retrieve(self, binding: Binding, body: dict) -> dict:
        return self._run(lambda: retrieve(principal=self.principal, data=validated(RetrieveInSerializer, body)))

    def _space(self, binding: Binding) -> workspaces.Space:
        return workspaces.workspace(principal=self.principal, namespace=binding.namespace, project_id=binding.project_id)

    def memory_save(self, binding: Binding, body: dict) -> dict:
        def run():
            return workspaces.memory_save(
                space=self._space(binding), key=body.get("key"), value=body.get("value"), type=body.get("type"),
                references=body.get("references"),
            )
        return self._run(run)

    def memory_search(self, binding: Binding, query: str) -> dict:
        def run():
            found, key_of, text = workspaces.memory_search(space=self._space(binding), query=query)
            data = [workspaces.entry_to_dict(f, key_of) for f in found]
            return {"data": data, "count": len(data), "text": text}
        return self._run(run)

    def memory_keys(self, binding: Binding) -> dict:
        def run():
            keys, text = workspaces.memory_keys(space=self._space(binding))
            return {"keys": keys, "text": text}
        return self._run(run)

    def memory_delete(self, binding: Binding, key: str) -> dict:
        return self._run(lambda: {"key": key, "text": workspaces.memory_delete(space=self._space(binding), key=key)})

    def memory_query(self, binding: Binding, body: dict) -> dict:
        return self._run(lambda: workspaces.memory_query_run(space=self._space(binding), query=body.get("query"), limit=body.get("limit")))


# --- the bridge: one Django request, one ASGI exchange with the SDK ----------------------------------


def _resolve(ctx: Any) -> tuple[ServiceBackend, Binding]:
    return ctx.request.scope[SCOPE_KEY]


async def _in_request_thread(fn):
    # thread_sensitive: asgiref runs it on the thread that called async_to_sync, the
    # request's own, where the request's database connection and tenant scope live.
    return await sync_to_async(fn, thread_sensitive=True)()


_server = None


def mcp_server():
    """The one low-level MCP server of this process (it keeps no per-connection state)."""
    global _server
    if _server is None:
        _server = build_server(_resolve, _in_request_thread)
    return _server


async def _exchange(scope: dict, body: bytes) -> list[dict]:
    """Serve one POST through the SDK's stateless JSON transport; the ASGI messages it sent back."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    # A manager per request: stateless mode keeps nothing between requests, and a
    # manager's run() can be entered only once. Host and Origin are checked by Django
    # (ALLOWED_HOSTS) and by McpView, so the SDK's own DNS-rebinding check stays off.
    manager = StreamableHTTPSessionManager(app=mcp_server(), json_response=True, stateless=True)
    sent: list[dict] = []
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()  # the client stays connected until the answer is out
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(message: dict) -> None:
        sent.append(message)

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return sent


def _asgi_scope(request, body: bytes, backend: ServiceBackend, binding: Binding) -> dict:
    meta = request.META
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in request.headers.items()
        if name.lower() not in FORWARDED_HEADERS_DROPPED
    ]
    if not any(name == b"content-length" for name, _ in headers):
        headers.append((b"content-length", str(len(body)).encode()))
    try:
        port = int(meta.get("SERVER_PORT") or 0)
    except ValueError:
        port = 0
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": request.method, "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(),
        "root_path": "", "query_string": meta.get("QUERY_STRING", "").encode("latin-1"), "headers": headers,
        "server": (meta.get("SERVER_NAME", ""), port), "client": (meta.get("REMOTE_ADDR", ""), 0),
        SCOPE_KEY: (backend, binding),
    }


def _binding(params) -> Binding:
    """The connection's binding from the /mcp URL's query (agent, namespace, participantId, conversationId, projectId)."""
    unknown = sorted(set(params) - set(QUERY.values()))
    if unknown:
        message = f"{unknown[0]} is not an /mcp option; the URL takes {', '.join(QUERY.values())}"
        raise ValidationFailed(message, errors={unknown[0]: ["not an /mcp option"]})
    values = {name: (params.get(wire) or None) for name, wire in QUERY.items()}
    for name in ("conversation_id", "project_id"):
        if values[name] is not None:
            try:
                uuid.UUID(values[name])
            except ValueError:
                raise ValidationFailed(f"{QUERY[name]} must be a UUID", errors={QUERY[name]: ["a UUID"]}) from None
    return Binding(
        agent=values["agent"], namespace=values["namespace"] or DEFAULT_NAMESPACE, participant_id=values["participant_id"],
        conversation_id=values["conversation_id"], project_id=values["project_id"],
    )


def _check_origin(request) -> None:
    """A browser's cross-origin POST is refused (the MCP spec asks servers to check Origin)."""
    origin = request.headers.get("Origin")
    if not origin:
        return
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return
    if urlsplit(origin).netloc != request.get_host():
        raise Forbidden("Cross-origin requests to /mcp are refused; an MCP client sends no Origin (or its own host's).")


class McpView(ApiView):
    """`POST /mcp`: the MCP streamable HTTP transport (stateless, JSON answers)."""

    idempotent_methods = frozenset()  # JSON-RPC has its own ids; tools/call is not replayed from storage
    content_negotiation_class = JsonOnlyNegotiation  # MCP clients accept JSON and SSE; we answer JSON

    @extend_schema(exclude=True)
    def post(self, request):
        _check_origin(request)
        binding = _binding(request.query_params)
        body = request.body
        sent = async_to_sync(_exchange)(_asgi_scope(request, body, ServiceBackend(self.principal), binding), body)
        start = next((m for m in sent if m["type"] == "http.response.start"), None)
        if start is None:  # pragma: no cover (the SDK always answers)
            raise ServiceUnavailable("The MCP transport sent no answer; retry.")
        response = HttpResponse(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"), status=start["status"])
        for name, value in start.get("headers", []):
            name = name.decode("latin-1")
            if name.lower() != "content-length":
                response[name] = value.decode("latin-1")
        return response
