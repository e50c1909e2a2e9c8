"""LangGraph's long-term memory store over memoryhub's facts.

    from memoryhub.client import MemoryHub
    from memoryhub.integrations.langgraph import MemoryHubStore

    store = MemoryHubStore(MemoryHub(), participant_label=1)   # ("memories", user_id, ...)
    graph = builder.compile(store=store)

Every item is one fact of type `fact_type` (default `langgraph.item`) in the key's project:

- the item's namespace tuple is the fact's `namespace` (labels joined with `.`, which
  LangGraph forbids inside a label), its key the fact's `key`, its value the fact's content;
- `participant_label=i` makes label `i` of every namespace the fact's participant, so
  memoryhub's per-person scoping holds underneath: a participant-bound key reaches only
  that person's items, export and erasure take them with the person, and a natural-language
  search of one person's items runs as a `same-user` retrieval;
- `put` of an existing key writes the fact's next revision (its history stays readable at
  `/v1/facts/{id}/revisions`), `delete` ends it, `put(..., ttl=minutes)` sets `expiresAt`
  (memoryhub's expiry ends the item then; reading it does not push that back).

`search` with `query` ranks by memoryhub's retrieval (`/v1/retrieve`, keyword and
semantic, its 100 best) when the prefix fixes the participant or the store maps none;
otherwise by the words of the query found in the value. Filters (`{"k": v}`, `$eq`, `$ne`,
`$gt`, `$gte`, `$lt`, `$lte`) and prefix matching are applied here, as LangGraph's
InMemoryStore applies them, over the facts of the type (one person's when the prefix
names them); results are newest first, like LangGraph's PostgresStore. `abatch` runs
`batch` in a worker thread.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.memory import _compare_values, _does_match

from memoryhub.client import Fact, MemoryHub

__all__ = ["DEFAULT_TYPE", "MemoryHubStore", "decode_label", "encode_label"]

DEFAULT_TYPE = "langgraph.item"
SEPARATOR = "."
MAX_NAME = 200  # memoryhub's limit on a namespace or key
_PLAIN = re.compile(r"[A-Za-z0-9_:@/\-]")
_WORD = re.compile(r"\w+")


def encode_label(text: str) -> str:
    """A namespace label or key in memoryhub's name alphabet: other characters as `+HH` (UTF-8)."""
    out = "".join(ch if _PLAIN.fullmatch(ch) else "".join(f"+{b:02X}" for b in ch.encode()) for ch in text)
    return out or "+"  # the empty string (a key may be "")


def decode_label(text: str) -> str:
    """The label or key `encode_label` wrote."""
    if text == "+":
        return ""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] == "+":
            out.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            out += text[i].encode()
            i += 1
    return out.decode()


def _name(value: str, what: str) -> str:
    if len(value) > MAX_NAME:
        raise ValueError(f"the {what} is {len(value)} characters once encoded; memoryhub keeps at most {MAX_NAME}")
    return value


class MemoryHubStore(BaseStore):
    """A LangGraph BaseStore whose items are memoryhub facts (see the module docstring)."""

    # A put's ttl (minutes; `ttl_config={"default_ttl": ...}` for every put) is the fact's
    # expiresAt: memoryhub's expiry ends it. Reads do not extend it (refresh_ttl is not kept).
    supports_ttl = True

    def __init__(
        self, hub: MemoryHub, *, fact_type: str = DEFAULT_TYPE, participant_label: int | None = None,
        project_id: str | None = None, ttl_config: TTLConfig | None = None,
    ) -> None:
        self.hub, self.fact_type, self.participant_label, self.project_id = hub, fact_type, participant_label, project_id
        self.ttl_config = ttl_config

    # -- mapping ---------------------------------------------------------------------------------

    def _namespace(self, namespace: tuple[str, ...]) -> str:
        return _name(SEPARATOR.join(encode_label(label) for label in namespace), "namespace")

    def _participant(self, namespace: tuple[str, ...]) -> str | None:
        index = self.participant_label
        if index is None:
            return None
        if index >= len(namespace):
            raise ValueError(f"this store takes label {index} of a namespace as the participant; {namespace} has no such label")
        return namespace[index]

    def _item(self, fact: Fact, score: float | None = None, *, search: bool = False) -> Item:
        namespace = tuple(decode_label(label) for label in (fact["namespace"] or "").split(SEPARATOR))
        fields = dict(namespace=namespace, key=decode_label(fact["key"] or "+"), value=fact["content"],
                      created_at=datetime.fromisoformat(fact["createdAt"]), updated_at=datetime.fromisoformat(fact["updatedAt"]))
        return SearchItem(score=score, **fields) if search else Item(**fields)

    def _facts(self, prefix: tuple[str, ...]) -> Iterator[Fact]:
        """The live facts of the type under a namespace prefix (one person's when the prefix names them)."""
        participant = None
        if self.participant_label is not None and self.participant_label < len(prefix):
            participant = prefix[self.participant_label]
        for fact in self.hub.facts_iter(type=self.fact_type, participant_id=participant, limit=500):
            if fact["namespace"] is None or fact["key"] is None:
                continue
            labels = fact["namespace"].split(SEPARATOR)
            if len(labels) >= len(prefix) and all(encode_label(p) == label for p, label in zip(prefix, labels)):
                if self.project_id is None or fact["scope"]["projectId"] == self.project_id:
                    yield fact

    def _fact(self, namespace: tuple[str, ...], key: str) -> Fact | None:
        if self.participant_label is not None and self.participant_label >= len(namespace):
            return None  # no put could have written it
        page = self.hub.facts_list(type=self.fact_type, namespace=self._namespace(namespace), key=_name(encode_label(key), "key"),
                                   participant_id=self._participant(namespace), limit=1)
        return page["data"][0] if page["data"] else None

    # -- operations ------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                fact = self._fact(op.namespace, op.key)
                results.append(self._item(fact) if fact else None)
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _put(self, op: PutOp) -> None:
        if op.value is None:
            fact = self._fact(op.namespace, op.key)
            if fact is not None:
                self.hub.facts_delete(fact["id"])
            return
        body: dict[str, Any] = {
            "type": self.fact_type, "key": _name(encode_label(op.key), "key"), "namespace": self._namespace(op.namespace),
            "content": dict(op.value),
        }
        scope = {"participantId": self._participant(op.namespace), "projectId": self.project_id}
        body["scope"] = {name: value for name, value in scope.items() if value is not None}  # projectId null: tenant-wide
        if op.ttl is not None:
            expires = datetime.now(timezone.utc) + timedelta(minutes=op.ttl)
            body["expiresAt"] = expires.isoformat().replace("+00:00", "Z")
        self.hub.facts_write(body)

    def _matches(self, op: SearchOp, value: Any) -> bool:
        return not op.filter or all(_compare_values(value.get(key), wanted) for key, wanted in op.filter.items())

    def _search(self, op: SearchOp) -> list[SearchItem]:
        facts = [f for f in self._facts(op.namespace_prefix) if self._matches(op, f["content"])]
        if not op.query:
            facts.sort(key=lambda f: f["updatedAt"], reverse=True)
            return [self._item(f, search=True) for f in facts[op.offset:op.offset + op.limit]]
        scored = self._ranked(op, {f["id"]: f for f in facts})
        return [self._item(f, score, search=True) for f, score in scored[op.offset:op.offset + op.limit]]

    def _ranked(self, op: SearchOp, candidates: dict[str, Fact]) -> list[tuple[Fact, float]]:
        prefix = op.namespace_prefix
        mapped = self.participant_label is not None
        if mapped and self.participant_label >= len(prefix):
            words = {w.lower() for w in _WORD.findall(op.query or "")}
            scored = []
            for fact in candidates.values():
                found = {w.lower() for w in _WORD.findall(" ".join(_strings(fact["content"])))}
                if words and (share := len(words & found) / len(words)) > 0:
                    scored.append((fact, share))
            return sorted(scored, key=lambda pair: (pair[1], pair[0]["updatedAt"]), reverse=True)
        participant = prefix[self.participant_label] if mapped else None
        intent = {"source": "facts", "types": [self.fact_type], "scope": "same-user" if mapped else "same-project",
                  "mode": "both", "limit": 100}
        hits = self.hub.retrieve(op.query or "", [intent], participant_id=participant, project_id=self.project_id)["facts"]
        return [(candidates[hit["fact"]["id"]], hit["score"]) for hit in hits if hit["fact"]["id"] in candidates]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():  # read only what a literal prefix allows
            if condition.match_type == "prefix":
                prefix = tuple(label for label in condition.path[: next((i for i, p in enumerate(condition.path) if p == "*"), None)])
        namespaces = {self._item(fact).namespace for fact in self._facts(prefix)}
        if op.match_conditions:
            namespaces = {ns for ns in namespaces if all(_does_match(condition, ns) for condition in op.match_conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset:op.offset + op.limit]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value
