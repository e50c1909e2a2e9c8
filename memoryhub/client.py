"""A typed, synchronous Python client for the memoryhub API v1 (see API.md).

    from memoryhub.client import MemoryHub, MemoryHubError

    with MemoryHub() as hub:                      # MEMORYHUB_URL, MEMORYHUB_API_KEY
        fact = hub.facts_write({"type": "acme.note", "content": {"text": "…"},
                                "scope": {"participantId": "end-7"}})
        fact = hub.facts_supersede(fact["id"], "Prefers phone", expect_version=fact["version"])
        for f in hub.facts_iter(type="acme.note"):
            ...

Every non-2xx answer raises `MemoryHubError` carrying the problem+json body
(`status`, `code`, `detail`, `problem`). The module depends on httpx only: it imports
nothing from Django or the server, so scripts and the `memoryhub` CLI stay light.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Literal, NotRequired, TypedDict, cast

import httpx

__all__ = [
    "DEFAULT_URL",
    "Attribution",
    "Fact",
    "FactInput",
    "FactPage",
    "GeneratedBy",
    "Me",
    "MemoryHub",
    "MemoryHubError",
    "Revision",
    "Scope",
    "ScopeInput",
    "Subject",
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


class MemoryHub:
    """Client of one memoryhub server, acting with one API key. Use it as a context manager."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        *,
        transport: httpx.BaseTransport | None = None,
    ):
        self.url = (url or os.environ.get("MEMORYHUB_URL") or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("MEMORYHUB_API_KEY", "")
        if not key.strip():
            raise MemoryHubError(
                0, "missing-api-key",
                "No API key: set MEMORYHUB_API_KEY (or pass api_key=). `manage.py serve` prints one as `Write key:`; "
                "`manage.py apikey create` makes more.",
            )
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {key.strip()}", "Accept": "application/json", "User-Agent": USER_AGENT},
        )

    # -- plumbing -----------------------------------------------------------------------

    def __enter__(self) -> MemoryHub:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"MemoryHub(url={self.url!r})"

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        try:
            response = self._http.request(method, path, params=params, json=json, headers=headers)
        except httpx.TimeoutException as exc:
            raise MemoryHubError(0, "timeout", f"{self.url} did not answer in time ({exc.__class__.__name__}).") from exc
        except httpx.TransportError as exc:
            raise MemoryHubError(0, "connection-error", f"Cannot reach memoryhub at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise MemoryHubError.from_response(response)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise MemoryHubError(response.status_code, "bad-response", f"{method} {path} answered non-JSON.") from exc

    # -- identity -----------------------------------------------------------------------

    def me(self) -> Me:
        """What the key is: tenant, project, access, role, participant."""
        return cast(Me, self._request("GET", "/v1/me"))

    # -- facts --------------------------------------------------------------------------

    def facts_write(self, fact: FactInput | Mapping[str, Any], idempotency_key: str | None = None) -> Fact:
        """Write one fact (`201`); the same `key` in the same scope supersedes instead."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return cast(Fact, self._request("POST", "/v1/facts", json=dict(fact), headers=headers))

    def facts_write_batch(self, facts: list[FactInput] | list[Mapping[str, Any]], idempotency_key: str | None = None) -> list[Fact]:
        """Write up to 1,000 facts, all or nothing; returns them in order."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        body = self._request("POST", "/v1/facts/batch", json={"facts": [dict(f) for f in facts]}, headers=headers)
        return cast(list[Fact], body["facts"])

    def facts_list(self, **filters: Any) -> FactPage:
        """One page. Filters: type, participant_id, conversation_id, key, namespace, trust,
        status (default active), q, limit (1–500), cursor (camelCase names work too)."""
        return cast(FactPage, self._request("GET", "/v1/facts", params=_list_params(filters)))

    def facts_iter(self, **filters: Any) -> Iterator[Fact]:
        """Every fact matching the filters, newest first, following `nextCursor`."""
        params = _list_params(filters)
        while True:
            page = cast(FactPage, self._request("GET", "/v1/facts", params=params))
            yield from page["data"]
            cursor = page.get("nextCursor")
            if not cursor:
                return
            params = {**params, "cursor": cursor}

    def facts_get(self, id: str, revision: int | None = None, as_of: datetime | str | None = None) -> Fact | Revision:
        """The fact now, or its revision `revision`, or the revision current at `as_of`."""
        if revision is not None and as_of is not None:
            raise ValueError("give revision or as_of, not both")
        params: dict[str, str] = {}
        if revision is not None:
            params["revision"] = str(int(revision))
        if as_of is not None:
            params["asOf"] = _iso(as_of)
        return cast(Fact, self._request("GET", f"/v1/facts/{id}", params=params or None))

    def facts_supersede(self, id: str, content: Any, expect_version: int | None) -> Fact:
        """Write the next revision under the same id. `expect_version` is the version you
        read; a stale one raises `version-conflict` (409), None sends none (the server
        answers `428 precondition-required`)."""
        body: dict[str, Any] = {"content": content}
        if expect_version is not None:
            body["expectVersion"] = int(expect_version)
        return cast(Fact, self._request("POST", f"/v1/facts/{id}/supersede", json=body))

    def facts_verify(self, id: str) -> Fact:
        """Mark it verified (a reviewer or admin key); returns the new revision."""
        return cast(Fact, self._request("POST", f"/v1/facts/{id}/verify"))

    def facts_delete(self, id: str) -> None:
        """End the fact (`204`); `facts_get` then shows `status: deleted`."""
        self._request("DELETE", f"/v1/facts/{id}")

    def facts_revisions(self, id: str) -> list[Revision]:
        """Every revision, oldest first."""
        out: list[Revision] = []
        params: dict[str, str] | None = None
        while True:
            page = self._request("GET", f"/v1/facts/{id}/revisions", params=params)
            out.extend(page["data"])
            cursor = page.get("nextCursor")
            if not cursor:
                return out
            params = {"cursor": cursor}
