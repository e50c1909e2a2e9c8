"""Working memory (seed 000, kdeps): a namespace's keyed entries, served to agent loops.

An entry is a fact with a `namespace` (e.g. an encoded working directory) and a `key` in
a project; its value is the fact's content (a JSON string), its type is inferred from
the key unless given (`workspaces.block.infer_type`), and its explicit references are
the ids of other entries of the namespace (shown to agents as their keys). Saving a key
again writes the entry's next revision. So the same entries are facts everywhere else:
`/v1/facts?namespace=`, revisions, retention, erasure, the dashboard.

The rest of the namespace's state lives beside its entries: the task list (`Workspace`)
and the tool calls an agent loop reported (`ToolCall`, the newest 200 kept), which the
relational query reads as `tasks` and `tool_calls`.

The pure parts are elsewhere: the `<memory>` block and text replies in
`workspaces.block`, extraction from turns and compactions and the caps in
`workspaces.extraction`, the query language in `workspaces.query`. Views are doors onto the
functions here; every read is scoped by tenant, project, namespace and visibility in SQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone

from accounts.services import Principal, Role
from core.api import iso_time
from core.errors import NotFound, ValidationFailed
from facts.content import name_problem
from facts.models import Fact, InvalidationReason, Status, ToolCall, Workspace
from facts.selectors import facts_visible, live_condition
from facts.services import FactInput, _end, acting_user, fact_write
from workspaces import block as memory_block, extraction, query as memory_query
from workspaces.block import Entry

TOOL_CALLS_KEPT = 200  # the `tool_calls` relation: this namespace's newest 200
MAX_TASKS = 500
MAX_TOOL_CALLS_PER_TURN = 100
MAX_TEXT = 256 * 1024  # characters of assistantText, thinking, a summary or a tool result


@dataclass(frozen=True)
class Space:
    """One namespace of one project, as one principal sees it."""

    principal: Principal
    project_id: Any
    namespace: str

    @property
    def participant_id(self) -> str | None:
        # A participant-bound key keeps its working memory for its participant; any
        # other key keeps it for the project.
        return self.principal.participant_id

    @property
    def rows(self) -> dict:
        """The columns that pick this space's rows (task list, tool calls): every row kind of a
        namespace follows the visibility of its entries (core.policy)."""
        return {"project_id": self.project_id, "participant_id": self.participant_id, "namespace": self.namespace}


def workspace(*, principal: Principal, namespace: str, project_id: Any = None) -> Space:
    """The namespace the request names; `projectId` is needed only by tenant-wide keys."""
    if problem := name_problem(namespace, "namespace"):
        raise ValidationFailed(problem, errors={"namespace": [problem]})
    project = principal.project_required(project_id, "Working memory")
    return Space(principal=principal, project_id=project, namespace=namespace)


# --- reading ---------------------------------------------------------------------------------


def _entry_facts(space: Space, *, for_update: bool = False):
    queryset = (
        facts_visible(principal=space.principal)
        .filter(
            project_id=space.project_id, namespace=space.namespace, participant_id=space.participant_id,
            conversation_id__isnull=True, key__isnull=False, status=Status.ACTIVE,
        )
        .filter(live_condition())
        .order_by("created_at", "id")
    )
    return queryset.select_for_update() if for_update else queryset


def value_of(fact: Fact) -> str:
    """An entry's value: its content when that is a string (what memory_save writes), else the JSON."""
    if isinstance(fact.content, str):
        return fact.content
    return json.dumps(fact.content, ensure_ascii=False, sort_keys=True)


def _entries(facts: list[Fact]) -> list[Entry]:
    key_of = {str(f.id): f.key for f in facts}
    return [
        Entry(
            key=f.key, value=value_of(f), type=f.type,
            references=tuple(key_of[str(ref)] for ref in f.references if str(ref) in key_of),
            created_at=f.created_at, updated_at=f.updated_at,
        )
        for f in facts
    ]


def entry_to_dict(fact: Fact, key_of: dict[str, str]) -> dict:
    return {
        "key": fact.key, "value": value_of(fact), "type": fact.type, "namespace": fact.namespace,
        "references": [key_of[str(ref)] for ref in fact.references if str(ref) in key_of],
        "createdAt": iso_time(fact.created_at), "updatedAt": iso_time(fact.updated_at),
        "factId": str(fact.id), "version": fact.version,
    }


def memory_entries(*, space: Space) -> tuple[list[Fact], dict[str, str]]:
    """Every live entry of the namespace, oldest first, and a map fact id -> key."""
    facts = list(_entry_facts(space))
    return facts, {str(f.id): f.key for f in facts}


def memory_search(*, space: Space, query: str) -> tuple[list[Fact], dict[str, str], str]:
    """Entries whose key or value contains `query`, case-insensitively; and the seed's reply text."""
    facts, key_of = memory_entries(space=space)
    needle = query.casefold()
    found = [f for f in facts if needle in f.key.casefold() or needle in value_of(f).casefold()]
    return found, key_of, memory_block.format_search(_entries(found))


def memory_keys(*, space: Space) -> tuple[list[str], str]:
    """Every key (no content), sorted; and the seed's reply text."""
    keys = sorted(_entry_facts(space).values_list("key", flat=True))
    return keys, memory_block.format_list(keys)


def memory_block_for(*, space: Space, prompt: str = "", budget: int | None = None, standing_rule: bool = False) -> memory_block.Block:
    """The graph-ordered `<memory>` block of the namespace, cut to `budget` tokens by relevance to `prompt`."""
    facts, _ = memory_entries(space=space)
    return memory_block.render_block(
        _entries(facts), prompt=prompt, budget=budget, now=timezone.now(), standing_rule=standing_rule,
    )


@dataclass
class Graph:
    """A namespace's entries as the block orders them: parents first, with their edges."""

    facts: dict[str, Fact]  # key -> the entry's fact
    entries: dict[str, Entry]  # key -> entry
    edges: dict[str, list[str]]  # key -> parent keys
    order: list[str]  # topological: parents before children
    resume: str | None
    error: str | None


def memory_graph(*, space: Space) -> Graph:
    """The namespace's graph: what the `<memory>` block renders as lines, for a person to read."""
    facts, _ = memory_entries(space=space)
    entries = _entries(facts)
    edges = memory_block.parents(entries)
    return Graph(
        facts={f.key: f for f in facts}, entries={e.key: e for e in entries}, edges=edges,
        order=memory_block.topological_order(entries, edges), resume=memory_block.resume_target(entries),
        error=memory_block.newest_unresolved_error(entries),
    )


def memory_namespaces(*, principal: Principal, project_id: Any) -> list[dict]:
    """The project's working-memory namespaces with live entries: `{namespace, entries, updatedAt}`, newest first."""
    rows = (
        facts_visible(principal=principal)
        .filter(project_id=project_id, namespace__isnull=False, key__isnull=False, participant_id=principal.participant_id, conversation_id__isnull=True)
        .filter(live_condition())
        .values("namespace")
        .annotate(entries=Count("id"), updated=Max("updated_at"))
        .order_by("-updated", "namespace")
    )
    return [{"namespace": row["namespace"], "entries": row["entries"], "updatedAt": row["updated"]} for row in rows]


# --- writing ---------------------------------------------------------------------------------


def _check_type(kind: str | None, key: str) -> str:
    if kind is None:
        return memory_block.infer_type(key)
    if kind not in memory_block.TYPES:
        message = f"type must be one of {', '.join(memory_block.TYPES)} (or left out to infer it from the key)"
        raise ValidationFailed(message, errors={"type": [message]})
    return kind


def _save(space: Space, facts: dict[str, Fact], capture: extraction.Capture) -> tuple[Fact, str]:
    """Write one entry inside the caller's transaction; `facts` (key -> live fact) is kept current."""
    missing = [ref for ref in capture.references if ref not in facts]
    if missing:
        message = f"references: no entry {missing[0]!r} in this workspace"
        raise ValidationFailed(message, errors={"references": [message]})
    holder = facts.get(capture.key)
    if holder is not None and holder.type != capture.type:
        # The slot is (namespace, type, key): a key saved under another type moves, it is not doubled.
        _end(holder, status=Status.DELETED, reason=InvalidationReason.SUPERSEDED, by=acting_user(space.principal))
    fact, outcome = fact_write(
        principal=space.principal,
        data=FactInput(
            type=capture.type, content=capture.value, key=capture.key, namespace=space.namespace,
            project_id=space.project_id, participant_id=space.participant_id,
            references=[str(facts[ref].id) for ref in capture.references],
        ),
    )
    if holder is not None and holder.type != capture.type:
        outcome = "superseded"
    facts[capture.key] = fact
    return fact, outcome


def _prune(space: Space, facts: dict[str, Fact], incoming: list[extraction.Capture]) -> list[str]:
    """Delete the oldest entries the caps leave no room for once `incoming` is written."""
    existing = [(f.key, f.type, f.updated_at) for f in facts.values()]
    doomed = extraction.prune(existing, incoming)
    by = acting_user(space.principal)
    for key in doomed:
        fact = facts.pop(key)
        _end(fact, status=Status.DELETED, reason=InvalidationReason.DELETED, by=by)
    return doomed


def memory_save_many(
    *, space: Space, captures: list[extraction.Capture],
) -> tuple[list[tuple[Fact, str]], list[str], dict[str, str]]:
    """Write entries in order, all or nothing, pruning what the caps leave no room for.

    Returns what was saved (fact, outcome), the keys pruned, and the namespace's live
    entries afterwards as fact id -> key (what `entry_to_dict` shows references with).
    """
    space.principal.require(Role.WRITER)
    if not captures:
        return [], [], {}
    with transaction.atomic():
        facts = {f.key: f for f in _entry_facts(space, for_update=True)}
        pruned = _prune(space, facts, captures)
        saved = [_save(space, facts, capture) for capture in captures]
    return saved, pruned, {str(f.id): f.key for f in facts.values()}


def memory_save(*, space: Space, key: str, value: Any, type: str | None = None, references: list[str] | None = None) -> dict:
    """`memory_save`: create or update the entry `key` (its next revision); the answer
    `{entry, outcome, pruned, text}` with the seed's reply text."""
    if problem := name_problem(key, "key"):
        raise ValidationFailed(problem, errors={"key": [problem]})
    if not isinstance(value, str):
        raise ValidationFailed("value must be a string", errors={"value": ["must be a string"]})
    refs = list(references or [])
    if not all(isinstance(ref, str) for ref in refs):
        raise ValidationFailed("references are the keys of other entries", errors={"references": ["must be keys (strings)"]})
    capture = extraction.Capture(key=key, value=value, type=_check_type(type, key), references=tuple(dict.fromkeys(refs)))
    saved, pruned, key_of = memory_save_many(space=space, captures=[capture])
    fact, outcome = saved[0]
    entry = entry_to_dict(fact, key_of)
    return {"entry": entry, "outcome": outcome, "pruned": pruned, "text": memory_block.format_save(fact.key, entry["value"])}


def memory_delete(*, space: Space, key: str) -> str:
    """`memory_delete`: end the entry `key`; the seed's reply text. Unknown key: 404."""
    space.principal.require(Role.WRITER)
    with transaction.atomic():
        fact = _entry_facts(space, for_update=True).filter(key=key).first()
        if fact is None:
            raise NotFound(f"No memory entry {key!r} in this workspace.")
        _end(fact, status=Status.DELETED, reason=InvalidationReason.DELETED, by=acting_user(space.principal))
    return memory_block.format_delete(key)


# --- turns, compactions, tasks --------------------------------------------------------------------


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationFailed(f"{field} must be a string", errors={field: ["must be a string"]})
    if len(value) > MAX_TEXT:
        raise ValidationFailed(f"{field} is longer than {MAX_TEXT} characters", errors={field: [f"at most {MAX_TEXT} characters"]})
    return value


def _tool_calls(raw: Any) -> list[dict]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_TOOL_CALLS_PER_TURN:
        message = f"toolCalls is a list of at most {MAX_TOOL_CALLS_PER_TURN} {{name, args, result}}"
        raise ValidationFailed(message, errors={"toolCalls": [message]})
    calls = []
    for index, call in enumerate(raw):
        field = f"toolCalls[{index}]"
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"].strip():
            raise ValidationFailed(f"{field}.name must be a non-empty string", errors={f"{field}.name": ["required"]})
        if len(call["name"]) > 200:
            raise ValidationFailed(f"{field}.name is longer than 200 characters", errors={f"{field}.name": ["at most 200 characters"]})
        args = call.get("args", {})
        if args is None:
            args = {}
        result = call.get("result", "")
        if not isinstance(result, str):
            result = json.dumps(result, ensure_ascii=False, sort_keys=True)
        calls.append({"name": call["name"], "args": args, "result": _text(result, f"{field}.result")})
    return calls


def record_turn(*, space: Space, assistant_text: Any = None, tool_calls: Any = None, thinking: Any = None) -> dict:
    """Auto-extraction after a turn: markers, last_action, last_files, tool results (write/exec/
    search tools only), thinking; every tool call is kept for the `tool_calls` relation."""
    space.principal.require(Role.WRITER)
    text, thought, calls = _text(assistant_text, "assistantText"), _text(thinking, "thinking"), _tool_calls(tool_calls)
    now = timezone.now()
    captures = extraction.extract_turn(assistant_text=text, tool_calls=calls, thinking=thought, now=now)
    with transaction.atomic():
        if calls:
            ToolCall.objects.bulk_create([
                ToolCall(tenant_id=space.principal.tenant_id, project_id=space.project_id, participant_id=space.participant_id,
                         namespace=space.namespace, name=c["name"], args=c["args"], result=c["result"], created_at=now)
                for c in calls
            ])
            _trim_tool_calls(space)
        saved, pruned, key_of = memory_save_many(space=space, captures=captures)
    return {"saved": turn_summary(saved, key_of), "pruned": pruned, "toolCallsRecorded": len(calls)}


def _tool_calls_of(space: Space):
    """The space's tool calls: its namespace's, kept for the same participant (or for none)."""
    return ToolCall.objects.filter(**space.rows)


def _trim_tool_calls(space: Space) -> None:
    recent = _tool_calls_of(space).order_by("-id")
    boundary = recent.values_list("id", flat=True)[TOOL_CALLS_KEPT:TOOL_CALLS_KEPT + 1].first()
    if boundary is not None:
        _tool_calls_of(space).filter(id__lte=boundary).delete()


def record_compaction(*, space: Space, summary: Any) -> dict:
    """Compaction capture: `## Key Decisions` -> decision entries, `## Critical Context` ->
    context entries, and the `checkpoint:summary` entry (Goal, Progress, decisions, context)."""
    text = _text(summary, "summary")
    if not text.strip():
        raise ValidationFailed("summary must not be empty", errors={"summary": ["must not be empty"]})
    captures = extraction.capture_compaction(text)
    saved, pruned, key_of = memory_save_many(space=space, captures=captures)
    return {"saved": turn_summary(saved, key_of), "pruned": pruned}


TASK_FIELDS = {"id": str, "desc": str, "status": str, "rounds": int, "note": str}


def tasks_put(*, space: Space, tasks: Any) -> list[dict]:
    """Replace the namespace's task list (the `tasks` relation)."""
    space.principal.require(Role.WRITER)
    if not isinstance(tasks, list) or len(tasks) > MAX_TASKS:
        message = f"the body is a list of at most {MAX_TASKS} tasks {{id, desc, status, rounds, note}}"
        raise ValidationFailed(message, errors={"tasks": [message]})
    clean = []
    for index, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise ValidationFailed(f"tasks[{index}] must be an object", errors={f"tasks[{index}]": ["must be an object"]})
        unknown = sorted(set(task) - set(TASK_FIELDS))
        if unknown:
            raise ValidationFailed(f"tasks[{index}].{unknown[0]} is not a task field", errors={f"tasks[{index}].{unknown[0]}": ["not a field"]})
        row = {}
        for name, kind in TASK_FIELDS.items():
            value = task.get(name, 0 if kind is int else "")
            if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValidationFailed(f"tasks[{index}].{name} must be a whole number", errors={f"tasks[{index}].{name}": ["a whole number >= 0"]})
            if kind is str and (not isinstance(value, str) or len(value) > 4000):
                raise ValidationFailed(f"tasks[{index}].{name} must be a string", errors={f"tasks[{index}].{name}": ["a string of at most 4000 characters"]})
            row[name] = value
        if not row["id"]:
            raise ValidationFailed(f"tasks[{index}].id is required", errors={f"tasks[{index}].id": ["required"]})
        clean.append(row)
    now = timezone.now()
    Workspace.objects.update_or_create(
        tenant_id=space.principal.tenant_id, **space.rows,
        defaults={"tasks": clean, "updated_at": now}, create_defaults={"tasks": clean, "created_at": now, "updated_at": now},
    )
    return clean


def tasks_get(*, space: Space) -> list[dict]:
    row = Workspace.objects.filter(**space.rows).first()
    return list(row.tasks) if row else []


# --- relational query -------------------------------------------------------------------------------


def relations(*, space: Space) -> dict[str, list[dict]]:
    """`memory`, `tool_calls` (newest 200, oldest first) and `tasks` as the query language sees them."""
    facts, key_of = memory_entries(space=space)
    memory = [
        {k: v for k, v in entry_to_dict(f, key_of).items() if k in ("key", "value", "namespace", "type", "references", "createdAt", "updatedAt")}
        for f in facts
    ]
    calls = list(
        _tool_calls_of(space).order_by("-id")[:TOOL_CALLS_KEPT]
    )
    tool_calls = [
        {"name": c.name, "args": c.args, "result": c.result, "timestamp": iso_time(c.created_at)} for c in reversed(calls)
    ]
    return {"memory": memory, "tool_calls": tool_calls, "tasks": tasks_get(space=space)}


def memory_query_run(*, space: Space, query: Any, limit: Any = None) -> dict:
    """`memory_query`: the seed's relational query over memory, tool_calls and tasks."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("query must be a non-empty string", errors={"query": ["required"]})
    if limit is None:
        limit = memory_query.DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= memory_query.MAX_LIMIT:
        message = f"limit must be 1 to {memory_query.MAX_LIMIT}"
        raise ValidationFailed(message, errors={"limit": [message]})
    data = relations(space=space)
    try:
        return memory_query.run_query(query, data, limit=limit)
    except memory_query.QuerySyntaxError as exc:
        # Where the parser stopped and what it would have taken there, for a model to fix its query.
        raise ValidationFailed(
            exc.detail, errors={"query": [exc.detail]},
            extra={"position": {"line": exc.line, "column": exc.column}, "expected": list(exc.expected)},
        ) from None
    except memory_query.QueryError as exc:
        raise ValidationFailed(str(exc), errors={"query": [str(exc)]}) from None


def turn_summary(saved: list[tuple[Fact, str]], key_of: dict[str, str]) -> list[dict]:
    return [entry_to_dict(fact, key_of) | {"outcome": outcome} for fact, outcome in saved]



# --- tool definitions ---------------------------------------------------------------------------------

# The definitions live with the other tool definitions, in a module that imports no Django,
# so the `memoryhub mcp` stdio server and client-side agent loops offer the same ones.
from workspaces.tools import working_memory_tools  # noqa: E402,F401
