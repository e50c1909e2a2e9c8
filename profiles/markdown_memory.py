"""Markdown memory over the fact store (seed 004): a folder out, a folder back in.

A folder belongs to one project and one participant (or to no participant: the
project's own memory). Its facts are the live `memory.user|project|feedback|reference`
facts of that scope (no conversation, no namespace) and one `memory.layout` fact per file;
profiles.markdown decides where each goes and what an import writes. An import takes the
files it is given as they are, all or nothing: an equal line writes nothing, a changed
line writes its fact's next revision, a new line a new fact, a dropped line ends its fact.
Files it is not given are left alone, and a fact no import has placed yet (written
through the API since) is never ended by one: it shows again on the next export.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from accounts.services import Principal, Role, check_participant_id
from core.errors import NotFound, ValidationFailed
from facts.content import content_problems
from facts.models import Fact
from facts.selectors import facts_visible, live_condition
from facts.services import FactInput, fact_delete, fact_supersede, fact_write
from profiles import markdown as md

MAX_FILES = 500
MAX_ITEMS = 10_000
FACT_TYPES = [*md.FACT_TYPES.values(), md.LAYOUT_TYPE]


@dataclass(frozen=True)
class Folder:
    """Whose markdown memory: a project, and a participant or none (or a namespace: the memory tool's shared folders)."""

    principal: Principal
    project_id: Any
    participant_id: str | None
    namespace: str | None = None


def folder(*, principal: Principal, participant_id: str | None = None, project_id: Any = None, namespace: str | None = None) -> Folder:
    """The folder a request names. A key bound to a participant has theirs; naming one takes
    the participant rule; tenant-wide keys name the project (`projectId`)."""
    participant = participant_id or principal.participant_id
    if participant is not None:
        principal.require_participant(check_participant_id(participant))
    project = principal.project_required(project_id, "Markdown memory")
    return Folder(principal=principal, project_id=project, participant_id=participant, namespace=namespace)


def _facts(scope: Folder):
    queryset = facts_visible(principal=scope.principal).filter(
        project_id=scope.project_id, conversation_id__isnull=True, type__in=FACT_TYPES,
    )
    queryset = queryset.filter(namespace__isnull=True) if scope.namespace is None else queryset.filter(namespace=scope.namespace)
    if scope.participant_id is None:
        queryset = queryset.filter(participant_id__isnull=True)
    else:
        queryset = queryset.filter(participant_id=scope.participant_id)
    return queryset.filter(live_condition()).order_by("created_at", "id")


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _current(scope: Folder) -> tuple[dict[str, md.FileView], dict[str, Fact]]:
    """The folder as the store holds it now, and its facts by id."""
    facts = list(_facts(scope))
    records = [md.Record(str(f.id), f.type, f.content, f.created_at, f.updated_at) for f in facts if f.type != md.LAYOUT_TYPE]
    layouts = [md.Layout(str(f.id), f.key, f.content, f.updated_at) for f in facts if f.type == md.LAYOUT_TYPE and f.key]
    listed = {
        fact_id for layout in layouts if isinstance(layout.content, dict) and isinstance(layout.content.get("facts"), list)
        for fact_id in layout.content["facts"] if isinstance(fact_id, str)
    }
    missing = [fact_id for fact_id in listed - {r.id for r in records} if _is_uuid(fact_id)]
    gone = {}
    if missing:  # lines a layout still lists whose facts ended: when, so `updated` can say so
        rows = facts_visible(principal=scope.principal).filter(id__in=missing).values_list("id", "updated_at")
        gone = {str(fact_id): updated_at for fact_id, updated_at in rows}
    return md.build_folder(records, layouts, gone), {str(f.id): f for f in facts}


def markdown_export(*, scope: Folder) -> dict[str, str]:
    """Every file of the folder: `MEMORY.md` first, then the topic files by name."""
    files, _ = _current(scope)
    return {name: view.text() for name, view in files.items()}


def markdown_file(*, scope: Folder, name: str) -> str:
    """One file of the folder (`MEMORY.md` is always there, even empty); 404 for a topic file it lacks."""
    files = markdown_export(scope=scope)
    if name not in files:
        raise NotFound(f"No {name} in this markdown memory.")
    return files[name]


def _lock(scope: Folder) -> None:
    """One import of a folder at a time (until the transaction ends)."""
    name = f"markdown:{scope.principal.tenant_id}:{scope.project_id}:{scope.participant_id or ''}"
    if scope.namespace is not None:
        name += f":ns:{scope.namespace}"
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def _check(files: Any) -> dict[str, md.Parsed]:
    """Parse every file; refuse the whole import, naming each file and line, if any is wrong."""
    if not isinstance(files, dict) or not files:
        raise ValidationFailed("files must hold at least one file", errors={"files": ["at least one {name, text}"]})
    if len(files) > MAX_FILES:
        raise ValidationFailed(f"at most {MAX_FILES} files per import", errors={"files": [f"at most {MAX_FILES} files"]})
    errors: dict[str, list[str]] = {}
    parsed: dict[str, md.Parsed] = {}
    for name, text in files.items():
        field = f"files.{name}"
        if not isinstance(text, str):
            errors.setdefault(field, []).append("text must be a string")
            continue
        if "\x00" in text:
            errors.setdefault(field, []).append("text may not contain NUL characters")
            continue
        parsed[name] = item = md.parse(name, text)
        for problem in item.errors:
            errors.setdefault(field, []).append(f"line {problem.line}: {problem.message}" if problem.line else problem.message)
        if item.errors:
            continue
        for entry in item.items:
            problems, _, _ = content_problems(md.item_role(item, entry).content())
            for message in problems:
                errors.setdefault(field, []).append(f"line {entry.line}: {message}")
        layout = {"text": "", "file": name, "title": item.title, "template": item.template,
                                      "frontmatter": item.frontmatter, "facts": [str(uuid.UUID(int=0))] * len(item.items)}
        if problems := content_problems(layout)[0]:
            errors.setdefault(field, []).append(f"the file is too large to keep ({problems[0]}); split it into more topic files")
    if sum(len(p.items) for p in parsed.values()) > MAX_ITEMS:
        errors.setdefault("files", []).append(f"at most {MAX_ITEMS} lines of memory per import")
    if errors:
        field, messages = next(iter(errors.items()))
        raise ValidationFailed(f"{field}: {messages[0]}", errors=errors)
    return parsed


def markdown_import(*, scope: Folder, files: Any) -> dict:
    """Make the given files of the folder what the store holds, all or nothing; returns what changed."""
    scope.principal.require(Role.WRITER)
    parsed = _check(files)
    order = sorted(parsed, key=lambda name: (name != md.INDEX, name))
    report = []
    with transaction.atomic():
        _lock(scope)
        current, by_id = _current(scope)
        layouts = {f.key: f for f in by_id.values() if f.type == md.LAYOUT_TYPE}
        for name in order:
            plan = md.plan_file(current.get(name), parsed[name])
            report.append(_apply(scope, plan, by_id, layouts.get(name)))
    totals = {key: sum(item[key] for item in report) for key in ("created", "updated", "unchanged", "removed", "keptUnplaced")}
    return totals | {"files": report}


def _apply(scope: Folder, plan: md.FilePlan, by_id: dict[str, Fact], layout: Fact | None) -> dict:
    principal = scope.principal
    for fact_id in plan.ends:
        fact_delete(principal=principal, fact_id=fact_id)
    ids: list[str] = []
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    for step in plan.steps:  # in the file's order, so new facts are created in it too
        if step.action == "keep":
            ids.append(step.record)
            counts["unchanged"] += 1
        elif step.action == "update":
            fact = by_id[step.record]
            fact_supersede(principal=principal, fact_id=fact.id, content=step.role.content(), expect_version=fact.version, embed_inline=False)
            ids.append(step.record)
            counts["updated"] += 1
        else:
            fact, _ = fact_write(principal=principal, data=_input(scope, md.fact_type(step.role.type), step.role.content()), embed_inline=False)
            ids.append(str(fact.id))
            counts["created"] += 1
    content = plan.layout | {"facts": ids}
    # The layout is written after the lines, whenever the file changed: a file's `updated`
    # then moves on only for changes made after this import, not for the import itself.
    if layout is None or layout.content != content or plan.changes:
        fact_write(principal=principal, data=_input(scope, md.LAYOUT_TYPE, content, key=plan.name), embed_inline=False)
    return {"name": plan.name, **counts, "removed": len(plan.ends), "keptUnplaced": len(plan.kept_free)}


def _input(scope: Folder, kind: str, content: Any, key: str | None = None) -> FactInput:
    return FactInput(type=kind, content=content, key=key, project_id=scope.project_id, participant_id=scope.participant_id,
                     namespace=scope.namespace)


# What profiles.memory_tool builds on: the folder now, its lock, a fact of it.
current_folder = _current
lock = _lock
fact_input = _input
