"""A typed Python client for the memoryhub API v1 (see API.md), synchronous and async.

    from memoryhub.client import MemoryHub, MemoryHubError

    with MemoryHub() as hub:                      # MEMORYHUB_URL, MEMORYHUB_API_KEY
        fact = hub.facts_write({"type": "acme.note", "content": {"text": "…"},
                                "scope": {"participantId": "end-7"}})
        fact = hub.facts_supersede(fact["id"], "Prefers phone", expect_version=fact["version"])
        for f in hub.facts_iter(type="acme.note"):
            ...

Every endpoint of docs/api.md has a method, named after it (`agent_context`,
`agent_remember`, `retrieve`, `conversations_create`, `memory_save` …); answers are
TypedDicts as on the wire (camelCase). `request()` reaches any endpoint without one.
`AsyncMemoryHub` (alias `AsyncClient`; `Client` is `MemoryHub`) is the same client for
asyncio, on httpx.AsyncClient:

    async with AsyncMemoryHub() as hub:
        context = await hub.agent_context("acme.desk", "How will you contact me?", participant_id="end-7")

Every non-2xx answer raises `MemoryHubError` carrying the problem+json body
(`status`, `code`, `detail`, `errors`, `problem`). The module depends on httpx only: it imports
nothing from Django or the server, so scripts and the `memoryhub` CLI stay light.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Literal, NotRequired, TypedDict
from urllib.parse import quote

import httpx

__all__ = [
    "DEFAULT_URL",
    "Agent",
    "AgentInput",
    "ApiWarning",
    "AgentPage",
    "ApiKeyCreated",
    "ApiKeyInfo",
    "ApiKeyPage",
    "Approval",
    "ApprovalPage",
    "AsyncClient",
    "AsyncMemoryHub",
    "Attribution",
    "Captured",
    "ChatMessage",
    "Client",
    "Context",
    "Conversation",
    "Erasure",
    "Fact",
    "FactHit",
    "FactInput",
    "FactPage",
    "GeneratedBy",
    "Intent",
    "Me",
    "Member",
    "MemberPage",
    "MemoryBlock",
    "MemoryDeleted",
    "MemoryEntry",
    "MemoryHub",
    "MemoryHubError",
    "MemoryKeys",
    "MemorySaved",
    "MemoryToolResult",
    "MemorySearch",
    "Message",
    "MessageInput",
    "MessagePage",
    "ParticipantExport",
    "QueryResult",
    "Retention",
    "RememberResult",
    "RememberRules",
    "RetrieveResult",
    "Revision",
    "Scope",
    "ScopeInput",
    "Subject",
    "Task",
    "ToolDefinition",
]

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 30.0
USER_AGENT = "memoryhub-python/0.1"

# --- wire shapes (camelCase, as on the wire) -------------------------------------------


class ScopeInput(TypedDict, total=False):
    projectId: str | None
    participantId: str | None
    conversationId: str | None


class Subject(TypedDict):
    kind: Literal["participant", "user", "external"]
    id: str


class FactInput(TypedDict):
    """What `POST /v1/facts` takes."""

    type: str
    content: Any
    key: NotRequired[str | None]
    namespace: NotRequired[str | None]
    scope: NotRequired[ScopeInput]
    subjects: NotRequired[list[Subject] | None]
    references: NotRequired[list[str]]
    expiresAt: NotRequired[str | None]
    validFrom: NotRequired[str | None]
    validUntil: NotRequired[str | None]


class Scope(TypedDict):
    tenantId: str
    projectId: str | None
    participantId: str | None
    conversationId: str | None


class Attribution(TypedDict):
    id: str
    kind: Literal["user", "service", "agent"]
    agentVersion: NotRequired[str]


class GeneratedBy(TypedDict):
    runId: str | None
    stepId: str | None
    toolCallId: str | None


class Fact(TypedDict):
    """A fact as the API returns it."""

    id: str
    type: str
    key: str | None
    namespace: str | None
    scope: Scope
    version: int
    createdAt: str
    updatedAt: str
    content: Any
    contentHash: str
    size: int
    embeddingModel: str | None
    trust: Literal["asserted", "unverified", "verified"]
    verifiedBy: NotRequired[str | None]
    verifiedAt: NotRequired[str | None]
    attributedTo: Attribution
    generatedBy: NotRequired[GeneratedBy | None]
    subjects: list[Subject]
    references: list[str]
    validFrom: NotRequired[str | None]
    validUntil: NotRequired[str | None]
    expiresAt: str | None
    status: Literal["active", "pending", "rejected", "deleted", "expired"]


class Revision(Fact):
    """One revision of a fact (`?revision=`, `?asOf=`, `/revisions`)."""

    supersededAt: str | None
    invalidationReason: Literal["superseded", "deleted", "erased", "expired"] | None


class FactPage(TypedDict):
    data: list[Fact]
    nextCursor: str | None


class Me(TypedDict):
    apiKeyId: str
    tenantId: str
    tenant: str
    projectId: str | None
    project: str | None
    userId: str
    access: Literal["read", "write"]
    role: str | None
    participantId: str | None


class ApiWarning(TypedDict):
    """A warning beside an answer (`memory-needs-participant`, `semantic-unavailable`, …)."""

    code: str
    message: str


class Intent(TypedDict, total=False):
    """A retrieval intent (`/v1/retrieve`, agent declarations)."""

    source: Literal["facts", "conversations"]
    types: list[str]
    scope: Literal["same-conversation", "same-user", "same-segment", "same-project", "tenant"]
    mode: Literal["none", "keyword", "semantic", "both"]
    limit: int
    roles: list[Literal["user", "agent"]]
    match: Literal["all", "any"]
    fusion: Literal["rrf", "score"]
    minTrust: Literal["unverified", "asserted", "verified"]


class FactHit(TypedDict):
    fact: Fact
    ranks: dict[str, int]
    score: float
    intent: Intent


class RetrieveResult(TypedDict):
    facts: list[FactHit]
    recalled: list[dict[str, Any]]  # {ranks, score, intent, message, before?, after?, note?, anotherPerson?}
    warnings: list[ApiWarning]


class RememberRules(TypedDict, total=False):
    types: list[str]
    scope: Literal["same-user", "same-conversation", "same-project", "tenant"]
    keepDays: int


class AgentInput(TypedDict, total=False):
    """What `POST /v1/agents` and `PUT /v1/agents/{slug}` take."""

    slug: str
    version: str
    instructions: str
    retrieval: list[Intent]
    memory: dict[str, RememberRules]  # {"remember": {...}}
    projectId: str | None


class Agent(TypedDict):
    id: str
    slug: str
    version: str
    instructions: str
    retrieval: list[Intent]
    memory: dict[str, RememberRules]
    projectId: str
    createdAt: str
    updatedAt: str
    warnings: list[ApiWarning]


class AgentPage(TypedDict):
    data: list[Agent]
    nextCursor: str | None


class ChatMessage(TypedDict):
    role: Literal["system", "user"]
    content: str


class ToolDefinition(TypedDict):
    """A tool as `/tools` answers it by default; `format=openai|anthropic|mcp` reshapes it."""

    name: str
    description: str
    parameters: dict[str, Any]


class Context(TypedDict):
    """`POST /v1/agents/{slug}/context`: what to send the model before this turn."""

    messages: list[ChatMessage]
    facts: list[FactHit]
    recalled: list[dict[str, Any]]
    warnings: list[ApiWarning]
    tools: list[ToolDefinition]


class RememberResult(TypedDict):
    factId: str
    status: Literal["remembered", "pending-approval"]
    outcome: Literal["created", "superseded", "replayed"]
    version: int
    approvalId: NotRequired[str]
    hint: NotRequired[str]


class Conversation(TypedDict):
    id: str
    agent: str
    participantId: str | None
    segment: str | None
    replay: bool
    registered: bool
    projectId: str
    createdAt: str
    unregisteredAt: str | None


class MessageInput(TypedDict):
    role: Literal["user", "agent", "tool"]
    text: str
    externalId: NotRequired[str | None]
    createdAt: NotRequired[str | None]


class Message(TypedDict):
    conversationId: str
    sequence: int
    role: Literal["user", "agent", "tool"]
    text: str
    externalId: str | None
    userId: str
    createdAt: str


class MessagePage(TypedDict):
    data: list[Message]
    nextAfter: int | None


class Approval(TypedDict):
    id: str
    kind: Literal["memory-fact"]
    fact: Fact
    reasons: list[dict[str, Any]]  # {rule, match, start?, end?}
    status: Literal["pending", "approved", "rejected", "superseded"]
    requestedBy: dict[str, Any]
    origin: dict[str, Any] | None  # {conversationId, runId, stepId, toolCallId} of the remember call
    decidedBy: str | None
    decidedAt: str | None
    note: str
    createdAt: str


class ApprovalPage(TypedDict):
    data: list[Approval]
    nextCursor: str | None


class ParticipantExport(TypedDict):
    exportedAt: str
    facts: list[dict[str, Any]]  # fact + {revisions}
    conversations: list[dict[str, Any]]  # conversation + {messages}
    approvals: list[Approval]
    workspaces: list[dict[str, Any]]  # {namespace, tasks, updatedAt}: task lists a key bound to them kept
    toolCalls: list[dict[str, Any]]  # {namespace, name, args, result, createdAt}


class Member(TypedDict):
    id: int
    userId: str
    username: str
    role: Literal["viewer", "writer", "reviewer", "admin"]
    projectId: str | None  # None: a tenant-wide role
    createdAt: str


class MemberPage(TypedDict):
    data: list[Member]


class ApiKeyInfo(TypedDict):
    id: str
    prefix: str
    name: str
    userId: str
    username: str
    access: Literal["read", "write"]
    participantId: str | None
    projectId: str
    createdAt: str
    lastUsedAt: str | None
    revokedAt: str | None


class ApiKeyPage(TypedDict):
    data: list[ApiKeyInfo]


class ApiKeyCreated(ApiKeyInfo):
    apiKey: str  # shown once


class Retention(TypedDict):
    deletedFactsDays: int | None
    expiredFactsDays: int | None
    unregisteredConversationsDays: int | None


class Erasure(TypedDict):
    erasedAt: str
    erased: dict[str, int]


class MemoryEntry(TypedDict):
    """A working-memory entry (`/v1/workspaces/{ns}/...`)."""

    key: str
    value: str
    type: str
    namespace: str
    references: list[str]
    createdAt: str
    updatedAt: str
    factId: str
    version: int


class MemorySaved(TypedDict):
    entry: MemoryEntry
    outcome: Literal["created", "superseded"]
    pruned: list[str]
    text: str  # the seed's tool reply


class MemorySearch(TypedDict):
    data: list[MemoryEntry]
    count: int
    text: str


class MemoryKeys(TypedDict):
    keys: list[str]
    text: str


class MemoryDeleted(TypedDict):
    key: str
    text: str


class MemoryToolResult(TypedDict):
    """`POST /v1/memory-tool/{who}`: the tool result for the model, and lines held for approval."""

    text: str
    held: list[dict[str, Any]]  # {file, line, factId, approvalId, reasons}


class QueryResult(TypedDict):
    rows: list[Any]
    count: int
    truncated: bool


class Captured(TypedDict):
    saved: list[dict[str, Any]]  # MemoryEntry + {outcome}
    pruned: list[str]
    toolCallsRecorded: NotRequired[int]


class Task(TypedDict):
    id: str
    desc: str
    status: str
    rounds: int
    note: str


class MemoryBlock(TypedDict):
    """The `<memory>` block with its figures (`Accept: application/json`)."""

    block: str
    tokens: int
    budget: int | None
    tokenizer: str
    shown: int
    total: int
    dropped: list[str]
    resume: str | None


# --- errors ----------------------------------------------------------------------------


class MemoryHubError(Exception):
    """An error answer of the API (problem+json), or no answer at all.

    `status` is the HTTP status (0 when no answer came: connection failure, timeout, or a
    client set up without a key), `code` the API error code (`version-conflict`,
    `forbidden`, …), `detail` the human sentence, `problem` the whole body.
    """

    def __init__(self, status: int, code: str, detail: str, problem: Mapping[str, Any] | None = None):
        self.status = status
        self.code = code
        self.detail = detail
        self.problem: dict[str, Any] = dict(problem or {"status": status, "code": code, "detail": detail})
        super().__init__(f"{code} ({status}): {detail}" if status else f"{code}: {detail}")

    @property
    def errors(self) -> dict[str, list[str]]:
        """Field → messages, on validation errors."""
        return dict(self.problem.get("errors") or {})

    @classmethod
    def from_response(cls, response: httpx.Response) -> MemoryHubError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and ("code" in body or "detail" in body):
            return cls(
                status=int(body.get("status") or response.status_code),
                code=str(body.get("code") or f"http-{response.status_code}"),
                detail=str(body.get("detail") or body.get("title") or response.reason_phrase),
                problem=body,
            )
        text = response.text.strip()
        detail = f"{response.status_code} {response.reason_phrase}" + (f": {text[:200]}" if text else "")
        return cls(response.status_code, f"http-{response.status_code}", detail)


# --- the client ------------------------------------------------------------------------

_FILTER_NAMES = {
    "type": "type",
    "participant_id": "participantId",
    "conversation_id": "conversationId",
    "key": "key",
    "namespace": "namespace",
    "trust": "trust",
    "status": "status",
    "q": "q",
    "limit": "limit",
    "cursor": "cursor",
}
_CAMEL_FILTERS = frozenset(_FILTER_NAMES.values())


def _list_params(filters: Mapping[str, Any]) -> dict[str, str]:
    params: dict[str, str] = {}
    for name, value in filters.items():
        wire = _FILTER_NAMES.get(name) or (name if name in _CAMEL_FILTERS else None)
        if wire is None:
            raise TypeError(f"unknown facts filter {name!r}; use one of {', '.join(sorted(_FILTER_NAMES))}")
        if value is not None:
            params[wire] = str(value)
    return params


def _iso(value: datetime | str) -> str:
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("as_of needs a timezone-aware datetime (e.g. datetime.now(timezone.utc))")
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _params(**values: Any) -> dict[str, str] | None:
    """Query parameters, None values left out (None when nothing is left)."""
    out = {name: ("true" if value is True else "false" if value is False else str(value)) for name, value in values.items() if value is not None}
    return out or None


def _body(**values: Any) -> dict[str, Any]:
    """A JSON body, None values left out (the API's defaults apply)."""
    return {name: value for name, value in values.items() if value is not None}


def _seg(value: str) -> str:
    """One path segment, escaped (ids, slugs, keys and namespaces may hold `/`, `:` or `@`)."""
    return quote(str(value), safe="")


def _agent(slug: str, tail: str = "") -> str:
    return f"/v1/agents/{_seg(slug)}{tail}"


def _space(namespace: str, tail: str) -> str:
    return f"/v1/workspaces/{_seg(namespace)}{tail}"


def _connection(url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    """The server URL and request headers from the arguments, else MEMORYHUB_URL / MEMORYHUB_API_KEY."""
    base = (url or os.environ.get("MEMORYHUB_URL") or DEFAULT_URL).rstrip("/")
    # Every path starts with /v1: a URL that ends with it (the API's root, as people copy it)
    # would reach /v1/v1/... and answer 404. The server's address is what it means.
    base = base.removesuffix("/v1").rstrip("/") if base.endswith("/v1") else base
    key = api_key if api_key is not None else os.environ.get("MEMORYHUB_API_KEY", "")
    if not key.strip():
        raise MemoryHubError(
            0, "missing-api-key",
            "No API key: set MEMORYHUB_API_KEY (or --api-key; in Python, api_key=). `make run` prints one as "
            "`Write key:`; `.venv/bin/python manage.py apikey create --user U --project T/P` makes more.",
        )
    return base, {"Authorization": f"Bearer {key.strip()}", "Accept": "application/json", "User-Agent": USER_AGENT}


def _profile(participant_id: str, tail: str = "") -> str:
    return f"/v1/profiles/{_seg(participant_id)}{tail}"


def _messages(conversation_id: str) -> str:
    return f"/v1/conversations/{_seg(conversation_id)}/messages"


def _folder_params(participant_id: str | None) -> dict[str, str] | None:
    return {"participantId": participant_id} if participant_id else None


def _idempotency(key: str | None) -> dict[str, str] | None:
    return {"Idempotency-Key": key} if key else None


def _as_is(body: Any) -> Any:
    return body


def _nothing(body: Any) -> None:
    return None


def _field(name: str) -> Callable[[Any], Any]:
    """The answer's field `name` (`{"facts": [...]}` -> the list)."""
    return lambda body: body[name]


# --- one request builder, two senders ----------------------------------------------------
#
# Every API method is written once, in `_Api`, as a function that returns the request it makes
# (`_Call`), or the first page of a list to walk (`_Pages`). MemoryHub turns each into a method
# that sends it with httpx.Client; AsyncMemoryHub into one that awaits it on httpx.AsyncClient.
# Names, signatures, docstrings and type hints are the builder's (functools.wraps), so the two
# clients cannot drift apart (tests/test_client.py checks it).


@dataclass(frozen=True, slots=True)
class _Call:
    """One request, and `answer`: the parsed body (None for an empty answer; the text with
    `text=True`) -> what the method returns."""

    method: str
    path: str
    params: Mapping[str, str] | None = None
    json: Any = None
    headers: Mapping[str, str] | None = None
    text: bool = False
    answer: Callable[[Any], Any] = _as_is


@dataclass(frozen=True, slots=True)
class _Pages:
    """A list over pages: the first page's request, and `follow(page, params)`, the query of the
    next page (None after the last one). The items are each page's `data`."""

    call: _Call
    follow: Callable[[Any, Mapping[str, str] | None], Mapping[str, str] | None]

    def after(self, call: _Call, page: Any) -> _Call | None:
        params = self.follow(page, call.params)
        return None if params is None else replace(call, params=params)


def _by_cursor(page: Any, params: Mapping[str, str] | None) -> dict[str, str] | None:
    cursor = page.get("nextCursor")
    return {**(params or {}), "cursor": cursor} if cursor else None


def _by_after(page: Any, params: Mapping[str, str] | None) -> dict[str, str] | None:
    after = page.get("nextAfter")
    return None if after is None else {**(params or {}), "after": str(after)}


@contextmanager
def _reaching(url: str) -> Iterator[None]:
    """No answer at all (timeout, connection failure) as a MemoryHubError with status 0."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise MemoryHubError(0, "timeout", f"{url} did not answer in time ({exc.__class__.__name__}).") from exc
    except httpx.TransportError as exc:
        raise MemoryHubError(0, "connection-error", f"Cannot reach memoryhub at {url}: {exc}") from exc


def _answer(call: _Call, response: httpx.Response) -> Any:
    """What the method returns for this answer; an error answer raises MemoryHubError."""
    if response.status_code >= 400:
        raise MemoryHubError.from_response(response)
    if call.text:  # a text/plain or text/markdown answer, as it is
        return call.answer(response.text)
    if response.status_code == 204 or not response.content:
        return call.answer(None)
    try:
        body = response.json()
    except ValueError as exc:
        raise MemoryHubError(response.status_code, "bad-response", f"{call.method} {call.path} answered non-JSON.") from exc
    return call.answer(body)


def _iterator(build: Callable[..., _Pages]) -> Callable[..., _Pages]:
    """Mark a builder whose method yields the items one by one (sync or async iterator)."""
    build._iterator = True  # type: ignore[attr-defined]
    return build


class _Api:
    """The API's methods, each written once as the request it makes. A client class deriving
    from it gets every public function here as a method, made by its `_method` (or, for
    `@_iterator` ones, `_iterator_method`) out of the builder."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _Api not in cls.__bases__:  # a user's subclass of a client keeps its own overrides
            return
        for name, build in vars(_Api).items():
            if name.startswith("_") or not inspect.isfunction(build):
                continue
            method = cls._iterator_method(build) if getattr(build, "_iterator", False) else cls._method(build)
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)

    @staticmethod
    def _method(build: Callable[..., _Call | _Pages]) -> Callable[..., Any]:
        raise NotImplementedError

    @staticmethod
    def _iterator_method(build: Callable[..., _Pages]) -> Callable[..., Any]:
        raise NotImplementedError

    # -- identity -----------------------------------------------------------------------

    def me(self) -> Me:
        """What the key is: tenant, project, access, role, participant."""
        return _Call("GET", "/v1/me")

    # -- facts --------------------------------------------------------------------------

    def facts_write(self, fact: FactInput | Mapping[str, Any], idempotency_key: str | None = None) -> Fact:
        """Write one fact (`201`); the same `key` in the same scope supersedes instead."""
        return _Call("POST", "/v1/facts", json=dict(fact), headers=_idempotency(idempotency_key))

    def facts_write_batch(self, facts: list[FactInput] | list[Mapping[str, Any]], idempotency_key: str | None = None) -> list[Fact]:
        """Write up to 1,000 facts, all or nothing; returns them in order."""
        return _Call("POST", "/v1/facts/batch", json={"facts": [dict(f) for f in facts]}, headers=_idempotency(idempotency_key),
                     answer=_field("facts"))

    def facts_list(self, **filters: Any) -> FactPage:
        """One page. Filters: type, participant_id, conversation_id, key, namespace, trust,
        status (default active), q, limit (1–500), cursor (camelCase names work too)."""
        return _Call("GET", "/v1/facts", params=_list_params(filters))

    @_iterator
    def facts_iter(self, **filters: Any) -> Iterator[Fact]:
        """Every fact matching the filters, newest first, following `nextCursor`."""
        return _Pages(_Call("GET", "/v1/facts", params=_list_params(filters)), _by_cursor)

    def facts_get(self, id: str, revision: int | None = None, as_of: datetime | str | None = None) -> Fact | Revision:
        """The fact now, or its revision `revision`, or the revision current at `as_of`."""
        if revision is not None and as_of is not None:
            raise ValueError("give revision or as_of, not both")
        params: dict[str, str] = {}
        if revision is not None:
            params["revision"] = str(int(revision))
        if as_of is not None:
            params["asOf"] = _iso(as_of)
        return _Call("GET", f"/v1/facts/{id}", params=params or None)

    def facts_supersede(self, id: str, content: Any, expect_version: int | None) -> Fact:
        """Write the next revision under the same id. `expect_version` is the version you
        read; a stale one raises `version-conflict` (409), None sends none (the server
        answers `428 precondition-required`)."""
        body: dict[str, Any] = {"content": content}
        if expect_version is not None:
            body["expectVersion"] = int(expect_version)
        return _Call("POST", f"/v1/facts/{id}/supersede", json=body)

    def facts_verify(self, id: str) -> Fact:
        """Mark it verified (a reviewer or admin key); returns the new revision."""
        return _Call("POST", f"/v1/facts/{id}/verify")

    def facts_delete(self, id: str) -> None:
        """End the fact (`204`); `facts_get` then shows `status: deleted`."""
        return _Call("DELETE", f"/v1/facts/{id}", answer=_nothing)

    def facts_revisions(self, id: str) -> list[Revision]:
        """Every revision, oldest first."""
        return _Pages(_Call("GET", f"/v1/facts/{id}/revisions"), _by_cursor)

    # -- any endpoint -------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        text: bool = False,
    ) -> Any:
        """Any endpoint, e.g. one this client has no method for yet: the parsed JSON (None
        for an empty answer; the text with `text=True`). Errors raise MemoryHubError."""
        return _Call(method, path, params=params, json=json, headers=headers, text=text)

    # -- retrieval ------------------------------------------------------------------------

    def retrieve(
        self, query: str, intents: Sequence[Intent | Mapping[str, Any]], *, participant_id: str | None = None,
        conversation_id: str | None = None, segment: str | None = None, agent: str | None = None, project_id: str | None = None,
    ) -> RetrieveResult:
        """Run intents for a question: ranked facts, recalled messages, warnings."""
        body = _body(query=query, intents=[dict(i) for i in intents], participantId=participant_id,
                     conversationId=conversation_id, segment=segment, agent=agent, projectId=project_id)
        return _Call("POST", "/v1/retrieve", json=body)

    # -- agents ---------------------------------------------------------------------------

    def agents_create(self, agent: AgentInput | Mapping[str, Any]) -> Agent:
        """Declare an agent (admins); `409 agent-exists` when the slug is taken."""
        return _Call("POST", "/v1/agents", json=dict(agent))

    def agents_list(self, *, limit: int | None = None, cursor: str | None = None, project_id: str | None = None) -> AgentPage:
        """One page of the project's agents."""
        return _Call("GET", "/v1/agents", params=_params(limit=limit, cursor=cursor, projectId=project_id))

    def agents_get(self, slug: str, *, project_id: str | None = None) -> Agent:
        return _Call("GET", _agent(slug), params=_params(projectId=project_id))

    def agents_put(self, slug: str, agent: AgentInput | Mapping[str, Any]) -> Agent:
        """Replace the whole declaration of an existing agent."""
        return _Call("PUT", _agent(slug), json=dict(agent))

    def agents_delete(self, slug: str, *, project_id: str | None = None) -> None:
        return _Call("DELETE", _agent(slug), params=_params(projectId=project_id), answer=_nothing)

    def agent_context(
        self, slug: str, user_message: str, *, participant_id: str | None = None, conversation_id: str | None = None,
        run_id: str | None = None, project_id: str | None = None,
    ) -> Context:
        """What to send the model before this turn: `messages` (system, `<memory>` block, the user's
        message), the facts and recalled messages behind it, warnings, and the turn's tools."""
        body = _body(userMessage=user_message, participantId=participant_id, conversationId=conversation_id, runId=run_id, projectId=project_id)
        return _Call("POST", _agent(slug, "/context"), json=body)

    def agent_tools(
        self, slug: str, *, participant_id: str | None = None, conversation_id: str | None = None,
        include: str | Sequence[str] | None = None, format: Literal["openai", "anthropic", "mcp"] | None = None,
        project_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """The tool definitions such a turn offers; `include="working-memory"` adds the memory_* tools;
        `format` reshapes them for OpenAI, Anthropic or MCP (default `{name, description, parameters}`)."""
        params = _params(participantId=participant_id, conversationId=conversation_id, projectId=project_id, format=format,
                         include=include if include is None or isinstance(include, str) else ",".join(include))
        return _Call("GET", _agent(slug, "/tools"), params=params, answer=_field("tools"))

    def agent_remember(
        self, slug: str, arguments: Mapping[str, Any], *, participant_id: str | None = None, conversation_id: str | None = None,
        run_id: str | None = None, step_id: str | None = None, tool_call_id: str | None = None, project_id: str | None = None,
    ) -> RememberResult:
        """The model's memory_remember call, `arguments` as the model gave them. The same `run_id` +
        `tool_call_id` again is a replay (`outcome: replayed`) that writes nothing; a bad call raises
        MemoryHubError whose `detail` tells the model what to fix."""
        body = _body(arguments=dict(arguments), participantId=participant_id, conversationId=conversation_id, runId=run_id,
                     stepId=step_id, toolCallId=tool_call_id, projectId=project_id)
        return _Call("POST", _agent(slug, "/remember"), json=body)

    # -- conversations --------------------------------------------------------------------

    def conversations_create(
        self, agent: str, *, participant_id: str | None = None, segment: str | None = None, replay: bool | None = None,
        project_id: str | None = None,
    ) -> Conversation:
        body = _body(agent=agent, participantId=participant_id, segment=segment, replay=replay, projectId=project_id)
        return _Call("POST", "/v1/conversations", json=body)

    def conversations_get(self, id: str) -> Conversation:
        return _Call("GET", f"/v1/conversations/{_seg(id)}")

    def conversations_delete(self, id: str) -> None:
        """Unregister it: its messages stay readable and are never recalled again."""
        return _Call("DELETE", f"/v1/conversations/{_seg(id)}", answer=_nothing)

    def messages_append(
        self, conversation_id: str, messages: Sequence[MessageInput | Mapping[str, Any]], idempotency_key: str | None = None,
    ) -> list[Message]:
        """Append messages (sequences continue across calls)."""
        return _Call("POST", _messages(conversation_id), json={"messages": [dict(m) for m in messages]},
                     headers=_idempotency(idempotency_key), answer=_field("messages"))

    def messages_list(self, conversation_id: str, *, limit: int | None = None, after: int | None = None) -> MessagePage:
        """One page, oldest first; `after` is the previous page's `nextAfter`."""
        return _Call("GET", _messages(conversation_id), params=_params(limit=limit, after=after))

    @_iterator
    def messages_iter(self, conversation_id: str) -> Iterator[Message]:
        """Every message of the conversation, oldest first."""
        return _Pages(_Call("GET", _messages(conversation_id)), _by_after)

    # -- approvals ------------------------------------------------------------------------

    def approvals_list(self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None) -> ApprovalPage:
        """One page (reviewers and admins); `status`: pending, approved or rejected."""
        return _Call("GET", "/v1/approvals", params=_params(status=status, limit=limit, cursor=cursor))

    def approvals_get(self, id: str) -> Approval:
        return _Call("GET", f"/v1/approvals/{_seg(id)}")

    def approvals_approve(self, id: str, note: str | None = None) -> Approval:
        """Its fact becomes active (and readable)."""
        return _Call("POST", f"/v1/approvals/{_seg(id)}/approve", json=_body(note=note))

    def approvals_reject(self, id: str, note: str | None = None) -> Approval:
        """Its fact is rejected and never read."""
        return _Call("POST", f"/v1/approvals/{_seg(id)}/reject", json=_body(note=note))

    # -- participants' data ---------------------------------------------------------------

    def participant_export(self, participant_id: str) -> ParticipantExport:
        """Everything kept for one end user (admins)."""
        return _Call("GET", f"/v1/participants/{_seg(participant_id)}/export")

    def participant_erase(self, participant_id: str) -> Erasure:
        """Erase everything kept for one end user now, revisions too (admins)."""
        return _Call("DELETE", f"/v1/participants/{_seg(participant_id)}")

    # -- the project's members, keys and retention (admin API) -----------------------------

    def members_list(self, *, project_id: str | None = None) -> MemberPage:
        """Who has a role in the project: its own members and the tenant's."""
        return _Call("GET", "/v1/members", params=_params(projectId=project_id))

    def members_set(self, user: str, role: str, *, project_id: str | None = None) -> Member:
        """Give a person (by username) a role in the project: viewer, writer, reviewer or admin (admins)."""
        return _Call("POST", "/v1/members", params=_params(projectId=project_id), json={"user": user, "role": role})

    def members_remove(self, user: str, *, project_id: str | None = None) -> None:
        """Remove the person's role in the project (admins)."""
        return _Call("DELETE", f"/v1/members/{_seg(user)}", params=_params(projectId=project_id), answer=_nothing)

    def keys_list(self, *, project_id: str | None = None) -> ApiKeyPage:
        """The project's API keys, revoked ones too; never a key's secret (admins)."""
        return _Call("GET", "/v1/keys", params=_params(projectId=project_id))

    def keys_create(
        self, access: str, *, user: str | None = None, participant_id: str | None = None, name: str | None = None,
        project_id: str | None = None,
    ) -> ApiKeyCreated:
        """A new key (`apiKey`, shown in this answer only) for a member, default you; read or write,
        optionally bound to one participant (admins)."""
        body = _body(access=access, user=user, participantId=participant_id, name=name)
        return _Call("POST", "/v1/keys", params=_params(projectId=project_id), json=body)

    def keys_revoke(self, id: str, *, project_id: str | None = None) -> None:
        """Revoke a key: refused from the next request on (admins)."""
        return _Call("DELETE", f"/v1/keys/{_seg(id)}", params=_params(projectId=project_id), answer=_nothing)

    def retention_get(self, *, project_id: str | None = None) -> Retention:
        """Days the project keeps deleted and expired facts and unregistered conversations (None: forever)."""
        return _Call("GET", "/v1/retention", params=_params(projectId=project_id))

    def retention_set(
        self, *, deleted_facts_days: int | None, expired_facts_days: int | None, unregistered_conversations_days: int | None,
        project_id: str | None = None,
    ) -> Retention:
        """Set the project's retention; None keeps that kind of row forever (admins)."""
        body = {"deletedFactsDays": deleted_facts_days, "expiredFactsDays": expired_facts_days,
                "unregisteredConversationsDays": unregistered_conversations_days}
        return _Call("PUT", "/v1/retention", params=_params(projectId=project_id), json=body)

    # -- working memory (named like the memory_* tools) -----------------------------------

    def memory_save(
        self, namespace: str, key: str, value: str, *, type: str | None = None, references: Sequence[str] | None = None,
        project_id: str | None = None,
    ) -> MemorySaved:
        """`memory_save`: create the entry or write its next revision."""
        body = _body(key=key, value=value, type=type, references=list(references) if references is not None else None)
        return _Call("POST", _space(namespace, "/memory"), params=_params(projectId=project_id), json=body)

    def memory_search(self, namespace: str, query: str = "", *, project_id: str | None = None) -> MemorySearch:
        """`memory_search`: entries whose key or value contains `query` (case-insensitive)."""
        return _Call("GET", _space(namespace, "/memory"), params=_params(q=query, projectId=project_id))

    def memory_list(self, namespace: str, *, project_id: str | None = None) -> MemoryKeys:
        """`memory_list`: every key."""
        return _Call("GET", _space(namespace, "/memory/keys"), params=_params(projectId=project_id))

    def memory_delete(self, namespace: str, key: str, *, project_id: str | None = None) -> MemoryDeleted:
        """`memory_delete`: end the entry (`404` when there is none)."""
        return _Call("DELETE", _space(namespace, "/memory/" + _seg(key)), params=_params(projectId=project_id))

    def memory_query(self, namespace: str, query: str, *, limit: int | None = None, project_id: str | None = None) -> QueryResult:
        """`memory_query`: the relational query over memory, tool_calls and tasks."""
        return _Call("POST", _space(namespace, "/query"), params=_params(projectId=project_id), json=_body(query=query, limit=limit))

    def memory_turn(
        self, namespace: str, *, assistant_text: str | None = None, tool_calls: Sequence[Mapping[str, Any]] | None = None,
        thinking: str | None = None, project_id: str | None = None,
    ) -> Captured:
        """Auto-extraction from a finished turn (`[MEMORY: key] value` lines, last_action, tool results…)."""
        body = _body(assistantText=assistant_text, toolCalls=[dict(c) for c in tool_calls] if tool_calls is not None else None,
                     thinking=thinking)
        return _Call("POST", _space(namespace, "/turns"), params=_params(projectId=project_id), json=body)

    def memory_compaction(self, namespace: str, summary: str, *, project_id: str | None = None) -> Captured:
        """Compaction capture: decisions, critical context and `checkpoint:summary`."""
        return _Call("POST", _space(namespace, "/compactions"), params=_params(projectId=project_id), json={"summary": summary})

    def memory_tasks_put(self, namespace: str, tasks: Sequence[Task | Mapping[str, Any]], *, project_id: str | None = None) -> list[Task]:
        """Replace the task list the `tasks` relation reads."""
        return _Call("PUT", _space(namespace, "/tasks"), params=_params(projectId=project_id), json=[dict(t) for t in tasks])

    def memory_tasks(self, namespace: str, *, project_id: str | None = None) -> list[Task]:
        return _Call("GET", _space(namespace, "/tasks"), params=_params(projectId=project_id))

    def memory_tool(self, who: str, command: Mapping[str, Any], *, project_id: str | None = None) -> MemoryToolResult:
        """Claude's memory tool: one call's `input` (`{"command": "view", "path": "/memories"}`) on the
        MEMORY.md folder of `who` (a participant id, or `namespace:NAME`). A refused command raises
        MemoryHubError `memory-tool-error` whose `detail` is the error text for the model."""
        return _Call("POST", f"/v1/memory-tool/{_seg(who)}", params=_params(projectId=project_id), json=dict(command))

    def memory_block(
        self, namespace: str, *, prompt: str | None = None, budget: int | None = None, standing_rule: bool = False,
        project_id: str | None = None,
    ) -> MemoryBlock:
        """The graph-ordered `<memory>` block (`block`) with its token count and what was dropped."""
        params = _params(prompt=prompt, budget=budget, standingRule="true" if standing_rule else None, projectId=project_id)
        return _Call("GET", _space(namespace, "/block"), params=params)

    # -- keyed profiles (memory.json) -------------------------------------------------------

    def profile_save(self, participant_id: str, key: str, value: Any) -> dict[str, Any]:
        """`save_fact`: `{key, value, outcome: created|updated|unchanged, factId, version, text}`."""
        return _Call("PUT", _profile(participant_id, f"/facts/{_seg(key)}"), json={"value": value})

    def profile_memory(self, participant_id: str) -> dict[str, Any]:
        """`load_memory` as the memory.json object (keys in the order they were first saved)."""
        return _Call("GET", _profile(participant_id), answer=_field("memory"))

    def profile_keys(self, participant_id: str) -> list[str]:
        """`load_keys`."""
        return _Call("GET", _profile(participant_id, "/keys"), answer=_field("keys"))

    def profile_relevant_keys(self, participant_id: str, question: str, keys: list[str] | str | None = None) -> dict[str, Any]:
        """`select_relevant_keys`: `{keys, method, scores, warnings, text}` (`keys` empty when none is relevant)."""
        body: dict[str, Any] = {"question": question}
        if keys is not None:
            body["keys"] = keys
        return _Call("POST", _profile(participant_id, "/relevant-keys"), json=body)

    def profile_facts(self, participant_id: str, keys: list[str] | str) -> dict[str, Any]:
        """`get_facts_for_keys`: `{facts: {key: value}, text}` (`text` is "No results found." when none exist)."""
        joined = keys if isinstance(keys, str) else ",".join(keys)
        return _Call("GET", _profile(participant_id, "/facts"), params={"keys": joined})

    def profile_import(self, participant_id: str, memory: Mapping[str, Any], replace: bool = False) -> dict[str, list[str]]:
        """A memory.json object into the profile: `{created, updated, unchanged, removed}` (keys)."""
        return _Call("POST", _profile(participant_id, "/import"), json={"memory": dict(memory), "replace": replace})

    # -- markdown memory (MEMORY.md) -----------------------------------------------------------

    def markdown_export(self, participant_id: str | None = None) -> dict[str, str]:
        """The folder: file name -> text, MEMORY.md first."""
        return _Call("GET", "/v1/markdown", params=_folder_params(participant_id),
                     answer=lambda body: {item["name"]: item["text"] for item in body["files"]})

    def markdown_file(self, name: str, participant_id: str | None = None) -> str:
        """One file as text (`MEMORY.md`: the index)."""
        return _Call("GET", "/v1/markdown/" + _seg(name), params=_folder_params(participant_id),
                     headers={"Accept": "text/markdown"}, text=True)

    def markdown_import(self, files: Mapping[str, str], participant_id: str | None = None) -> dict[str, Any]:
        """Files (name -> text) back into facts: `{created, updated, unchanged, removed, keptUnplaced, files}`."""
        body: dict[str, Any] = {"files": [{"name": name, "text": text} for name, text in files.items()]}
        if participant_id:
            body["participantId"] = participant_id
        return _Call("POST", "/v1/markdown/import", json=body)


# --- the two clients -------------------------------------------------------------------


class MemoryHub(_Api):
    """Client of one memoryhub server, acting with one API key. Use it as a context manager."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        *,
        transport: httpx.BaseTransport | None = None,
    ):
        self.url, headers = _connection(url, api_key)
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport, headers=headers)

    def __enter__(self) -> MemoryHub:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"MemoryHub(url={self.url!r})"

    def _send(self, call: _Call | _Pages) -> Any:
        if isinstance(call, _Pages):
            return list(self._walk(call))
        with _reaching(self.url):
            response = self._http.request(call.method, call.path, params=call.params, json=call.json, headers=call.headers)
        return _answer(call, response)

    def _walk(self, pages: _Pages) -> Iterator[Any]:
        call: _Call | None = pages.call
        while call is not None:
            page = self._send(call)
            yield from page["data"]
            call = pages.after(call, page)

    @staticmethod
    def _method(build: Callable[..., _Call | _Pages]) -> Callable[..., Any]:
        @functools.wraps(build)
        def method(self: MemoryHub, *args: Any, **kwargs: Any) -> Any:
            return self._send(build(self, *args, **kwargs))

        return method

    @staticmethod
    def _iterator_method(build: Callable[..., _Pages]) -> Callable[..., Any]:
        @functools.wraps(build)
        def method(self: MemoryHub, *args: Any, **kwargs: Any) -> Iterator[Any]:
            yield from self._walk(build(self, *args, **kwargs))

        return method


class AsyncMemoryHub(_Api):
    """The same client for asyncio (httpx.AsyncClient): every method of MemoryHub for the
    endpoints above, awaited, with the same names, arguments and answers.

        async with AsyncMemoryHub() as hub:
            context = await hub.agent_context("acme.desk", "How will you contact me?", participant_id="end-7")
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.url, headers = _connection(url, api_key)
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport, headers=headers)

    async def __aenter__(self) -> AsyncMemoryHub:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:
        return f"AsyncMemoryHub(url={self.url!r})"

    async def _send(self, call: _Call | _Pages) -> Any:
        if isinstance(call, _Pages):
            return [item async for item in self._walk(call)]
        with _reaching(self.url):
            response = await self._http.request(call.method, call.path, params=call.params, json=call.json, headers=call.headers)
        return _answer(call, response)

    async def _walk(self, pages: _Pages) -> AsyncIterator[Any]:
        call: _Call | None = pages.call
        while call is not None:
            page = await self._send(call)
            for item in page["data"]:
                yield item
            call = pages.after(call, page)

    @staticmethod
    def _method(build: Callable[..., _Call | _Pages]) -> Callable[..., Any]:
        @functools.wraps(build)
        async def method(self: AsyncMemoryHub, *args: Any, **kwargs: Any) -> Any:
            return await self._send(build(self, *args, **kwargs))

        return method

    @staticmethod
    def _iterator_method(build: Callable[..., _Pages]) -> Callable[..., Any]:
        @functools.wraps(build)
        async def method(self: AsyncMemoryHub, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in self._walk(build(self, *args, **kwargs)):
                yield item

        # An async iterator, not an Iterator: say so in the hints and the signature.
        returns = "Async" + build.__annotations__["return"]
        method.__annotations__ = {**build.__annotations__, "return": returns}
        method.__signature__ = inspect.signature(build).replace(return_annotation=returns)  # type: ignore[attr-defined]
        return method


# The names the issue and most SDKs use.
Client = MemoryHub
AsyncClient = AsyncMemoryHub
